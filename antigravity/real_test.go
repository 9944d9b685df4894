//go:build realagy

package antigravity_test

// Against a real agy, signed in on this machine: `make live-check` runs
// this when one is installed (BHW_AGY_BIN, else agy on PATH). No test
// machine of the project has one (agy ships only from Google's own
// storage), so these are the checks a person runs where it is.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/policy"
)

func realAgy(t *testing.T, permissions string) agent.Launch {
	t.Helper()
	bin := os.Getenv("BHW_AGY_BIN")
	if bin == "" {
		t.Fatal("BHW_AGY_BIN names no agy; make live-check sets it when agy is on PATH")
	}
	log := agenttest.FailureLog(t)
	return agent.Launch{Executable: bin, WorkFolder: t.TempDir(), Env: os.Environ(), Permissions: permissions, Log: log.Log(),
		Model: os.Getenv("BHW_AGY_MODEL"), CacheDir: filepath.Join(t.TempDir(), "cache")}
}

// TestRealAgyGatedTurnAndResume: a gated turn that reads a file goes
// through the hook (the gate sees the read), completes, names its
// conversation, leaves the operator's hooks.json as it was, and a second
// process resumes the conversation.
func TestRealAgyGatedTurnAndResume(t *testing.T) {
	l := realAgy(t, "guarded")
	if err := os.WriteFile(filepath.Join(l.WorkFolder, "secret-word.txt"), []byte("pelican\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hooks := []byte("{\"operator\": {\"enabled\": false}}\n")
	_ = os.MkdirAll(filepath.Join(l.WorkFolder, ".agents"), 0o755)
	_ = os.WriteFile(filepath.Join(l.WorkFolder, ".agents", "hooks.json"), hooks, 0o644)
	s := start(t, l)
	h := &agenttest.Recorder{Gate: func(c policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }}
	res := agenttest.RunTurn(t, s, "Read the file secret-word.txt in the workspace with your file viewing tool and answer with the word it holds, nothing else.", h, 5*time.Minute)
	if res.Outcome != agent.TurnCompleted || s.SessionID() == "" {
		t.Fatalf("Turn = %+v, conversation %q", res, s.SessionID())
	}
	if len(h.Calls()) == 0 {
		t.Fatalf("the hook never reached the gate; items %v", h.Items())
	}
	var said string
	for _, it := range h.OfType(agent.ItemText) {
		said += it.Brief
	}
	if !strings.Contains(strings.ToLower(said), "pelican") {
		t.Errorf("the reply %q lacks the word", said)
	}
	agenttest.CloseWithin(t, s, time.Minute)
	if b, _ := os.ReadFile(filepath.Join(l.WorkFolder, ".agents", "hooks.json")); !bytes.Equal(b, hooks) {
		t.Fatalf("hooks.json after the turn: %s", b)
	}
	l.SessionID, l.Resume = s.SessionID(), true
	s2 := start(t, l)
	res = agenttest.RunTurn(t, s2, "What was the word? Answer with it only.", &agenttest.Recorder{Gate: h.Gate}, 5*time.Minute)
	if res.Outcome != agent.TurnCompleted || res.ResumeFailed {
		t.Fatalf("resumed Turn = %+v", res)
	}
	_ = antigravity.Type
}
