package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestThreadStopAndRetryLines: thread stop and thread retry each write
// their state and say, for a person, where the thread came from, where it
// went and what the next run does with it.
func TestThreadStopAndRetryLines(t *testing.T) {
	srv := bhtest.New(t)
	thread := func(state string) string {
		return `{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":"/w"},"agent":{"type":"claude_code"},` +
			`"instance":{"state":"` + state + `"}}}}`
	}
	srv.Put("projects/p1/to-stop", thread("pending"))
	srv.Put("projects/p1/to-retry", thread("failed"))

	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("BLOBHUB_API_KEY", bhtest.RunnerKey)
	global := []string{"bhw-run", "--api-url", srv.URL(), "--state-dir", filepath.Join(root, "state"),
		"--revision", bhtest.RevisionID, "--session", bhtest.SessionID}
	for _, tc := range []struct{ command, alias, line, state string }{
		{"stop", "projects/p1/to-stop", "thread projects/p1/to-stop: pending → completed; the next run stops it\n", `"state":"completed"`},
		{"retry", "projects/p1/to-retry", "thread projects/p1/to-retry: failed → pending; the next run activates it\n", `"state":"pending"`},
	} {
		var out, errOut bytes.Buffer
		if code := Main(append(global, "thread", tc.command, tc.alias), &out, &errOut, "", adapters); code != 0 {
			t.Fatalf("thread %s: exit %d, stderr %q", tc.command, code, errOut.String())
		}
		if out.String() != tc.line {
			t.Errorf("thread %s printed %q, want %q", tc.command, out.String(), tc.line)
		}
		if o, ok := srv.Get(tc.alias); !ok || !strings.Contains(string(o.Value), tc.state) {
			t.Errorf("thread %s left %s, want %s", tc.command, o.Value, tc.state)
		}
	}
}
