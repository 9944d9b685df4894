package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/exit"
)

// TestREADMEHelpIsVerbatim keeps the README's usage block equal to what
// `bhw-run --help` prints, exit codes included.
func TestREADMEHelpIsVerbatim(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(bhwBin, "--help")
	cmd.Args[0] = "bhw-run"
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("--help: %v: %s", err, errOut.String())
	}
	block := docPart(t, "README.md", "## Usage\n\n```\n", "\n```", "usage block under ## Usage")
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
// exit.Classes, the table --help and the code use.
func TestREADMEExitTableIsTheTable(t *testing.T) {
	table := docPart(t, "README.md", "## Exit codes\n\n", "\n\n", "## Exit codes section")
	if want := strings.TrimRight(exit.Table(), "\n"); table != want {
		t.Fatalf("README's exit-code table differs from exit.Classes; paste this:\n%s", want)
	}
}

// docPart is the text of file from start to the first end after it; it
// fails the test, saying file has no what, unless both are there.
func docPart(t testing.TB, file, start, end, what string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), start)
	part, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no %s", file, what)
	}
	return part
}

// readmeShellBlocks are the ```sh blocks of the README from "## Set up" to
// "## Usage": the set-up and the try-out a newcomer follows.
func readmeShellBlocks(t *testing.T) []string {
	t.Helper()
	part := docPart(t, "README.md", "\n## Set up\n", "\n## Usage\n", "## Set up section before ## Usage")
	var blocks []string
	for {
		_, after, found := strings.Cut(part, "```sh\n")
		if !found {
			break
		}
		block, tail, _ := strings.Cut(after, "```")
		blocks = append(blocks, block)
		part = tail
	}
	return blocks
}

// TestREADMEConfigLoads: the config.yaml example of docs/configuration.md
// (the README's Configuration until it moved there), every agent's block
// included, is a config bhw-run accepts.
func TestREADMEConfigLoads(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## config.yaml\n")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/configuration.md has no yaml block under ## config.yaml")
	}
	s, err := resolveConfig(t, []byte(block), "")
	if err != nil {
		t.Fatalf("docs/configuration.md's config.yaml: %v", err)
	}
	for _, typ := range []string{"claude_code", "codex", "gemini", "qwen_code", "opencode", "copilot", "acp"} {
		if s.Config.Agents[typ] == nil {
			t.Errorf("docs/configuration.md's config.yaml has no agents.%s block", typ)
		}
	}
}
