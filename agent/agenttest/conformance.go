package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// Fixture is one adapter and its fake, for Conformance.
type Fixture struct {
	Adapter agent.Adapter
	// Launch is a launch of the adapter's fake that plays s, in a fresh work
	// folder (WorkFolder set), with its environment and a Log. Session and
	// permissions are set by the suite.
	Launch func(t *testing.T, s Script) agent.Launch
	// Graces, when set, shortens the session's waits for the test.
	Graces func(agent.Session)
	// MaxQueued, for an adapter that queues what its agent sends for the
	// running turn (agent/jsonrpc's Queue), sets the queue's bound in
	// bytes; nil for one that reads its agent in the turn itself, where
	// the pipe holds a fast agent back.
	MaxQueued func(s agent.Session, n int)
	// AfterEnd: the fake plays Step.AfterEnd (the JSON-RPC fakes do).
	AfterEnd bool
	// DeniedFails: a turn whose every call the gate denied ends failed,
	// with an error saying so, rather than completed (Antigravity, whose
	// agy reports such a turn a success: blobhub-worker's rule).
	DeniedFails bool
}

// Conformance is what every adapter must do against its fake: start, run a
// turn, put each call to the gate and honour allow, deny and park, stop a
// turn on Interrupt and on a cancelled context — an agent that stopped
// reading its stdin, or floods requests without reading their answers,
// included — report a crash as AGENT_CRASHED and a session it cannot
// resume as ResumeFailed, and leave no process behind after Close.
func Conformance(t *testing.T, f Fixture) {
	c := conformance{f: f}
	t.Run("turn", c.turn)
	t.Run("gate allow", func(t *testing.T) { c.gate(t, policy.Allow) })
	t.Run("gate deny", func(t *testing.T) { c.gate(t, policy.Deny) })
	t.Run("gate park", func(t *testing.T) { c.gate(t, policy.Park) })
	t.Run("interrupt", c.interrupt)
	t.Run("cancel", c.cancel)
	t.Run("stops reading", func(t *testing.T) { c.notReading(t, Script{StopReading: true}) })
	t.Run("floods without reading", func(t *testing.T) { c.notReading(t, Script{Flood: 5000}) })
	if f.MaxQueued != nil {
		t.Run("floods faster than the turn relays", c.overrun)
	}
	if f.AfterEnd {
		t.Run("nothing after the end", c.afterEnd)
	}
	t.Run("crash", c.crash)
	t.Run("resume failure", c.resumeFailure)
	t.Run("resume", c.resume)
}

type conformance struct{ f Fixture }

// start starts the fake playing s and closes it when the test ends,
// checking that the whole group is gone.
func (c conformance) start(t *testing.T, s Script, sessionID string, resume bool, with func(*agent.Launch)) (agent.Session, agent.Launch) {
	t.Helper()
	l := c.f.Launch(t, s)
	if with != nil {
		with(&l)
	}
	l.Permissions = policy.PostureApproval
	l.SessionID, l.Resume = sessionID, resume
	if sessionID == "" && c.f.Adapter.HostSessionID {
		l.SessionID = "00000000-0000-4000-8000-00000000c0f0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := c.f.Adapter.Start(ctx, l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if c.f.Graces != nil {
		c.f.Graces(sess)
	}
	t.Cleanup(func() { c.close(t, sess) })
	return sess, l
}

func (c conformance) close(t *testing.T, sess agent.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sess.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if proc.GroupAlive(sess.Pgid()) {
		t.Errorf("process group %d outlived Close", sess.Pgid())
	}
}

func turn(t *testing.T, sess agent.Session, h agent.Handler) (agent.TurnResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return sess.Turn(ctx, "go", h)
}

func texts(h *Recorder) []string {
	var out []string
	for _, it := range h.OfType(agent.ItemText) {
		out = append(out, it.Brief)
	}
	return out
}

