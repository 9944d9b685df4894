package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// The keys of profiles the run does not use, and of the v1 credentials
// file: an agent of the same user can read both files.
const (
	otherProfileKey = "bhk_other_profile_5512"
	v1FileKey       = "bhk_v1_worker_7784"
)

// writeCredentials gives the harness's home (h.state) a credentials file
// with a profile the run does not use, and a v1 credentials file.
func (h *harness) writeCredentials() string {
	h.t.Helper()
	creds := "profiles:\n  other:\n    api_key: " + otherProfileKey + "\n    api_url: https://other.example/v1\n"
	writeFile(h.t, filepath.Join(h.state, ".blobhub", "credentials.yaml"), creds, 0o600)
	writeFile(h.t, filepath.Join(h.state, ".blobhub-worker", "credentials.yaml"), "api:\n  key: "+v1FileKey+"\n  url: https://api.blobhub.io/v1\n", 0o600)
	return creds
}

// wantNoKeys fails when a file bhw-run wrote, or an item of one of the
// threads, holds one of the keys.
func (h *harness) wantNoKeys(files []string, threads []string, keys ...string) {
	h.t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, k := range keys {
			if strings.Contains(string(b), k) {
				h.t.Errorf("%s holds the key %s:\n%s", filepath.Base(f), k, b)
			}
		}
	}
	for _, alias := range threads {
		for _, it := range h.srv.Items(alias) {
			b, _ := json.Marshal(it)
			for _, k := range keys {
				if strings.Contains(string(b), k) {
					h.t.Errorf("an item of %s holds the key %s: %s", alias, k, b)
				}
			}
		}
	}
}

// TestOtherProfilesKeysRedacted: the agent cats the credentials files (a
// tool of the same user can); its tool_result reaches the thread, the
// journal and thread.log with every key of every profile, and of the v1
// file, redacted, not only the key the run uses.
func TestOtherProfilesKeysRedacted(t *testing.T) {
	h := newHarness(t, false)
	creds := h.writeCredentials()
	const alias = "projects/p1/cat-creds"
	h.handOff(alias, "autonomous", "show me the credentials")
	cat := agenttest.Exec("cat ~/.blobhub/credentials.yaml ~/.blobhub-worker/credentials.yaml")
	cat.Result = creds + "api:\n  key: " + v1FileKey + "\n" + "and the runner's own: " + bhtest.RunnerKey
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Tool: cat}, {Text: "the key is " + otherProfileKey}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	dir := setup.ThreadDir(h.setup().JobDir, alias)
	h.wantNoKeys([]string{filepath.Join(dir, "emissions.jsonl"), filepath.Join(dir, "logs", "thread.log")},
		[]string{alias}, otherProfileKey, v1FileKey, bhtest.RunnerKey)
	var redacted bool
	for _, it := range h.srv.Items(alias) {
		redacted = redacted || strings.Contains(string(it.Metadata), "[REDACTED]")
	}
	if !redacted {
		t.Fatal("no item says [REDACTED]: the tool output did not reach the thread")
	}
}

// TestThreadFailedRedacted: a key inside an envelope field reaches the
// thread_failed item through the checklist's message; the item, the
// journal that holds it, thread.yaml, section.log and the summary all
// carry it redacted.
func TestThreadFailedRedacted(t *testing.T) {
	h := newHarness(t, false)
	h.writeCredentials()
	const alias = "projects/p1/key-in-envelope"
	h.srv.Put(alias, envelopeWith(h.work, func(md map[string]any) {
		md["agent"].(map[string]any)["type"] = "agent-" + otherProfileKey
	}))
	h.srv.PersonPost(alias, "start")
	sum := h.run(alias)
	want(t, sum, OutcomeFailed, exit.Failed)
	h.wantThreadFailed(alias, exit.CodeAgentTypeUnsupported)
	dir := setup.ThreadDir(h.setup().JobDir, alias)
	h.wantNoKeys([]string{filepath.Join(dir, "emissions.jsonl"), filepath.Join(dir, "thread.yaml"),
		filepath.Join(h.setup().JobDir, "logs", "section.log")}, []string{"worker", alias}, otherProfileKey)
	if b, _ := json.Marshal(sum); strings.Contains(string(b), otherProfileKey) || !strings.Contains(string(b), "[REDACTED]") {
		t.Fatalf("summary %s", b)
	}
}
