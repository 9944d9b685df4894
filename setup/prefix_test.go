package setup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJobDirOlderPrefixedFolder: a thread an earlier bhw-run began in a
// prefixed section lives in the folder of the whole session; it is run
// there until it is moved, and every other thread of the section (and the
// section's own records) lives in the worker's folder.
func TestJobDirOlderPrefixedFolder(t *testing.T) {
	state := t.TempDir()
	sec := Section{Name: "p", JobType: JobType, Session: SessionTuple{SessionID: "ses_1", SessionPrefix: "p/"}}
	older := filepath.Join(state, "jobs", JobType+"-ses_1")
	if err := os.MkdirAll(ThreadDir(older, "p/old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ThreadDir(older, "p/old"), "thread.yaml"), []byte("alias: p/old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	worker := filepath.Join(state, "jobs", JobID(sec))
	if worker == older {
		t.Fatalf("a prefixed section's folder is the whole session's: %s", worker)
	}
	for alias, want := range map[string]string{"p/old": older, "p/new": worker, "": worker} {
		if got := jobDirFor(state, sec, alias); got != want {
			t.Errorf("%q: %s, want %s", alias, got, want)
		}
	}
	// Once moved (or begun again) in the worker's folder, that one is used.
	if err := os.MkdirAll(ThreadDir(worker, "p/old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := jobDirFor(state, sec, "p/old"); got != worker {
		t.Errorf("moved: %s, want %s", got, worker)
	}
}
