package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// TestAgentCrash: the agent exits mid-turn → the thread fails with
// AGENT_CRASHED, turn.state stays running, and `thread retry` delivers the
// same messages again.
func TestAgentCrash(t *testing.T) {
	h := newHarness(t, false)
	const alias = "crash/t"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "working"}, {Crash: 1, Stderr: "boom"}}}})
	sum := h.run(alias)
	want(t, sum, OutcomeFailed, exit.Failed)
	wantCode(t, sum, exit.Failed, agent.CodeAgentCrashed)
	h.wantThreadFailed(alias, agent.CodeAgentCrashed)
	th := h.thread(alias)
	if th.Turn.State != envelope.TurnStateRunning || len(th.Turn.InboundIDs) != 1 {
		t.Fatalf("turn %q inbound %v, want running with the message", th.Turn.State, th.Turn.InboundIDs)
	}
	delivered := th.Turn.InboundIDs
	// The failure's reason (a status error) follows what the agent said.
	if got := h.items(alias); !slices.Equal(got, []string{"person", "text", "status"}) {
		t.Fatalf("items %v", got)
	}
	// Idle while failed.
	want(t, h.run(alias), OutcomeIdle, exit.OK)

	h.setWireState(alias, envelope.StatePending) // thread retry
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "again"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	th = h.thread(alias)
	if !slices.Equal(th.Turn.InboundIDs, delivered) || th.Turn.State != envelope.TurnStateIdle {
		t.Fatalf("retry delivered %v (turn %q), want %v", th.Turn.InboundIDs, th.Turn.State, delivered)
	}
	if th.Agent.State != envelope.StateActive || hasError(th) || th.Agent.FailedOnWire {
		t.Fatalf("local after retry: %+v", th.Agent)
	}
	if h.wireState(alias) != envelope.StateActive {
		t.Fatal("wire not active after retry")
	}
	if got := h.items(alias); !slices.Equal(got, []string{"person", "text", "status", "text", "turn_end"}) {
		t.Fatalf("items %v", got)
	}
	h.noneTwice(alias, "worker")
}

// TestAgentOutput: garbage, a line over the 64 MiB bound and an oversized
// permission request are skipped (the request answered deny); the turn ends.
func TestAgentOutput(t *testing.T) {
	tests := []struct {
		name  string
		steps []agenttest.Step
		texts []string
	}{
		{"garbage", []agenttest.Step{{Garbage: "not json {"}, {Garbage: `{"type":"mystery","x":1}`}, {Garbage: `{"type":"assistant","message":7}`}, {Garbage: "\x00\xff"}, {Text: "after"}}, []string{"after"}},
		{"100 MB line", []agenttest.Step{{BigLine: 100 << 20}, {Text: "after"}}, []string{"after"}},
		{"70 MB request", []agenttest.Step{{BigRequest: 70 << 20}}, []string{"big request answered: deny"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "out/t"
			h.handOff(alias, "approval", "start")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{tc.steps}})
			want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
			var texts []string
			for _, it := range h.srv.Items(alias) {
				var m struct{ Type string }
				_ = json.Unmarshal(it.Metadata, &m)
				if m.Type == "text" {
					texts = append(texts, it.Content[0].Text)
				}
				if len(it.Content[0].Text) > 1<<20 {
					t.Errorf("a %d-byte item was posted", len(it.Content[0].Text))
				}
			}
			if len(texts) != len(tc.texts) {
				t.Fatalf("texts %q, want %q", texts, tc.texts)
			}
			for i := range texts {
				if !strings.HasPrefix(texts[i], tc.texts[i]) {
					t.Fatalf("text %q, want %q…", texts[i], tc.texts[i])
				}
			}
			if got := h.items(alias); got[len(got)-1] != "turn_end" {
				t.Fatalf("items %v", got)
			}
		})
	}
}

// recordPgid wraps the claude starter to remember every agent group.
func (h *harness) recordPgid(pgids *[]int) {
	h.runner = func(r *Runner) {
		wrapStart(r, testAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				s, err := next(ctx, l)
				if err == nil {
					*pgids = append(*pgids, s.Pgid())
				}
				return s, err
			}
		})
	}
}

