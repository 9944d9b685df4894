package claude_test

// Tests against the scripted fake claude (the test binary re-executed):
// the failure modes the real CLI cannot be made to show on demand.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/policy"
)

func fakeLaunch(t *testing.T, sc claudetest.FakeScript, permissions string) (agent.Launch, *syncBuf) {
	t.Helper()
	exe, env := claudetest.FakeAgentCommand(t, sc)
	log := &syncBuf{}
	return agent.Launch{Executable: exe, WorkFolder: t.TempDir(), Env: env, SessionID: newUUID(),
		Permissions: permissions, Log: log.Log()}, log
}

// fastClose shortens the graces so escalation is quick in tests.
func fastClose(s *claude.Session) {
	s.ExitWait, s.KillGrace, s.TurnGrace = 100*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
}

func TestFakeCrashMidTurn(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{Text: "working"}, {Crash: 3, Stderr: "panic: fake boom"},
	}}}, "approval")
	s := start(t, l)
	h := &recorder{}
	_, err := s.Turn(context.Background(), "go", h)
	e := asEnvelopeError(err)
	if e == nil || e.Code != agent.CodeAgentCrashed {
		t.Fatalf("err = %v, want AGENT_CRASHED", err)
	}
	if !strings.Contains(e.Message, "exit status 3") || !strings.Contains(e.Message, "panic: fake boom") {
		t.Errorf("message = %q, want the exit status and last stderr line", e.Message)
	}
	if got := h.Types(); len(got) != 1 || got[0] != agent.ItemText {
		t.Errorf("items = %v", got)
	}
}

func TestFakeStartupFailure(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{StartupError: "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"}, "autonomous")
	s := start(t, l)
	_, err := s.Turn(context.Background(), "go", &recorder{})
	if e := asEnvelopeError(err); e == nil || e.Code != agent.CodeAgentSpawnFailed || !strings.Contains(e.Message, "root/sudo") {
		t.Fatalf("err = %v, want AGENT_SPAWN_FAILED with the stderr line", err)
	}
}

func TestFakeExecFailure(t *testing.T) {
	_, err := claude.Start(context.Background(), agent.Launch{Executable: "/nonexistent/claude",
		WorkFolder: t.TempDir(), SessionID: newUUID(), Permissions: "approval"})
	if e := asEnvelopeError(err); e == nil || e.Code != agent.CodeAgentSpawnFailed {
		t.Fatalf("err = %v, want AGENT_SPAWN_FAILED", err)
	}
}

