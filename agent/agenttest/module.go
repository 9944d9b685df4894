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
