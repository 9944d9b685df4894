package antigravity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/antigravity/agytest"
	"github.com/blobhub/bhw-run/policy"
)

func start(t *testing.T, l agent.Launch) *antigravity.Session {
	t.Helper()
	s, err := antigravity.Start(context.Background(), l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	s.ExitWait, s.KillGrace, s.TurnGrace = 100*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { agenttest.CloseWithin(t, s, 30*time.Second) })
	return s
}

// TestAutonomous: no hook goes in, and a gate socket in bhw-run's own
// environment never reaches agy (with a hooks.json a killed run left, it
// would deny every call); the call runs without the gate.
func TestAutonomous(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	l, _ := launch(t, agenttest.Turn(agenttest.Step{Call: agenttest.Write(path)}, agenttest.Step{Text: "wrote it"}), "autonomous")
	l.Env = append(l.Env, antigravity.SocketEnv+"=/nonexistent/gate.sock")
	s := start(t, l)
	h := &agenttest.Recorder{}
	res := agenttest.RunTurn(t, s, "go", h, time.Minute)
	if res.Outcome != agent.TurnCompleted || len(h.Calls()) != 0 {
		t.Fatalf("Turn = %+v, gate calls %d", res, len(h.Calls()))
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the call did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.WorkFolder, ".agents")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an autonomous run touched .agents: %v", err)
	}
}

// TestGateNeverContacted: a gated turn whose calls ran while the hook was
// never contacted (agy did not find it) fails agy_gate_never_contacted,
// and the work folder's .agents is gone after the session.
func TestGateNeverContacted(t *testing.T) {
	l, _ := launch(t, agenttest.Turn(agenttest.Step{Call: agenttest.Exec("true")}, agenttest.Step{Text: "ran it"}), "guarded")
	l.Env = append(l.Env, agytest.NoHooksEnv+"=1")
	s := start(t, l)
	h := &agenttest.Recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }}
	res := agenttest.RunTurn(t, s, "go", h, time.Minute)
	if res.Outcome != agent.TurnFailed || !strings.HasPrefix(res.ErrorText, antigravity.NeverContacted+":") {
		t.Fatalf("Turn = %+v, want failed %s", res, antigravity.NeverContacted)
	}
	agenttest.CloseWithin(t, s, 30*time.Second)
	if _, err := os.Stat(filepath.Join(l.WorkFolder, ".agents")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".agents left after the session: %v", err)
	}
}

// TestParkEndsAgy: a parked call is denied to agy with a reason, agy is
// ended at once (its next step never comes), the call's result is the
// parked one, and the conversation id is init's, for the resume.
func TestParkEndsAgy(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "after-park")
	l, log := launch(t, agenttest.Script{SessionID: "conv-park", Turns: [][]agenttest.Step{{
		{Call: agenttest.Exec("make deploy")}, {Tool: agenttest.Exec("touch " + marker)}}}}, "approval")
	s := start(t, l)
	var asked policy.Call
	h := &agenttest.Recorder{Gate: func(c policy.Call) policy.Verdict { asked = c; return policy.Verdict{Action: policy.Park} }}
	res := agenttest.RunTurn(t, s, "go", h, time.Minute)
	if res.Outcome != agent.TurnParked || s.SessionID() != "conv-park" {
		t.Fatalf("Turn = %+v, session %q", res, s.SessionID())
	}
	if asked.Tool != "run_command" || asked.Target.Command != "make deploy" || asked.Effect != policy.EffectExec || asked.InvocationID != "1" {
		t.Fatalf("the gate was asked %+v", asked)
	}
	results := h.OfType(agent.ItemToolResult)
	if len(results) != 1 {
		t.Fatalf("results %v", results)
	}
	if id, ok := agent.IsParkedResult(results[0]); !ok || id != "1" {
		t.Fatalf("result %v is not the parked one", results[0])
	}
	agenttest.CloseWithin(t, s, 30*time.Second)
	if proc.GroupAlive(s.Pgid()) {
		t.Fatal("agy outlived the session")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("agy went on after the park: %v\n%s", err, log.String())
	}
}

// TestAskQuestionParks: agy's ask_question reaching the hook is the
// agent's own question: it goes to the gate as one, with its text, and
// parks the turn whatever the gate says of it.
func TestAskQuestionParks(t *testing.T) {
	l, _ := launch(t, agenttest.Turn(agenttest.Step{Ask: []policy.Question{{Question: "Which branch?"}}}, agenttest.Step{Text: "never"}), "approval")
	s := start(t, l)
	var asked policy.Call
	h := &agenttest.Recorder{Gate: func(c policy.Call) policy.Verdict { asked = c; return policy.Verdict{Action: policy.Allow} }}
	res := agenttest.RunTurn(t, s, "go", h, time.Minute)
	if res.Outcome != agent.TurnParked {
		t.Fatalf("Turn = %+v, want parked", res)
	}
	if asked.Kind != policy.KindAskUserQuestion || len(asked.Questions) != 1 || asked.Questions[0].Question != "Which branch?" {
		t.Fatalf("the gate was asked %+v", asked)
	}
}

// TestStartFailures: a missing agy fails the start, and an agy that says
// why on stderr before its init (refused flags) fails it too, with its
// words; neither is a crash.
func TestStartFailures(t *testing.T) {
	l, _ := launch(t, agenttest.Turn(), "approval")
	l.Executable = "/nonexistent/agy"
	if _, err := antigravity.Start(context.Background(), l); !strings.Contains(fmt.Sprint(err), agent.CodeAgentSpawnFailed) {
		t.Fatalf("Start = %v, want %s", err, agent.CodeAgentSpawnFailed)
	}
	if _, err := os.Stat(filepath.Join(l.WorkFolder, ".agents")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed start left .agents: %v", err)
	}
	l, _ = launch(t, agenttest.Script{StartupError: "error: --model and --effort cannot be used together"}, "approval")
	s := start(t, l)
	_, err := s.Turn(context.Background(), "go", &agenttest.Recorder{})
	var e *agent.Error
	if !errors.As(err, &e) || e.Code != agent.CodeAgentSpawnFailed || !strings.Contains(e.Message, "cannot be used together") {
		t.Fatalf("Turn = %v, want %s with agy's words", err, agent.CodeAgentSpawnFailed)
	}
}

// TestHookBeforeItsStep: an agy that runs a call's hook before it prints
// the call's ACTIVE step gets its calls decided (after a short wait for
// the step, without an id), and each late step is its own call's, never
// taken for the next call of the same tool.
func TestHookBeforeItsStep(t *testing.T) {
	l, _ := launch(t, agenttest.Turn(agenttest.Step{Call: agenttest.Exec("echo one")}, agenttest.Step{Call: agenttest.Exec("echo two")},
		agenttest.Step{Text: "both ran"}), "approval")
	l.Env = append(l.Env, agytest.HookFirstEnv+"=1")
	s := start(t, l)
	h := &agenttest.Recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }}
	res := agenttest.RunTurn(t, s, "go", h, time.Minute)
	calls := h.Calls()
	if res.Outcome != agent.TurnCompleted || len(calls) != 2 || calls[0].InvocationID != "" || calls[1].InvocationID != "" ||
		calls[1].Target.Command != "echo two" {
		t.Fatalf("Turn = %+v, calls %+v", res, calls)
	}
	if n := len(h.OfType(agent.ItemToolCall)); n != 2 {
		t.Fatalf("%d tool_call items", n)
	}
}
