package acp

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// fakeLaunch is a launch of the fake ACP agent (this test binary) playing
// s with the habits of agent type typ, in a fresh work folder and home.
func fakeLaunch(t *testing.T, typ string, s agenttest.Script) agent.Launch {
	exe := agenttest.Executable(t)
	log := agenttest.FailureLog(t)
	return agent.Launch{
		Executable: exe, WorkFolder: t.TempDir(), Home: t.TempDir(), CacheDir: t.TempDir(),
		Env: []string{acptest.FakeAgentEnv + "=" + agenttest.WriteScript(t, s), acptest.FakeDialectEnv + "=" + typ,
			"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()},
		Permissions: "approval",
		Log:         log.Log(),
	}
}

// shortGraces shortens a session's waits for a test.
func shortGraces(s agent.Session) {
	as := s.(*Session)
	as.StdinGrace, as.KillGrace, as.InterruptGrace, as.ParkGrace, as.TextIdle = 100*time.Millisecond, 300*time.Millisecond, time.Second, 5*time.Second, 50*time.Millisecond
}

// skipMinute moves the minute rule's clock on, so a resume in the test
// does not wait for the minute to turn.
func skipMinute(t *testing.T) {
	saved := now
	now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	t.Cleanup(func() { now = saved })
}

// TestConformance: every ACP type against the fake agent playing that
// agent's habits (its option ids, its "no such session", its park).
func TestConformance(t *testing.T) {
	skipMinute(t)
	for _, p := range presets {
		t.Run(p.typ, func(t *testing.T) {
			agenttest.Conformance(t, agenttest.Fixture{Adapter: p.adapter(),
				Launch:    func(t *testing.T, s agenttest.Script) agent.Launch { return fakeLaunch(t, p.typ, s) },
				Graces:    shortGraces,
				MaxQueued: func(s agent.Session, n int) { s.(*Session).MaxQueued = n }, AfterEnd: true})
		})
	}
}

// fakeRun is one fake agent session and its thread.log.
type fakeRun struct {
	s   *Session
	l   agent.Launch
	log *agenttest.LogBuffer
}

// startFake starts the fake agent playing s as agent type typ; edit, when
// set, changes the launch first.
func startFake(t *testing.T, typ string, s agenttest.Script, edit func(*agent.Launch)) fakeRun {
	t.Helper()
	l := fakeLaunch(t, typ, s)
	log := &agenttest.LogBuffer{}
	l.Log = log.Log()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("thread.log:\n%s", agent.Shorten(log.String(), 20000))
		}
	})
	if edit != nil {
		edit(&l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := start(ctx, presetOf(t, typ), l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	shortGraces(sess)
	t.Cleanup(func() { closeNow(t, sess) })
	return fakeRun{s: sess, l: l, log: log}
}

// lines are the thread.log texts of stream.
func (r fakeRun) lines(stream string) []string {
	var out []string
	for _, line := range strings.Split(r.log.String(), "\n") {
		if _, s, text, ok := agent.ParseLogLine(line); ok && s == stream {
			out = append(out, text)
		}
	}
	return out
}

// sent are the messages bhw-run sent the agent, decoded.
func (r fakeRun) sent(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines(agent.StreamStdin) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdin line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// agentEnv is the environment the fake agent reported at initialize.
func (r fakeRun) agentEnv(t *testing.T) map[string]string {
	t.Helper()
	for _, l := range r.lines(agent.StreamStdout) {
		var m struct {
			ID     *int `json:"id"`
			Result struct {
				Meta struct {
					Env    map[string]string `json:"env"`
					Params struct {
						ClientCapabilities map[string]any `json:"clientCapabilities"`
					} `json:"params"`
				} `json:"_meta"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Result.Meta.Env != nil {
			return m.Result.Meta.Env
		}
	}
	t.Fatal("the fake reported no environment")
	return nil
}

func texts(h *agenttest.Recorder) []string {
	var out []string
	for _, it := range h.OfType(agent.ItemText) {
		out = append(out, it.Brief)
	}
	return out
}

func allow(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }

// TestFakeFailClosed: no fs or terminal capability is advertised; a
// request too long to read is cancelled, an fs read and an unknown
// request are refused with -32601, the agent's request id 0 is answered,
// an fs write is acknowledged; a garbage line and an over-long line are
// skipped, and the turn completes.
func TestFakeFailClosed(t *testing.T) {
	r := startFake(t, TypeGeneric, agenttest.Turn(
		agenttest.Step{Garbage: "this is not JSON-RPC"},
		agenttest.Step{BigLine: 4096},
		agenttest.Step{BigRequest: 4096},
		agenttest.Step{Call: agenttest.Write("/dev/null/never")},
		agenttest.Step{Text: "after all that"},
	), func(l *agent.Launch) { l.MaxLine = 2048 })
	h := &agenttest.Recorder{Gate: allow}
	res := runTurn(t, r.s, "go", h)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn %+v", res)
	}
	got := strings.Join(texts(h), "\n")
	for _, want := range []string{"big request answered: cancelled", "read answered: bhw-run reads no files", "(-32601)",
		"unknown answered: bhw-run does not support craft/drainMidTurnQueue (-32601)", "after all that"} {
		if !strings.Contains(got, want) {
			t.Errorf("texts %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "fs/write_text_file failed") || strings.Contains(got, strings.Repeat("x", 100)) {
		t.Errorf("texts %q", got)
	}
	var caps any = "absent"
	for _, m := range r.sent(t) {
		if m["method"] == "initialize" {
			caps = m["params"].(map[string]any)["clientCapabilities"]
		}
	}
	if b, _ := json.Marshal(caps); string(b) != "{}" {
		t.Errorf("clientCapabilities %s, want {}", b)
	}
	// The agent's first request had id 0: it was answered.
	var zero bool
	for _, m := range r.sent(t) {
		if id, ok := m["id"].(float64); ok && id == 0 && m["method"] == nil {
			zero = true
		}
	}
	if !zero {
		t.Error("the agent's request with id 0 was not answered")
	}
}

// TestFakeTextCoalesced: the chunks of one message are one text item, a
// thought one thinking item, a plan a status item.
func TestFakeTextCoalesced(t *testing.T) {
	r := startFake(t, TypeGeneric, agenttest.Turn(
		agenttest.Step{Thinking: "let me think"},
		agenttest.Step{Text: "hello from the fake agent"},
		agenttest.Step{Status: "write the tests"},
		agenttest.Step{Text: "second message"},
	), nil)
	h := &agenttest.Recorder{}
	runTurn(t, r.s, "go", h)
	if got := strings.Join(h.Types(), " "); got != "thinking text status text" {
		t.Fatalf("items %s", got)
	}
	if got := texts(h); got[0] != "hello from the fake agent" || got[1] != "second message" {
		t.Fatalf("texts %q", got)
	}
}

// TestFakeOneDecisionPerCall: a call asked twice (first for its folder,
// as kind other) reaches the gate once, judged as the write its tool_call
// says it is; the allow answers both requests.
func TestFakeOneDecisionPerCall(t *testing.T) {
	target := filepath.Join(t.TempDir(), "outside.txt")
	for _, typ := range []string{TypeOpenCode, TypeCopilot} {
		t.Run(typ, func(t *testing.T) {
			r := startFake(t, typ, agenttest.Turn(agenttest.Step{Call: &agenttest.Tool{Name: acptest.AskTwice,
				Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{target}}}}, agenttest.Step{Text: "written"}), nil)
			h := &agenttest.Recorder{Gate: allow}
			res := runTurn(t, r.s, "go", h)
			calls := h.Calls()
			if res.Outcome != agent.TurnCompleted || len(calls) != 1 || !exists(target) {
				t.Fatalf("Turn %+v, %d calls, written %v; items %s", res, len(calls), exists(target), types(h))
			}
			if c := calls[0]; c.Effect != policy.EffectWrite || c.Tool != "edit" || !slices.Contains(c.Target.Paths, target) {
				t.Fatalf("the call reached the gate as %+v", c)
			}
			if n := len(h.OfType(agent.ItemToolCall)); n != 1 {
				t.Errorf("%d tool_call items", n)
			}
		})
	}
}

// TestFakeRequestBeforeToolCall: a permission request that comes before
// its tool_call (or with none, as on Gemini CLI) still gets one tool_call
// item, before its result.
func TestFakeRequestBeforeToolCall(t *testing.T) {
	for _, c := range []struct{ typ, name string }{{TypeGeneric, acptest.AskFirst}, {TypeGemini, ""}} {
		t.Run(c.typ, func(t *testing.T) {
			skipMinute(t)
			target := filepath.Join(t.TempDir(), "x.txt")
			r := startFake(t, c.typ, agenttest.Turn(agenttest.Step{Call: &agenttest.Tool{Name: c.name,
				Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{target}}}}), nil)
			h := &agenttest.Recorder{Gate: allow}
			runTurn(t, r.s, "go", h)
			if got := strings.Join(h.Types(), " "); got != "tool_call tool_result" {
				t.Fatalf("items %s", got)
			}
		})
	}
}

// TestFakePark: parking sends session/cancel, then answers the open
// request as the preset parks: a JSON-RPC error for Gemini CLI,
// "cancelled" for the others; any later request of the turn is cancelled
// without a second question.
func TestFakePark(t *testing.T) {
	skipMinute(t)
	for _, p := range presets {
		t.Run(p.typ, func(t *testing.T) {
			r := startFake(t, p.typ, agenttest.Turn(agenttest.Step{Call: agenttest.Exec("rm -rf build")}), nil)
			h := &agenttest.Recorder{}
			res := runTurn(t, r.s, "go", h)
			if res.Outcome != agent.TurnParked || len(h.Calls()) != 1 {
				t.Fatalf("Turn %+v, %d calls", res, len(h.Calls()))
			}
			if c := h.Calls()[0]; c.Effect != policy.EffectExec || c.Target.Command != "rm -rf build" || c.Tool != "execute" {
				t.Fatalf("call %+v", c)
			}
			sent := r.sent(t)
			var cancelAt, answerAt = -1, -1
			var answer map[string]any
			for i, m := range sent {
				if m["method"] == "session/cancel" && cancelAt < 0 {
					cancelAt = i
				}
				if id, ok := m["id"].(float64); ok && id == 0 && m["method"] == nil {
					answerAt, answer = i, m
				}
			}
			if cancelAt < 0 || answerAt < cancelAt {
				t.Fatalf("session/cancel at %d, the answer at %d: want the cancel first", cancelAt, answerAt)
			}
			b, _ := json.Marshal(answer)
			if p.park == parkError {
				if e, _ := answer["error"].(map[string]any); e == nil || e["code"] != float64(-32000) {
					t.Fatalf("Gemini's park answer %s, want a JSON-RPC error", b)
				}
			} else if !strings.Contains(string(b), `"outcome":{"outcome":"cancelled"}`) {
				t.Fatalf("park answer %s, want cancelled", b)
			}
			if res := h.OfType(agent.ItemToolResult); len(res) != 1 || toolMeta(res[0])["output"] != agent.WaitingText {
				t.Fatalf("results %v", res)
			}
		})
	}
}

// TestFakeUsage: each agent's way of reporting usage reads the same: 100
// input tokens, 40 of them cached (Gemini CLI reports no cached ones), 10
// output tokens.
func TestFakeUsage(t *testing.T) {
	for _, c := range []struct {
		typ  string
		want agent.Usage
	}{
		{TypeGemini, agent.Usage{InputTokens: 100, OutputTokens: 10}},
		{TypeQwen, agent.Usage{InputTokens: 100, InputTokensCached: 40, OutputTokens: 10}},
		{TypeOpenCode, agent.Usage{InputTokens: 100, InputTokensCached: 40, OutputTokens: 10}},
		{TypeCopilot, agent.Usage{InputTokens: 100, InputTokensCached: 40, OutputTokens: 10}},
		{TypeGeneric, agent.Usage{InputTokens: 100, InputTokensCached: 40, OutputTokens: 10}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			r := startFake(t, c.typ, agenttest.Turn(agenttest.Step{Text: "hi"}), nil)
			if res := runTurn(t, r.s, "go", &agenttest.Recorder{}); res.Usage != c.want {
				t.Fatalf("usage %+v, want %+v", res.Usage, c.want)
			}
		})
	}
}

// TestFakeFailedTurn: a failed model turn is a JSON-RPC error on the
// prompt, or (Copilot) an end_turn with an "Error: " notice; both are a
// failed turn saying why.
func TestFakeFailedTurn(t *testing.T) {
	for _, typ := range []string{TypeQwen, TypeCopilot} {
		t.Run(typ, func(t *testing.T) {
			r := startFake(t, typ, agenttest.Turn(agenttest.Step{Text: "trying"}, agenttest.Step{Fail: "the model answered 500"}), nil)
			h := &agenttest.Recorder{}
			res := runTurn(t, r.s, "go", h)
			if res.Outcome != agent.TurnFailed || !strings.Contains(res.ErrorText, "the model answered 500") {
				t.Fatalf("Turn %+v", res)
			}
			if slices.ContainsFunc(texts(h), func(s string) bool { return strings.Contains(s, "Error:") }) {
				t.Errorf("the notice was relayed as model text: %q", texts(h))
			}
		})
	}
}

// TestFakeHang: an agent that hangs mid-turn is interrupted when the
// context ends, and Close leaves nothing of its group, even when it
// ignores SIGTERM.
func TestFakeHang(t *testing.T) {
	r := startFake(t, TypeGeneric, agenttest.Script{IgnoreSIGTERM: true, Turns: [][]agenttest.Step{{{Text: "working"}, {Hang: true}}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := r.s.Turn(ctx, "go", &agenttest.Recorder{})
	if !errors.Is(err, context.DeadlineExceeded) || res.Outcome != agent.TurnInterrupted {
		t.Fatalf("Turn %+v, %v", res, err)
	}
	closeNow(t, r.s)
	if proc.GroupAlive(r.s.Pgid()) {
		t.Fatalf("group %d outlived Close", r.s.Pgid())
	}
}

// TestStartBounded: an agent that never answers initialize fails the start
// within the bound, as AGENT_SPAWN_FAILED, and is stopped; one that exits
// at once says what it printed.
func TestStartBounded(t *testing.T) {
	saved := startTimeout
	startTimeout = 300 * time.Millisecond
	t.Cleanup(func() { startTimeout = saved })
	l := agent.Launch{Executable: "/bin/sleep", ExtraArgs: []string{"100"}, WorkFolder: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	t0 := time.Now()
	_, err := start(context.Background(), generic, l)
	var te *agent.Error
	if !errors.As(err, &te) || te.Code != agent.CodeAgentSpawnFailed || !strings.Contains(te.Message, "no answer within") || time.Since(t0) > 10*time.Second {
		t.Fatalf("start of a silent agent: %v after %s", err, time.Since(t0))
	}
	startTimeout = saved
	l = fakeLaunch(t, TypeGeneric, agenttest.Script{StartupError: "fake: bad flag --acp"})
	_, err = start(context.Background(), generic, l)
	if !errors.As(err, &te) || te.Code != agent.CodeAgentSpawnFailed || !strings.Contains(te.Message, "bad flag --acp") {
		t.Fatalf("start of an agent that exits: %v", err)
	}
}
