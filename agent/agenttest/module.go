package agenttest

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot is the folder of go.mod above the test's directory: where the
// pinned CLIs (.tools/) and the recorded transcripts (testdata/) are.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = up
	}
}

// PinnedCLI is a real agent CLI of the pinned version: the path in the
// variable envVar names (make test sets it), or rel under the module root
// (where `make tools` installs it). A missing one fails the test, under CI
// and everywhere else: the tests that call this are built with the realcli
// tag only, which says the CLIs are there, and none of them skips.
func PinnedCLI(t testing.TB, what, envVar, rel string) string {
	t.Helper()
	p := os.Getenv(envVar)
	if p == "" {
		p = filepath.Join(ModuleRoot(t), rel)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the pinned %s is missing at %s (%v); run `make tools` (make test does), or set %s", what, p, err, envVar)
	}
	return p
}