// turn: one text, a completed turn, a session id and a process group.
func (c conformance) turn(t *testing.T) {
	sess, _ := c.start(t, Turn(Step{Text: "hello from the fake"}), "", false, nil)
	if sess.Pgid() <= 1 {
		t.Fatalf("Pgid %d", sess.Pgid())
	}
	h := &Recorder{}
	res, err := turn(t, sess, h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	if got := texts(h); !slices.Contains(got, "hello from the fake") {
		t.Fatalf("texts %q", got)
	}
	if sess.SessionID() == "" {
		t.Fatal("no session id after a turn")
	}
}

// gate: a write is put to the gate once, as a write of its path, with a
// fingerprint; allow runs it, deny refuses it and the turn goes on, park
// stops the turn there, the call's result the parked one (agent.ParkedResultItem).
func (c conformance) gate(t *testing.T, action policy.Action) {
	path := filepath.Join(t.TempDir(), "conformance.txt")
	sess, _ := c.start(t, Turn(Step{Call: Write(path)}, Step{Text: "after the call"}), "", false, nil)
	h := &Recorder{Gate: func(policy.Call) policy.Verdict {
		return policy.Verdict{Action: action, Message: "denied by the conformance test"}
	}}
	res, err := turn(t, sess, h)
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	calls := h.Calls()
	if len(calls) != 1 {
		t.Fatalf("the gate saw %d calls, want 1", len(calls))
	}
	call := calls[0]
	if call.Effect != policy.EffectWrite || !slices.ContainsFunc(call.Target.Paths, func(p string) bool { return strings.HasSuffix(p, "conformance.txt") }) ||
		call.Fingerprint == "" || call.Kind != policy.KindApproval || call.Tool == "" {
		t.Fatalf("the call reached the gate as %+v", call)
	}
	results := h.OfType(agent.ItemToolResult)
	isError := func(it agent.Item) bool {
		m, _ := it.Meta["tool"].(map[string]any)
		e, _ := m["is_error"].(bool)
		return e
	}
	switch action {
	case policy.Allow:
		if res.Outcome != agent.TurnCompleted || len(results) != 1 || isError(results[0]) || !slices.Contains(texts(h), "after the call") {
			t.Fatalf("allowed: outcome %s, results %v, texts %q", res.Outcome, results, texts(h))
		}
	case policy.Deny:
		want := agent.TurnCompleted
		if c.f.DeniedFails {
			want = agent.TurnFailed
			if !strings.Contains(res.ErrorText, "denied") {
				t.Fatalf("denied: a turn whose every call was denied failed with %q, which does not say so", res.ErrorText)
			}
		}
		if res.Outcome != want || len(results) != 1 || !isError(results[0]) || !slices.Contains(texts(h), "after the call") {
			t.Fatalf("denied: outcome %s, results %v, texts %q", res.Outcome, results, texts(h))
		}
	case policy.Park:
		if res.Outcome != agent.TurnParked || res.ErrorText != "" || slices.Contains(texts(h), "after the call") {
			t.Fatalf("parked: outcome %s (%q), texts %q", res.Outcome, res.ErrorText, texts(h))
		}
		// The call's result says it waits for a person: not an error, and
		// not what the agent was told to stop it.
		if len(results) != 1 || isError(results[0]) {
			t.Fatalf("parked: results %v, want one that is no error", results)
		}
		if id, ok := agent.IsParkedResult(results[0]); !ok || id != call.InvocationID {
			t.Fatalf("parked: the result %v is not the parked result of call %s", results[0], call.InvocationID)
		}
	}
	if calls := h.OfType(agent.ItemToolCall); len(calls) != 1 {
		t.Fatalf("%d tool_call items, want 1", len(calls))
	}
}

// interrupt: Interrupt from another goroutine ends a running turn, as
// interrupted and without an error.
func (c conformance) interrupt(t *testing.T) {
	sess, _ := c.start(t, Turn(Step{Text: "working"}, Step{WaitInterrupt: true}), "", false, nil)
	h := &Recorder{OnItem: func(it agent.Item) {
		if it.Type() == agent.ItemText {
			go func() {
				if err := sess.Interrupt(); err != nil {
					t.Errorf("Interrupt: %v", err)
				}
			}()
		}
	}}
	res, err := turn(t, sess, h)
	if err != nil || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
}

// cancel: a cancelled context interrupts the turn politely; Turn returns
// interrupted with the context's error.
func (c conformance) cancel(t *testing.T) {
	sess, _ := c.start(t, Turn(Step{Text: "working"}, Step{WaitInterrupt: true}), "", false, nil)
	res, err := CancelAt(sess, "go", agent.ItemText)
	if !errors.Is(err, context.Canceled) || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
}

// notReading: an agent that stops reading its stdin once its session is
// open (s.StopReading), or first floods requests whose answers it never
// reads (s.Flood), is sent a message larger than its stdin pipe holds (a
// person's message of 120 KB). Neither the turn's writes nor the answers
// to its requests may block the adapter: the turn ends when its context
// does (as a run's --max-duration, --stall-timeout and first SIGTERM end
// it), within the interrupt's bounds, interrupted, and the process is gone.
func (c conformance) notReading(t *testing.T, s Script) {
	s.Turns = [][]Step{{{Text: "never read"}}}
	sess, _ := c.start(t, s, "", false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	type ended struct {
		res agent.TurnResult
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := sess.Turn(ctx, strings.Repeat("a person's long message ", 5000), &Recorder{})
		done <- ended{res, err}
	}()
	var e ended
	select {
	case e = <-done:
	case <-time.After(60 * time.Second):
		// The process is killed so the blocked Turn, and the test, can end.
		proc.StopGroup(sess.Pgid(), 0)
		t.Fatal("Turn did not return within a minute of its context's end: a write to the agent blocks it")
	}
	if !errors.Is(e.err, context.DeadlineExceeded) || e.res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn = %+v, %v; want interrupted with the context's error", e.res, e.err)
	}
	closed := make(chan struct{})
	go func() { c.close(t, sess); close(closed) }()
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		proc.StopGroup(sess.Pgid(), 0)
		t.Fatal("Close did not return within a minute")
	}
}