// TestAgentNeverAnswers: a silent agent is stalled, a long turn times out;
// both end with exit 3, turn idle, a status and a turn_end, and the agent's
// group gone — even when it ignores SIGTERM.
func TestAgentNeverAnswers(t *testing.T) {
	tests := []struct {
		name    string
		script  agenttest.Script
		tune    func(r *Runner)
		code    string
		token   string
		outcome string
	}{
		{"hang stalled", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "thinking"}, {Hang: true}}}},
			func(r *Runner) { r.StallTimeout = 300 * time.Millisecond }, exit.CodeAgentStalled, "agent_stalled", "stalled"},
		{"wait for interrupt timeout", agenttest.Script{Turns: [][]agenttest.Step{{{WaitInterrupt: true}}}},
			func(r *Runner) { r.MaxDuration = 300 * time.Millisecond }, exit.CodeTurnTimeout, "turn_timeout", "timeout"},
		{"hang timeout", agenttest.Script{Turns: [][]agenttest.Step{{{Hang: true}}}},
			func(r *Runner) { r.MaxDuration = 300 * time.Millisecond; r.Grace = 200 * time.Millisecond }, exit.CodeTurnTimeout, "turn_timeout", "timeout"},
		{"ignores SIGTERM", agenttest.Script{IgnoreSIGTERM: true, Turns: [][]agenttest.Step{{{Hang: true}}}},
			func(r *Runner) { r.StallTimeout = 300 * time.Millisecond; r.Grace = 200 * time.Millisecond }, exit.CodeAgentStalled, "agent_stalled", "stalled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "hang/t"
			h.handOff(alias, "approval", "start")
			h.play(tc.script)
			var pgids []int
			h.tune = tc.tune
			h.recordPgid(&pgids)
			start := time.Now()
			sum := h.run(alias)
			want(t, sum, OutcomeTurnFailed, exit.TurnFailed)
			wantCode(t, sum, exit.TurnFailed, tc.code)
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("the run took %s", d)
			}
			if len(pgids) != 1 || proc.GroupAlive(pgids[0]) {
				t.Fatalf("agent groups %v still alive", pgids)
			}
			th := h.thread(alias)
			if th.Turn.State != envelope.TurnStateIdle || th.Agent.Process != nil || th.Agent.State != envelope.StateActive {
				t.Fatalf("turn %q process %v agent %q", th.Turn.State, th.Agent.Process, th.Agent.State)
			}
			var tokens, outcomes []string
			for _, it := range h.srv.Items(alias) {
				var m struct {
					Type    string `json:"type"`
					Outcome string `json:"outcome"`
					Status  string `json:"status"`
				}
				_ = json.Unmarshal(it.Metadata, &m)
				switch m.Type {
				case "status":
					tokens = append(tokens, m.Status)
				case "turn_end":
					outcomes = append(outcomes, m.Outcome)
				}
			}
			if !slices.Equal(tokens, []string{tc.token}) || !slices.Equal(outcomes, []string{tc.outcome}) {
				t.Fatalf("status %v turn_end %v, want [%s] [%s]", tokens, outcomes, tc.token, tc.outcome)
			}
			if h.wireState(alias) != envelope.StateActive {
				t.Fatal("wire not active")
			}
			// Not resumed automatically: the next run is idle.
			h.runner, h.tune = nil, nil
			want(t, h.run(alias), OutcomeIdle, exit.OK)
			h.noneTwice(alias)
		})
	}
}

