//go:build realcli

package codex

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/policy"
)

// Tests in this file drive the real pinned codex CLI against the scripted
// fake model.

func TestAutonomousCommandPatchAndResume(t *testing.T) {
	r := newRig(t,
		codextest.Run("echo made > made.txt && echo done-cmd"),
		codextest.Patch(codextest.AddFile("hello.txt", "hello")),
		codextest.Say("all done"),
	)
	// A model other than config.toml's: the resumed request must keep it.
	// (Switching models on resume makes Codex spend a request on a context
	// compaction first, so both processes use the same one.)
	l0 := r.launch("autonomous", "")
	l0.Model = "gpt-5.6-terra"
	s := r.start(l0)
	thread := s.SessionID()
	if thread == "" || s.Pgid() <= 0 {
		t.Fatalf("SessionID %q Pgid %d", thread, s.Pgid())
	}
	h := &recorder{}
	res := runTurn(t, s, "make two files", h)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("outcome %q (%s)", res.Outcome, res.ErrorText)
	}
	want := []string{"tool_call", "tool_result", "tool_call", "tool_result", "text"}
	if got := h.Types(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("items %v, want %v", got, want)
	}
	calls, results := h.OfType(agent.ItemToolCall), h.OfType(agent.ItemToolResult)
	if n := toolMeta(calls[0])["name"]; n != ToolExec {
		t.Errorf("first call %v", n)
	}
	if n := toolMeta(calls[1])["name"]; n != ToolApplyPatch {
		t.Errorf("second call %v", n)
	}
	if out, _ := toolMeta(results[0])["output"].(string); !strings.Contains(out, "done-cmd") {
		t.Errorf("command output %q", out)
	}
	for _, res := range results {
		if toolMeta(res)["is_error"] != false {
			t.Errorf("result is an error: %v", res.Meta)
		}
	}
	if h.OfType(agent.ItemText)[0].Brief != "all done" {
		t.Errorf("text %q", h.OfType(agent.ItemText)[0].Brief)
	}
	if b, err := os.ReadFile(r.path("hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
	if !exists(r.path("made.txt")) {
		t.Error("made.txt not created")
	}
	// 3 model requests, 100 input (40 cached) and 10 output tokens each.
	if res.Usage != (agent.Usage{InputTokens: 300, InputTokensCached: 120, OutputTokens: 30}) {
		t.Errorf("usage %+v", res.Usage)
	}
	if res.DurationMS <= 0 {
		t.Errorf("duration %d", res.DurationMS)
	}
	if reqs := r.model.Requests(); len(reqs) != 3 || reqs[0].Model != "gpt-5.6-terra" {
		t.Fatalf("requests %d, model %q", len(reqs), reqs[0].Model)
	}
	closeNow(t, s)

	// A new process resumes the thread with another model and effort: the
	// request to the model must carry both, and the whole history.
	r.model.Push(codextest.Say("resumed"))
	l := r.launch("autonomous", "")
	l.Resume, l.SessionID, l.Model, l.Effort = true, thread, "gpt-5.6-terra", "low"
	s2 := r.start(l)
	if s2.SessionID() != thread {
		t.Errorf("resumed SessionID %q, want %q", s2.SessionID(), thread)
	}
	h2 := &recorder{}
	res2 := runTurn(t, s2, "second message", h2)
	if res2.Outcome != agent.TurnCompleted {
		t.Fatalf("resumed outcome %q", res2.Outcome)
	}
	reqs := r.model.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != "gpt-5.6-terra" || last.Effort != "low" {
		t.Errorf("resumed request model %q effort %q", last.Model, last.Effort)
	}
	texts := strings.Join(last.UserTexts(), "\n")
	if !strings.Contains(texts, "make two files") || last.LastUserText() != "second message" {
		t.Errorf("resumed history user texts %q", last.UserTexts())
	}
	if outs := last.ToolOutputs(); len(outs) != 2 {
		t.Errorf("resumed history tool outputs %v", outs)
	}
	if res2.Usage.InputTokens != 100 || res2.Usage.OutputTokens != 10 {
		t.Errorf("resumed usage %+v", res2.Usage)
	}
}

// allowByFingerprint parks every call but the one whose fingerprint was
// granted.
func allowByFingerprint(grant string) func(policy.Call) policy.Verdict {
	return func(c policy.Call) policy.Verdict {
		if grant != "" && c.Fingerprint == grant {
			return policy.Verdict{Action: policy.Allow}
		}
		return policy.Verdict{Action: policy.Park}
	}
}

// parkOnlyCall starts a session under approval and sandbox and runs msg
// with a gate that parks every call: the turn must park on one call and
// leave name unwritten. It returns the session, its thread, the recorder
// and that call.
func parkOnlyCall(t *testing.T, r *rig, sandbox, msg, name string) (*Session, string, *recorder, policy.Call) {
	t.Helper()
	s := r.start(r.launch("approval", sandbox))
	thread := s.SessionID()
	h := &recorder{Gate: allowByFingerprint("")}
	res := runTurn(t, s, msg, h)
	if res.Outcome != agent.TurnParked {
		t.Fatalf("outcome %q", res.Outcome)
	}
	if exists(r.path(name)) {
		t.Fatalf("%s exists after a park", name)
	}
	if len(h.Calls()) != 1 {
		t.Fatalf("%d gate calls", len(h.Calls()))
	}
	return s, thread, h, h.Calls()[0]
}

// resumeGranted resumes thread in a new process whose gate allows only
// the parked call's fingerprint and runs msg: the turn must complete,
// the gate asked once about the same fingerprint. It returns the recorder.
func resumeGranted(t *testing.T, r *rig, sandbox, thread, msg string, parked policy.Call) *recorder {
	t.Helper()
	l := r.launch("approval", sandbox)
	l.Resume, l.SessionID = true, thread
	s := r.start(l)
	h := &recorder{Gate: allowByFingerprint(parked.Fingerprint)}
	res := runTurn(t, s, msg, h)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("resumed outcome %q", res.Outcome)
	}
	if len(h.Calls()) != 1 || h.Calls()[0].Fingerprint != parked.Fingerprint {
		t.Fatalf("resumed gate calls %+v", h.Calls())
	}
	return h
}

