package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/run"
)

// TestREADMEHelpIsVerbatim keeps the README's usage block equal to what
// `bhw-run --help` prints, exit codes included.
func TestREADMEHelpIsVerbatim(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help exit %d: %s", code, errOut.String())
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Usage\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("README.md has no usage block under ## Usage")
	}
	if got := strings.TrimRight(out.String(), "\n"); got != block {
		t.Fatalf("README's usage block differs from --help; paste this:\n%s", got)
	}
	for _, code := range []string{"64 ", "75 ", "77 ", "78 ", "130/143"} {
		if !strings.Contains(out.String(), code) {
			t.Errorf("--help does not list exit code %s", code)
		}
	}
}

// TestREADMEExitTableIsTheTable keeps the README's exit-code table equal to
// run.Exits, the table --help and the code use.
func TestREADMEExitTableIsTheTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Exit codes\n\n")
	if !ok {
		t.Fatal("README.md has no ## Exit codes section")
	}
	table, _, _ := strings.Cut(rest, "\n\n")
	if want := strings.TrimRight(run.ExitTable(), "\n"); table != want {
		t.Fatalf("README's exit-code table differs from run.Exits; paste this:\n%s", want)
	}
}