func TestFakeGarbageSkipped(t *testing.T) {
	l, log := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{Garbage: "this is not json"},
		{Garbage: `{"type":"weird_new_kind","x":1}`},
		{Garbage: `{"type":"assistant","message":5}`},
		{Garbage: `[1,2,3]`},
		{Text: "after the garbage"},
	}}}, "approval")
	s := start(t, l)
	h := &recorder{}
	res, err := s.Turn(context.Background(), "go", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	if it := h.OfType(agent.ItemText); len(it) != 1 || it[0].Brief != "after the garbage" {
		t.Fatalf("items = %+v", h.Items())
	}
	for _, want := range []string{"skipped a bad line", `unknown type "weird_new_kind"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestFakeOverlongLines(t *testing.T) {
	l, log := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{BigLine: 100 << 20},
		{Text: "after the big line"},
		{BigRequest: 70 << 20},
	}}}, "approval")
	s := start(t, l)
	h := &recorder{}
	t0 := time.Now()
	res, err := s.Turn(context.Background(), "go", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	texts := h.OfType(agent.ItemText)
	if len(texts) != 2 || texts[0].Brief != "after the big line" || !strings.HasPrefix(texts[1].Brief, "big request answered: deny:") {
		t.Fatalf("texts = %+v", texts)
	}
	if len(h.Calls()) != 0 {
		t.Errorf("the over-long request reached the gate: %+v", h.Calls())
	}
	if n := strings.Count(log.String(), " adapter skipped a line of"); n != 2 {
		t.Errorf("%d skipped-line notes, want 2", n)
	}
	if len(log.String()) > 1<<20 {
		t.Errorf("log is %d bytes: the skipped lines were copied", len(log.String()))
	}
	t.Logf("170 MB of over-long lines in %v", time.Since(t0))
}

func TestFakePermissions(t *testing.T) {
	write := &claudetest.FakeTool{Name: "Write", Input: map[string]any{"file_path": "/w/a.txt", "content": "x"}}
	bash := &claudetest.FakeTool{Name: "Bash", Input: map[string]any{"command": "rm -rf build", "description": "clean"}}
	l, log := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{
		{{Permission: write}, {Permission: bash}},
		{{Permission: bash}},
	}}, "guarded")
	s := start(t, l)
	h := &recorder{Answers: map[string]policy.Verdict{
		"Write": {Action: policy.Allow},
		"Bash":  {Action: policy.Deny, Message: "denied by worker rule 1"},
	}}
	res, err := s.Turn(context.Background(), "go", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	results := h.OfType(agent.ItemToolResult)
	if len(results) != 2 {
		t.Fatalf("results = %+v", results)
	}
	allowOut := results[0].Meta["tool"].(map[string]any)
	if allowOut["is_error"] != false || allowOut["output"] != `ran with {"content":"x","file_path":"/w/a.txt"}` {
		t.Errorf("allowed result = %+v: the input must go back unchanged", allowOut)
	}
	denyOut := results[1].Meta["tool"].(map[string]any)
	if denyOut["is_error"] != true || denyOut["output"] != "denied by worker rule 1" {
		t.Errorf("denied result = %+v", denyOut)
	}
	c := h.Calls()[1]
	if c.Effect != policy.EffectExec || c.Target.Command != "rm -rf build" || c.Summary != "Bash → rm -rf build" ||
		c.Kind != policy.KindApproval || c.InvocationID == "" {
		t.Errorf("bash call = %+v", c)
	}
	// The description is not part of the fingerprint.
	if want := claude.Fingerprint("Bash", []byte(`{"command":"rm -rf build"}`)); c.Fingerprint != want {
		t.Errorf("fingerprint = %s, want %s", c.Fingerprint, want)
	}
	for _, l := range log.Lines(agent.StreamStdin) {
		if strings.Contains(l, "updatedPermissions") || strings.Contains(l, "localSettings") {
			t.Errorf("permission suggestions echoed: %s", l)
		}
	}

	// Park: deny + interrupt; the turn ends parked, not failed.
	h.Answers["Bash"] = policy.Verdict{Action: policy.Park}
	res, err = s.Turn(context.Background(), "again", h)
	if err != nil || res.Outcome != agent.TurnParked || res.ErrorText != "" {
		t.Fatalf("parked Turn = %+v, %v", res, err)
	}
	if !strings.Contains(log.String(), `"behavior":"deny","interrupt":true,"message":"waiting for a person"`) {
		t.Errorf("no deny+interrupt in the log:\n%s", log)
	}
}

func TestFakeAskUserQuestion(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{Ask: []byte(`{"questions":[{"question":"Which regions?","header":"Regions","multiSelect":true,"options":[{"label":"eu"},{"label":"us"}]}]}`)},
	}}}, "autonomous")
	s := start(t, l)
	// Even an Allow parks a question: it has no answers to give.
	h := &recorder{Answers: map[string]policy.Verdict{"*": {Action: policy.Allow}}}
	res, err := s.Turn(context.Background(), "ask", h)
	if err != nil || res.Outcome != agent.TurnParked {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	c := h.Calls()[0]
	if c.Kind != policy.KindAskUserQuestion || len(c.Questions) != 1 || !c.Questions[0].MultiSelect ||
		len(c.Questions[0].Options) != 2 || c.Questions[0].Options[1].Label != "us" {
		t.Fatalf("call = %+v", c)
	}
}

func TestFakeInterrupt(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{
		{{Text: "long work"}, {WaitInterrupt: true}},
		{{Text: "next turn"}},
	}}, "approval")
	s := start(t, l)
	h := &recorder{}
	h.OnItem = func(it agent.Item) {
		if it.Brief == "long work" {
			// From another goroutine, as run's signal handler does.
			errc := make(chan error)
			go func() { errc <- s.Interrupt() }()
			if err := <-errc; err != nil {
				t.Errorf("Interrupt: %v", err)
			}
		}
	}
	res, err := s.Turn(context.Background(), "go", h)
	if err != nil || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	// The session stays usable, and the next turn is not "interrupted".
	res, err = s.Turn(context.Background(), "go on", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("next Turn = %+v, %v", res, err)
	}
}

// A hung agent: ctx ends the turn (interrupt, short grace), Close kills it.
func TestFakeHangTimeout(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{{Hang: true}}}}, "approval")
	s := start(t, l)
	fastClose(s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := s.Turn(ctx, "go", &recorder{})
	if !errors.Is(err, context.DeadlineExceeded) || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	pgid := s.Pgid()
	closeSession(t, s)
	if m := groupMembers(pgid); len(m) > 0 {
		t.Fatalf("group %d still has %v", pgid, m)
	}
}

// An agent ignoring SIGTERM is still ended, by SIGKILL after the grace.
func TestFakeIgnoresSIGTERM(t *testing.T) {
	l, log := fakeLaunch(t, claudetest.FakeScript{IgnoreSIGTERM: true, Turns: [][]claudetest.FakeStep{{{Hang: true}}}}, "approval")
	s := start(t, l)
	fastClose(s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Turn(ctx, "go", &recorder{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Turn err = %v", err)
	}
	pid := s.Pgid()
	t0 := time.Now()
	closeSession(t, s)
	if d := time.Since(t0); d < s.ExitWait+s.KillGrace {
		t.Errorf("Close took %v: it cannot have waited for SIGTERM to fail", d)
	}
	if !proc.Exited(pid) {
		t.Fatalf("pid %d still there", pid)
	}
	for _, want := range []string{"SIGTERM to group", "SIGKILL to group", "signal: killed"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// A grandchild that keeps the agent's stdout open does not keep Turn or
// Close waiting once the agent itself is gone.
func TestFakeGrandchildHoldsStdout(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{{Grandchild: true}, {Text: "spawned"}}}}, "approval")
	s := start(t, l)
	fastClose(s)
	h := &recorder{}
	res, err := s.Turn(context.Background(), "go", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	texts := h.OfType(agent.ItemText)
	pid, err := strconv.Atoi(strings.TrimPrefix(texts[0].Brief, "grandchild "))
	if err != nil {
		t.Fatalf("texts = %+v", texts)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The grandchild lives in its own session, out of the group's reach:
	// the agent's supervisor stops it once the agent is gone
	// (docs/processes.md).
	deadline := time.Now().Add(30 * time.Second)
	for !proc.Exited(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !proc.Exited(pid) {
		t.Fatalf("grandchild %d outlived the agent's end", pid)
	}
}

// A control_request whose body does not decode (a field of an unexpected
// type) must still be answered: the CLI waits for every answer.
func TestFakeUndecodableRequestAnswered(t *testing.T) {
	l, _ := fakeLaunch(t, claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{RawRequest: `{"type":"control_request","request_id":"raw_req_1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf /"},"tool_use_id":"toolu_x","requires_user_interaction":"maybe"}}`},
	}}}, "approval")
	s := start(t, l)
	fastClose(s)
	h := &recorder{Answers: map[string]policy.Verdict{"*": {Action: policy.Allow}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.Turn(ctx, "go", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v (the request was left unanswered)", res, err)
	}
	texts := h.OfType(agent.ItemText)
	if len(texts) != 1 || texts[0].Brief != "raw request answered: success deny" {
		t.Fatalf("texts = %+v, want a deny", texts)
	}
}

// An agent that stops reading its stdin leaves a large user message stuck
// in the pipe; Close must still end the process, and Turn must return with
// no completed turn.
func TestFakeCloseWhileTurnWriteIsStuck(t *testing.T) {
	dir := t.TempDir()
	deaf := filepath.Join(dir, "deaf")
	if err := os.WriteFile(deaf, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log syncBuf
	writing := log.Signal(agent.StreamStdin)
	s, err := claude.Start(context.Background(), agent.Launch{Executable: deaf, WorkFolder: dir,
		Env: []string{"PATH=/usr/bin:/bin"}, SessionID: newUUID(), Permissions: "approval", Log: log.Log()})
	if err != nil {
		t.Fatal(err)
	}
	fastClose(s)
	turned := make(chan error, 1)
	go func() {
		res, err := s.Turn(context.Background(), strings.Repeat("x", 8<<20), &recorder{})
		if err == nil && res.Outcome == agent.TurnCompleted {
			err = errors.New("completed")
		}
		turned <- err
	}()
	<-writing // the message is being written: far more than a pipe holds
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is stuck behind the blocked write")
	}
	select {
	case err := <-turned:
		if err != nil && err.Error() == "completed" {
			t.Error("Turn reported a completed turn for a message that never reached the agent")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Turn is stuck in its write after Close")
	}
}

// A line the agent prints when no Turn is reading (here the answer to an
// Interrupt between turns) must not pin the stdout reader after Close.
func TestFakeCloseEndsTheReaderBetweenTurns(t *testing.T) {
	exe, env := claudetest.FakeAgentCommand(t, claudetest.FakeScript{})
	var log syncBuf
	read := log.Signal(agent.StreamStdout)
	s, err := claude.Start(context.Background(), agent.Launch{Executable: exe, WorkFolder: t.TempDir(),
		Env: env, SessionID: newUUID(), Permissions: "approval", Log: log.Log()})
	if err != nil {
		t.Fatal(err)
	}
	fastClose(s)
	if err := s.Interrupt(); err != nil {
		t.Fatal(err)
	}
	<-read // the reader holds the control_response and no Turn takes it
	closeSession(t, s)
	deadline := time.Now().Add(30 * time.Second)
	for readerRunning() {
		if time.Now().After(deadline) {
			t.Fatal("the stdout reader outlived Close")
		}
		runtime.Gosched()
	}
}

func readerRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "proc.(*Process).readStdout")
}
