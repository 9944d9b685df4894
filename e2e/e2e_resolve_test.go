//go:build realcli

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// TestRunResolvesDefaultAndSessionAlias: a section naming revision_id
// default and the session by its alias works as blobhub-worker's does:
// both are resolved before the first data command (which the API refuses
// default for), the thread's records live in the job folder of the
// session's id, and thread.yaml records the ids.
func TestRunResolvesDefaultAndSessionAlias(t *testing.T) {
	e := newClaudeE2E(t)
	e.Config.Sections = []setup.Section{{Name: "by-alias", JobType: setup.JobType, Session: setup.SessionTuple{
		OrgID: bhtest.OrgID, BlobID: bhtest.BlobID, RevisionID: "default", SessionID: bhtest.SessionAlias}}}
	e.writeConfig()
	const alias = "resolve/one"
	e.model.Push(claudetest.Text("RESOLVED"))
	e.handOff(alias, claudeType, "approval", "hello")
	e.activate(alias, 0, run.OutcomeTurnCompleted)

	dir := filepath.Join(e.state, "jobs", setup.JobType+"-"+bhtest.SessionID)
	if _, err := os.Stat(filepath.Join(setup.ThreadDir(dir, alias), "thread.yaml")); err != nil {
		t.Fatalf("no thread.yaml in the session id's job folder: %v", err)
	}
	th, err := envelope.LoadThread(filepath.Join(setup.ThreadDir(dir, alias), "thread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if th.Session.RevisionID != bhtest.RevisionID || th.Session.SessionID != bhtest.SessionID {
		t.Errorf("thread.yaml records session %+v, want the ids %s and %s", th.Session, bhtest.RevisionID, bhtest.SessionID)
	}
}