// overrun: an agent that sends faster than the turn relays (here the
// turn is held at its first item until the agent has sent a flood of
// 2000 messages) fills the bounded queue between the reader and the
// turn instead of bhw-run's memory: the turn fails AGENT_CRASHED saying
// so, having relayed only what the queue held, and nothing after it.
func (c conformance) overrun(t *testing.T) {
	sent, waitSent := sentPipe(t)
	const flood = 2000
	s := Script{Sent: sent, Turns: [][]Step{{{Tool: Exec("true")}, {Flood: flood}, {Text: "after the flood"}}}}
	sess, _ := c.start(t, s, "", false, nil)
	c.f.MaxQueued(sess, 64<<10)
	var held sync.Once
	h := &Recorder{OnItem: func(agent.Item) { held.Do(waitSent) }}
	res, err := turn(t, sess, h)
	var te *agent.Error
	if !errors.As(err, &te) || te.Code != agent.CodeAgentCrashed || !strings.Contains(te.Message, "faster than bhw-run could relay") ||
		res.Outcome != agent.TurnFailed {
		t.Fatalf("Turn = %+v, %v; want %s: the agent sends faster than the turn relays", res, err, agent.CodeAgentCrashed)
	}
	relayed := 0
	for _, text := range texts(h) {
		relayed += strings.Count(text, "flood ")
	}
	if relayed >= flood/2 || slices.Contains(texts(h), "after the flood") {
		t.Fatalf("%d of the %d flood messages relayed (texts %d): the queue held more than its bound", relayed, flood, len(texts(h)))
	}
}