// grandchildPid reads the pid the fake's grandchild step printed.
func grandchildPid(t *testing.T, items []blobhub.Item) int {
	t.Helper()
	for _, it := range items {
		if s, ok := strings.CutPrefix(it.Content[0].Text, "grandchild "); ok {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatal("no grandchild pid in the items")
	return 0
}

// TestGrandchild: an agent that leaves a grandchild (in its own session,
// holding the agent's stdout) does not hold the run; the agent's group is
// stopped. In-process (OwnProcess false) the run must not sweep the test's
// own children, so the grandchild itself is swept only by the binary:
// TestGrandchildSweptByBinary in the main package.
func TestGrandchild(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gc/t"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Grandchild: true}, {Text: "done"}}}})
	var pgids []int
	h.recordPgid(&pgids)
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	pid := grandchildPid(t, h.srv.Items(alias))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if len(pgids) != 1 || proc.GroupAlive(pgids[0]) {
		t.Fatalf("agent group %v alive", pgids)
	}
	if th := h.thread(alias); th.Agent.Process != nil || th.Turn.State != envelope.TurnStateIdle {
		t.Fatalf("process %v turn %q", th.Agent.Process, th.Turn.State)
	}
}

// activationEnv selects maybeRunActivation in a re-executed test binary.
const activationEnv = "BHW_TEST_ACTIVATION"

type activationSpec struct {
	State, Config, Store, Alias string
	KillAt                      int // SIGKILL itself after this many journal writes
	// KillAfterStart: SIGKILL itself as soon as the agent of this type has
	// started, before run records it.
	KillAfterStart string
	// HWMFile, when set, receives the process's peak resident set (VmHWM
	// of /proc/self/status, which exec resets, unlike the rusage of a
	// child forked from a large parent) once the run is done.
	HWMFile string
}

// maybeRunActivation runs one activation on a file:// store and exits,
// killing itself with SIGKILL after KillAt journal writes.
func maybeRunActivation() {
	s, ok := subprocessSpec[activationSpec](activationEnv)
	if !ok {
		return
	}
	n := 0
	testHookAfterJournal = func() {
		if n++; n == s.KillAt {
			killSelf()
		}
	}
	r := subprocessRunner(s.State, s.Config, s.Store)
	r.MaxDuration, r.StallTimeout, r.Grace = time.Minute, time.Minute, time.Second
	r.Environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.State}
	if s.KillAfterStart != "" {
		wrapStart(r, s.KillAfterStart, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				sess, err := next(ctx, l)
				if err == nil {
					killSelf()
				}
				return sess, err
			}
		})
	}
	sum, _ := r.Run(context.Background(), s.Alias)
	if s.HWMFile != "" {
		if b, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "VmHWM:") {
					_ = os.WriteFile(s.HWMFile, []byte(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))), 0o600)
				}
			}
		}
	}
	os.Exit(sum.ExitCode)
}

// runKilled runs one activation in a subprocess that SIGKILLs itself after
// killAt journal writes; killed is false when the run ended first.
func (h *harness) runKilled(alias string, killAt int) (killed bool, exitCode int) {
	h.t.Helper()
	return h.runKilledAs(activationSpec{Alias: alias, KillAt: killAt})
}

// runKilledAs is runKilled for any kill the spec names.
func (h *harness) runKilledAs(s activationSpec) (killed bool, exitCode int) {
	h.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	s.State, s.Config, s.Store = h.state, h.config, h.srv.Dir()
	spec, _ := json.Marshal(s)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), activationEnv+"="+string(spec))
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, -1
		}
		return false, ee.ExitCode()
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return false, 0
}