func TestApprovalEscalationParkThenGrant(t *testing.T) {
	r := newRig(t, codextest.Escalate("touch esc.txt", "needs to leave the sandbox"))
	s, thread, h, c := parkOnlyCall(t, r, "", "touch it", "esc.txt")
	if c.Tool != ToolExec || c.Effect != policy.EffectExec || c.Target.Command != "touch esc.txt" ||
		c.Target.Cwd != r.work || c.Kind != policy.KindApproval || !strings.HasPrefix(c.Fingerprint, "sha256:") || c.InvocationID == "" {
		t.Fatalf("call %+v", c)
	}
	results := h.OfType(agent.ItemToolResult)
	if _, parked := agent.IsParkedResult(results[0]); len(results) != 1 || !parked || toolMeta(results[0])["is_error"] != false {
		t.Fatalf("results %v, want the parked call's result", results)
	}
	closeNow(t, s)

	// The person approved: a new process resumes; the identical command is
	// asked again, allowed by its fingerprint, and runs once.
	r.model.Push(codextest.Escalate("touch esc.txt", "needs to leave the sandbox"), codextest.Say("done"))
	h2 := resumeGranted(t, r, "", thread, "A person approved your call. Run it again now, unchanged.", c)
	if h2.Calls()[0].InvocationID == c.InvocationID {
		t.Fatalf("resumed gate calls %+v", h2.Calls())
	}
	if !exists(r.path("esc.txt")) {
		t.Fatal("esc.txt not created after the grant")
	}
	// What the model saw of the parked call in the resumed history.
	reqs := r.model.Requests()
	hist := reqs[1]
	if outs := hist.ToolOutputs(); !strings.Contains(outs[c.InvocationID], "aborted") {
		t.Errorf("parked call output in history %q", outs)
	}
}

