//go:build realcli

package peer_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// peerDisk runs testdata/disk_models.py, which reads and writes state files
// with blobhub-worker's own models; for read, it returns what the worker
// reads of them.
func peerDisk(t *testing.T, args ...string) any {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), peerPython(t), append([]string{filepath.Join("testdata", "disk_models.py")}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("disk_models.py %v: %v\n%s", args, err, stderr)
	}
	if args[0] == "write" {
		return nil
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("disk_models.py: %v: %s", err, out)
	}
	return got
}

// at follows keys through decoded JSON.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestPeerDiskModels: the thread.yaml and not_mine.yaml bhw-run writes load
// with blobhub-worker's own models and mean the same to it: the open
// prompt is the worker's agent.park (prompt_id, kind, subject), the
// approval a person gave is agent.grant, the session names its org, blob
// and prefix, and not_mine's aliases are the worker's list. The other way,
// a thread.yaml the worker wrote (park, grant, usage totals, the session's
// fields, last_event) goes through bhw-run's read and write with nothing
// lost: the worker reads back what it wrote.
func TestPeerDiskModels(t *testing.T) {
	dir := t.TempDir()
	thread, notMine := filepath.Join(dir, "thread.yaml"), filepath.Join(dir, "not_mine.yaml")
	th := &envelope.Thread{
		Alias: "jobs/run",
		Session: envelope.SessionRef{OrgID: "org-1", BlobID: "blob-1", RevisionID: "rev-1", SessionID: "ses-1",
			SessionPrefix: "jobs/"},
		Agent: envelope.AgentState{State: envelope.StateActive, AgentSessionID: "sess-run",
			Grant: &envelope.Grant{Subject: "Write", Verdict: envelope.GrantApprove, GrantedBy: "prm_01EARLIER", GrantKey: "Write:/srv/work/x"}},
		Prompt: &envelope.Prompt{Kind: policy.KindApproval, PromptID: "prm_01RUN", ItemID: "itm-9", EmissionID: "e-9",
			Call: policy.Call{Tool: "Bash", Effect: "exec", Kind: policy.KindApproval}, InputJSON: `{"command":"make test"}`},
	}
	b, err := yaml.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(thread, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := setup.AddNotMines(t.Context(), dir, map[string]string{"art/b": setup.ReasonArtifact, "art/a": "not_a_job"}); err != nil {
		t.Fatal(err)
	}
	got := peerDisk(t, "read", thread, notMine)
	want := map[string]any{"prompt_id": "prm_01RUN", "kind": "approval", "subject": "Bash"}
	if park := at(got, "thread", "agent", "park"); !reflect.DeepEqual(park, want) {
		t.Errorf("the worker reads agent.park %v, want %v\n%s", park, want, b)
	}
	want = map[string]any{"subject": "Write", "verdict": "approve", "granted_by": "prm_01EARLIER", "grant_key": "Write:/srv/work/x"}
	if grant := at(got, "thread", "agent", "grant"); !reflect.DeepEqual(grant, want) {
		t.Errorf("the worker reads agent.grant %v, want %v", grant, want)
	}
	want = map[string]any{"org_id": "org-1", "blob_id": "blob-1", "revision_id": "rev-1", "session_id": "ses-1", "session_prefix": "jobs/"}
	if s := at(got, "thread", "session"); !reflect.DeepEqual(s, want) {
		t.Errorf("the worker reads session %v, want %v", s, want)
	}
	if a := at(got, "not_mine", "aliases"); !reflect.DeepEqual(a, []any{"art/a", "art/b"}) {
		t.Errorf("the worker reads not_mine aliases %v, want [art/a art/b]", a)
	}
	if nm := setup.LoadNotMine(dir); nm.Aliases["art/b"].Reason != setup.ReasonArtifact || len(nm.Aliases) != 2 {
		t.Errorf("bhw-run reads back not_mine %+v", nm)
	}

	// The worker's thread.yaml, through bhw-run's read and write.
	peerDisk(t, "write", thread)
	daemon := peerDisk(t, "read", thread, notMine)
	th, err = envelope.LoadThread(thread)
	if err != nil {
		t.Fatal(err)
	}
	if th.Prompt == nil || th.Prompt.PromptID != "prm_01DAEMON" || th.Agent.Grant == nil || th.Agent.Grant.GrantKey != "Bash:make test" {
		t.Errorf("bhw-run reads the daemon's park %+v and grant %+v", th.Prompt, th.Agent.Grant)
	}
	th.Turn.State = envelope.TurnStateIdle // what a run adds of its own
	if b, err = yaml.Marshal(th); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(thread, b, 0o600); err != nil {
		t.Fatal(err)
	}
	back := peerDisk(t, "read", thread, notMine)
	if !reflect.DeepEqual(at(back, "thread"), at(daemon, "thread")) {
		t.Errorf("after bhw-run's write the worker reads\n%v\nit wrote\n%v\nbhw-run wrote:\n%s", at(back, "thread"), at(daemon, "thread"), b)
	}
}

// TestPeerJobFolder: a section's folder under jobs/ is the one the worker
// names for it, with and without a prefix, for prefixes whose slug folds
// together, is cut, or is empty.
func TestPeerJobFolder(t *testing.T) {
	prefixes := []string{"", "jobs/", "a/b/", "a.b/", "~~/", "Projects/very-long-prefix-name-that-goes-past-the-slug/"}
	args := append([]string{"jobid", "ses_01J"}, prefixes...)
	want, _ := peerDisk(t, args...).([]any)
	if len(want) != len(prefixes) {
		t.Fatalf("the worker named %v", want)
	}
	for i, p := range prefixes {
		got := setup.JobID(setup.Section{JobType: setup.JobType, Session: setup.SessionTuple{SessionID: "ses_01J", SessionPrefix: p}})
		if got != want[i] {
			t.Errorf("prefix %q: bhw-run's job folder %q, the worker's %q", p, got, want[i])
		}
	}
}