func typeSet(types []string) []string {
	var out []string
	for _, t := range types {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// TestKill9: bhw-run killed with SIGKILL after each journal write of a
// turn, and on both sides of the compaction that ends it, then a normal
// run: every emission is posted exactly once, the items are those of a
// clean run (plus the note that a turn was resumed), the thread ends active
// and idle, and its journal compacted (docs/state.md, the journal).
func TestKill9(t *testing.T) {
	script := agenttest.Script{Turns: [][]agenttest.Step{{
		{Text: "hello"},
		{Tool: &agenttest.Tool{Effect: policy.EffectRead, Target: policy.Target{Paths: []string{"/etc/hostname"}}, Result: "host"}},
		{Text: "bye"},
	}}}
	clean := typeSet([]string{"person", "text", "tool_call", "tool_result", "turn_end"})
	steps := 0
	for n := 1; n < 60; n++ {
		h := newHarness(t, true)
		const alias = "kill/t"
		h.handOff(alias, "approval", "start")
		h.play(script)
		killed, exitCode := h.runKilled(alias, n)
		if !killed {
			// The run got past every journal write: it is the clean run.
			if exitCode != exit.OK || !slices.Equal(typeSet(h.items(alias)), clean) {
				t.Fatalf("clean run: exit %d items %v", exitCode, h.items(alias))
			}
			steps = n - 1
			break
		}
		sum := h.run(alias)
		if sum.ExitCode != exit.OK {
			t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
		}
		h.noneTwice(alias)
		got := h.items(alias)
		var types []string
		for i, it := range h.srv.Items(alias) {
			if got[i] == "status" && !strings.Contains(string(it.Metadata), "interrupted_turn_resumed") {
				t.Errorf("kill at %d: unexpected status %s", n, it.Metadata)
			}
			if got[i] != "status" {
				types = append(types, got[i])
			}
		}
		if !slices.Equal(typeSet(types), clean) {
			t.Errorf("kill at %d: item types %v, want %v", n, got, clean)
		}
		if count(got, "person") != 1 || count(got, "turn_end") < 1 {
			t.Errorf("kill at %d: items %v", n, got)
		}
		th := h.thread(alias)
		if h.wireState(alias) != envelope.StateActive || th.Agent.State != envelope.StateActive || th.Turn.State != envelope.TurnStateIdle || th.Agent.Process != nil {
			t.Errorf("kill at %d: wire %s local %s turn %s process %v", n, h.wireState(alias), th.Agent.State, th.Turn.State, th.Agent.Process)
		}
		if open := h.journalOpen(alias); open != 0 {
			t.Errorf("kill at %d: %d emissions unconfirmed", n, open)
		}
		// And the thread goes on normally, its journal compacted.
		want(t, h.run(alias), OutcomeIdle, exit.OK)
		if r := h.journalRecords(alias); r != 2 {
			t.Errorf("kill at %d: the journal holds %d records after the runs, want 2 (compacted)", n, r)
		}
	}
	if steps < 10 {
		t.Fatalf("only %d journal writes in a clean turn", steps)
	}
	t.Logf("killed after each of %d journal writes", steps)
}

// TestKill9Parked: the same around a turn that parks on a person, then the
// answer: one pending_prompt, one pending_prompt_resolved, whatever the kill.
func TestKill9Parked(t *testing.T) {
	for n := 1; n < 40; n++ {
		h := newHarness(t, true)
		const alias = "killpark/t"
		write := h.handOffWrite(alias, "write x", agenttest.Step{Text: "let me write"})
		killed, exitCode := h.runKilled(alias, n)
		if killed {
			sum := h.run(alias)
			if sum.ExitCode != exit.OK {
				t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
			}
		} else if exitCode != exit.OK {
			t.Fatalf("clean run exits %d", exitCode)
		}
		th := h.thread(alias)
		if th.Prompt == nil || th.Prompt.ItemID == "" {
			t.Fatalf("kill at %d: not parked (prompt %+v), items %v", n, th.Prompt, h.items(alias))
		}
		if c := count(h.items(alias), "pending_prompt"); c != 1 {
			t.Fatalf("kill at %d: %d pending_prompt items", n, c)
		}
		h.srv.PersonPost(alias, "yes")
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}, {Text: "written"}}}})
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		got := h.items(alias)
		if count(got, "pending_prompt") != 1 || count(got, "pending_prompt_resolved") != 1 {
			t.Fatalf("kill at %d: items %v", n, got)
		}
		h.noneTwice(alias)
		if r := h.journalRecords(alias); r != 2 {
			t.Errorf("kill at %d: the journal holds %d records after the answered turn, want 2 (compacted)", n, r)
		}
		if th := h.thread(alias); th.Prompt != nil || th.Turn.State != envelope.TurnStateIdle || len(th.Grants) != 0 {
			t.Fatalf("kill at %d: prompt %v turn %q grants %v", n, th.Prompt, th.Turn.State, th.Grants)
		}
		if !killed {
			if n < 4 {
				t.Fatalf("only %d journal writes before parking", n-1)
			}
			t.Logf("killed after each of %d journal writes; items %v", n-1, got)
			return
		}
	}
	t.Fatal("the parked run never finished without a kill")
}