// afterEnd: what the agent sends after its turn's end is not the turn's:
// its text is not added to the turn's items, and its permission request
// is never put to the gate but refused, so the agent does not wait on it
// and a completed turn stays completed. The turn is held at its first
// item until the agent has sent all of it, so folding it in could not be
// missed.
func (c conformance) afterEnd(t *testing.T) {
	sent, waitSent := sentPipe(t)
	told := make(chan string, 1)
	var answered sync.Once
	s := Script{Sent: sent, Turns: [][]Step{{{Text: "before the end"}, {Tool: Exec("true")}, {AfterEnd: true}}}}
	sess, _ := c.start(t, s, "", false, func(l *agent.Launch) {
		log := &LogBuffer{OnLine: func(stream, text string) {
			if stream == agent.StreamStderr && strings.Contains(text, "the request after the end was") {
				answered.Do(func() { told <- text })
			}
		}}
		l.Log = log.Log()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("thread.log:\n%s", log.String())
			}
		})
	})
	var held sync.Once
	h := &Recorder{
		Gate:   func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} },
		OnItem: func(agent.Item) { held.Do(waitSent) },
	}
	res, err := turn(t, sess, h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v; want completed", res, err)
	}
	for _, it := range h.Items() {
		meta, _ := json.Marshal(it.Meta)
		seen := it.Brief + " " + string(meta)
		for _, after := range []string{"after the end", "after-the-end", "and more"} {
			if strings.Contains(seen, after) {
				t.Fatalf("item %s: what came after the end was folded into the turn", seen)
			}
		}
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Fatalf("the gate judged %d calls after the end: %+v", len(calls), calls)
	}
	select {
	case text := <-told:
		if !strings.HasSuffix(text, "refused") {
			t.Fatalf("the agent says %q", text)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the request after the end was never answered")
	}
}

// sentPipe is a named pipe for Script.Sent and a wait, of a minute at
// most, for the agent to tell it.
func sentPipe(t *testing.T) (path string, wait func()) {
	path = filepath.Join(t.TempDir(), "sent")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		if err := Told(path, time.Minute); err != nil {
			t.Errorf("waiting for the agent to send all: %v", err)
		}
	}
}

// crash: a process that dies mid-turn is AGENT_CRASHED, saying what it
// said on stderr.
func (c conformance) crash(t *testing.T) {
	sess, _ := c.start(t, Turn(Step{Text: "working"}, Step{Crash: 3, Stderr: "fake agent: boom"}), "", false, nil)
	_, err := turn(t, sess, &Recorder{})
	var te *agent.Error
	if !errors.As(err, &te) || te.Code != agent.CodeAgentCrashed || !strings.Contains(te.Message, "boom") {
		t.Fatalf("Turn error %v, want %s naming the stderr", err, agent.CodeAgentCrashed)
	}
}

// resumeFailure: a session the agent does not know is ResumeFailed on the
// first turn, not an error, so run can start a fresh one.
func (c conformance) resumeFailure(t *testing.T) {
	sess, _ := c.start(t, Script{ResumeFails: true, Turns: [][]Step{{{Text: "never"}}}}, "00000000-0000-4000-8000-00000000dead", true, nil)
	res, err := turn(t, sess, &Recorder{})
	if err != nil || !res.ResumeFailed {
		t.Fatalf("Turn = %+v, %v; want ResumeFailed", res, err)
	}
}

// resume: a second process resumes the first one's session id.
func (c conformance) resume(t *testing.T) {
	first, _ := c.start(t, Turn(Step{Text: "one"}), "", false, nil)
	if _, err := turn(t, first, &Recorder{}); err != nil {
		t.Fatal(err)
	}
	id := first.SessionID()
	c.close(t, first)
	second, _ := c.start(t, Turn(Step{Text: "two"}), id, true, nil)
	h := &Recorder{}
	res, err := turn(t, second, h)
	if err != nil || res.Outcome != agent.TurnCompleted || res.ResumeFailed {
		t.Fatalf("resumed Turn = %+v, %v", res, err)
	}
	if got := second.SessionID(); got != id {
		t.Fatalf("resumed session id %q, want %q", got, id)
	}
}