func TestApprovalDenyDeclines(t *testing.T) {
	r := newRig(t, codextest.Escalate("touch deny.txt", "wants out"), codextest.Say("understood"))
	s := r.start(r.launch("approval", "workspace-write"))
	h := &recorder{Gate: func(policy.Call) policy.Verdict {
		return policy.Verdict{Action: policy.Deny, Message: "rule 2 denies it"}
	}}
	res := runTurn(t, s, "touch it", h)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("outcome %q", res.Outcome)
	}
	if exists(r.path("deny.txt")) {
		t.Fatal("deny.txt exists after a deny")
	}
	reqs := r.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var told string
	for _, o := range reqs[1].ToolOutputs() {
		told = o
	}
	if !strings.Contains(told, "rejected") {
		t.Errorf("the model was told %q", told)
	}
	results := h.OfType(agent.ItemToolResult)
	if len(results) != 1 || toolMeta(results[0])["is_error"] != true {
		t.Errorf("results %v", results)
	}
}

func TestReadOnlyFileChangeParkThenGrant(t *testing.T) {
	patch := codextest.AddFile("p.txt", "hello from the fake")
	r := newRig(t, codextest.Patch(patch))
	s, thread, h, c := parkOnlyCall(t, r, "read-only", "write p.txt", "p.txt")
	if c.Tool != ToolApplyPatch || c.Effect != policy.EffectWrite || len(c.Target.Paths) != 1 ||
		c.Target.Paths[0] != r.path("p.txt") || c.Fingerprint == "" || c.GrantRoot != "" {
		t.Fatalf("call %+v", c)
	}
	// No item/completed comes for a cancelled file change: the synthetic
	// result closes the call.
	if want := "tool_call,tool_result"; strings.Join(h.Types(), ",") != want {
		t.Fatalf("items %v", h.Types())
	}
	if _, parked := agent.IsParkedResult(h.OfType(agent.ItemToolResult)[0]); !parked {
		t.Fatalf("result %v, want the parked call's result", h.OfType(agent.ItemToolResult)[0].Meta)
	}
	closeNow(t, s)

	r.model.Push(codextest.Patch(patch), codextest.Say("written"))
	resumeGranted(t, r, "read-only", thread, "A person approved your patch. Run it again now, unchanged.", c)
	if b, err := os.ReadFile(r.path("p.txt")); err != nil || string(b) != "hello from the fake\n" {
		t.Fatalf("p.txt = %q, %v", b, err)
	}
}

func TestHTTP500FailsTurn(t *testing.T) {
	r := newRig(t, codextest.Fail(500))
	s := r.start(r.launch("autonomous", ""))
	h := &recorder{}
	res := runTurn(t, s, "hello", h)
	if res.Outcome != agent.TurnFailed || res.ErrorText == "" || res.ResumeFailed {
		t.Fatalf("result %+v", res)
	}
	st := h.OfType(agent.ItemStatus)
	if len(st) == 0 {
		t.Fatalf("no status item; items %v", h.Types())
	}
	t.Logf("error text %q", res.ErrorText)
}