// TestKill9Answered: the run that hands a person's answer to a parked
// agent, killed after each of its journal writes, then a normal run: the
// prompt is resolved by exactly one pending_prompt_resolved item.
func TestKill9Answered(t *testing.T) {
	for n := 1; n < 40; n++ {
		h := newHarness(t, true)
		const alias = "killanswer/t"
		write := h.handOffWrite(alias, "write x")
		want(t, h.run(alias), OutcomeParked, exit.OK)
		h.srv.PersonPost(alias, "yes")
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}, {Text: "written"}}}})
		killed, exitCode := h.runKilled(alias, n)
		if killed {
			// The agent of the next run has done the write already (a
			// replayed Write would be a new question, the grant consumed).
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "written"}}}})
			if sum := h.run(alias); sum.ExitCode != exit.OK {
				t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
			}
		} else if exitCode != exit.OK {
			t.Fatalf("clean run exits %d", exitCode)
		}
		got := h.items(alias)
		if count(got, "pending_prompt") != 1 || count(got, "pending_prompt_resolved") != 1 {
			t.Fatalf("kill at %d: items %v", n, got)
		}
		h.noneTwice(alias)
		if th := h.thread(alias); th.Prompt != nil {
			t.Fatalf("kill at %d: still parked on %+v", n, th.Prompt)
		}
		if !killed {
			t.Logf("killed after each of %d journal writes; items %v", n-1, got)
			return
		}
	}
	t.Fatal("the answering run never finished without a kill")
}

func hasError(th *envelope.Thread) bool { _, _, ok := th.Agent.Error.Get(); return ok }

// TestKill9AfterStartNewHostSession: a run killed right after it started
// the agent of a new session whose id the host picks, before that id and
// the process are recorded, has sent the session nothing; the next run
// stops no stranger, starts a session of its own and delivers the message
// once, and the thread goes on from that session.
func TestKill9AfterStartNewHostSession(t *testing.T) {
	h := newHarness(t, true)
	const alias = "kill/host"
	h.handOffTo(alias, testHostAgent, "approval", "start")
	h.play(agenttest.Turn(agenttest.Step{Text: "hi"}))
	if killed, exitCode := h.runKilledAs(activationSpec{Alias: alias, KillAfterStart: testHostAgent}); !killed {
		t.Fatalf("the run was not killed (exit %d)", exitCode)
	}
	if th := h.thread(alias); th.Agent.AgentSessionID != "" || th.Agent.Process != nil || th.Turn.State == envelope.TurnStateRunning {
		t.Fatalf("after the kill: session %q process %v turn %q; want none recorded", th.Agent.AgentSessionID, th.Agent.Process, th.Turn.State)
	}
	var launches []agent.Launch
	h.runner = func(r *Runner) {
		wrapStart(r, testHostAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				launches = append(launches, l)
				return next(ctx, l)
			}
		})
	}
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.noneTwice(alias)
	if got := h.items(alias); count(got, "person") != 1 || count(got, "text") != 1 || count(got, "turn_end") != 1 {
		t.Fatalf("items %v: want the message delivered once, one answer", got)
	}
	th := h.thread(alias)
	if len(launches) != 1 || launches[0].Resume || th.Agent.AgentSessionID != launches[0].SessionID {
		t.Fatalf("launches %+v, thread.yaml session %q: want one new session, recorded", launches, th.Agent.AgentSessionID)
	}
}

// subprocessSpec is the spec a re-executed test binary finds in the
// environment variable env, as JSON; false when env is unset (a test
// binary run as such). A spec it cannot read exits 2.
func subprocessSpec[S any](env string) (S, bool) {
	var s S
	v := os.Getenv(env)
	if v == "" {
		return s, false
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return s, true
}

// killSelf ends the re-executed test binary with SIGKILL, as a kill -9
// from outside would, and never returns.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// subprocessRunner is the Runner of a re-executed test binary on the
// file:// store, the state tree and config.yaml named; it exits 2 when
// they do not resolve.
func subprocessRunner(state, config, store string) *Runner {
	s, err := setup.Resolve(setup.Options{APIURL: "file://" + store, StateDir: state, ConfigPath: config,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Home: state, Adapters: testAdapters()}, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := blobhub.New(blobhub.Config{APIURL: "file://" + store, RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, UserID: "usr_local"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return &Runner{Setup: s, Client: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}
