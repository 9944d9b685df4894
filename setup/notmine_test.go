package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNotMineOlderMapping: a not_mine.yaml an earlier bhw-run wrote (a
// mapping alias → reason) is still read, and the next write makes it the
// worker's list with the reasons beside it.
func TestNotMineOlderMapping(t *testing.T) {
	dir := t.TempDir()
	old := "aliases:\n  art/a:\n    reason: artifact\n    updated_at: \"2026-05-27T12:35:01Z\"\n"
	if err := os.WriteFile(filepath.Join(dir, "not_mine.yaml"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if nm := LoadNotMine(dir); nm.Aliases["art/a"].Reason != ReasonArtifact {
		t.Fatalf("the older mapping read as %+v", nm)
	}
	if err := AddNotMine(t.Context(), dir, "art/b", "not_a_job"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "not_mine.yaml"))
	if !strings.HasPrefix(string(b), "aliases:\n    - art/a\n    - art/b\n") {
		t.Errorf("written as:\n%s", b)
	}
	// The worker's own file: a list with no reasons, which ls checks again.
	if err := os.WriteFile(filepath.Join(dir, "not_mine.yaml"), []byte("aliases:\n- w/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if nm := LoadNotMine(dir); len(nm.Aliases) != 1 || nm.Aliases["w/x"].Cached(time.Now()) {
		t.Errorf("the worker's list read as %+v", nm)
	}
}
