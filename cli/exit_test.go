package cli

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// failingWriter refuses every write: a closed stdout, a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write /dev/stdout: no space left on device")
}

// TestUnexpectedErrorIsInternalEverywhere: an error without a documented
// code exits 1 INTERNAL in every command, as it does in a run (ls used to
// exit 64, "usage", for a stdout it could not write); urfave/cli's own
// errors (a flag value it cannot parse) stay 64.
func TestUnexpectedErrorIsInternalEverywhere(t *testing.T) {
	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	global := []string{"bhw-run", "--api-url", "file://" + filepath.Join(root, "store"), "--state-dir", filepath.Join(root, "state"),
		"--revision", "rev_local", "--session", "ses_local", "--log-format", "json"}
	var out, errOut bytes.Buffer
	if code := Main(append(global, "thread", "new", "--work-folder", root, "demo/t1"), &out, &errOut, "", adapters); code != 0 {
		t.Fatalf("thread new: exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := Main(append(global, "ls"), failingWriter{}, &errOut, "", adapters); code != 1 || !strings.Contains(errOut.String(), "INTERNAL") {
		t.Fatalf("ls to a stdout that fails: exit %d, stderr %q; want 1 INTERNAL", code, errOut.String())
	}
	errOut.Reset()
	if code := Main(append(global, "--lock-wait", "soon", "demo/t1"), &out, &errOut, "", adapters); code != 64 {
		t.Fatalf("a bad flag value: exit %d, want 64 (stderr %q)", code, errOut.String())
	}
}