func TestInterruptSleepingCommandThenClose(t *testing.T) {
	r := newRig(t, codextest.Run("sleep 30; touch late.txt"))
	s := r.start(r.launch("autonomous", ""))
	started := make(chan struct{}, 1)
	h := &recorder{OnItem: func(it agent.Item) {
		if it.Type() == agent.ItemToolCall {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}}
	go func() {
		<-started
		if err := s.Interrupt(); err != nil {
			t.Errorf("Interrupt: %v", err)
		}
	}()
	t0 := time.Now()
	res := runTurn(t, s, "sleep", h)
	if res.Outcome != agent.TurnInterrupted {
		t.Fatalf("outcome %q", res.Outcome)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Fatalf("interrupt took %v", d)
	}
	// The interrupted command got no item/completed; its call is closed.
	if rs := h.OfType(agent.ItemToolResult); len(rs) != 1 || toolMeta(rs[0])["is_error"] != true {
		t.Fatalf("results %v", h.Types())
	}
	closeNow(t, s)
	if err := syscall.Kill(-s.Pgid(), 0); err != syscall.ESRCH {
		t.Fatalf("process group %d still there: %v", s.Pgid(), err)
	}
	if exists(r.path("late.txt")) {
		t.Fatal("the interrupted command finished")
	}
}

func TestCancelledContextInterrupts(t *testing.T) {
	r := newRig(t, codextest.Run("sleep 30; touch late.txt"))
	s := r.start(r.launch("autonomous", ""))
	res, err := agenttest.CancelAt(s, "sleep", agent.ItemToolCall)
	if err != context.Canceled || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
}

func TestResumeUnknownThread(t *testing.T) {
	r := newRig(t)
	l := r.launch("approval", "")
	l.Resume, l.SessionID = true, "01a2286a-4310-7e90-a6da-000000000000"
	s := r.start(l)
	res := runTurn(t, s, "hello", &recorder{})
	if !res.ResumeFailed {
		t.Fatalf("result %+v", res)
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Fatalf("%d model requests", n)
	}
}

func TestStartFailsWithBadArgs(t *testing.T) {
	r := newRig(t)
	l := r.launch("autonomous", "")
	l.ExtraArgs = []string{"--no-such-flag"}
	_, err := Start(context.Background(), l)
	e := asEnvelopeError(err)
	if e == nil || e.Code != agent.CodeAgentSpawnFailed {
		t.Fatalf("Start error %v", err)
	}
	t.Logf("%v", err)
}

func TestSandboxWorksHere(t *testing.T) {
	home := t.TempDir()
	start := time.Now()
	err := SandboxWorks(context.Background(), codextest.Bin(t), codextest.Env(home))
	t.Logf("SandboxWorks on this machine: %v (%v)", err, time.Since(start))
	if err != nil {
		t.Fatalf("the codex sandbox does not work here, so approval/guarded threads would be refused: %v", err)
	}
	if err := SandboxWorks(context.Background(), "/bin/false", codextest.Env(home)); err == nil {
		t.Fatal("a failing check reported success")
	}
}

// A provider's limits and refusals, as the pinned CLI reports them: each
// fails the turn with its Failure, and the usage limit with its reset.
func TestLimitsAndRefusedKey(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	cases := []struct {
		name    string
		step    codextest.Step
		key     string // the key the fake takes, "" any
		dropKey bool   // the provider's key variable is not set
		want    string
		resetAt time.Time
	}{
		{name: "UsageLimit", step: codextest.UsageLimited(reset), want: agent.FailureRateLimit, resetAt: reset},
		{name: "RateLimited", step: codextest.RateLimited(time.Now().Add(time.Hour)), want: agent.FailureRateLimit},
		{name: "RefusedKey", step: codextest.Say("never"), key: "the-right-key", want: agent.FailureAuth},
		{name: "NoKeyVariable", step: codextest.Say("never"), dropKey: true, want: agent.FailureAuth},
		{name: "ServerError", step: codextest.Fail(500), want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.step)
			r.model.RequireKey(c.key)
			l := r.launch("autonomous", "")
			if c.dropKey {
				l.Env = slices.DeleteFunc(l.Env, func(kv string) bool { return strings.HasPrefix(kv, "FAKE_OPENAI_API_KEY=") })
			}
			s := r.start(l)
			res := runTurn(t, s, "hello", &recorder{})
			if res.Outcome != agent.TurnFailed || res.Failure != c.want || !res.ResetAt.Equal(c.resetAt) {
				t.Fatalf("result %+v, want failed %q resetting %v", res, c.want, c.resetAt)
			}
			t.Logf("error text %q", res.ErrorText)
		})
	}
}
