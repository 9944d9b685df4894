//go:build realcli

package claude_test

// Tests against the REAL pinned Claude Code CLI, driven through the adapter,
// with claudetest.ModelServer as the model.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/policy"
)

// turnThenClose starts a session of l, runs one turn of msg with h and
// closes the session.
func turnThenClose(t *testing.T, l agent.Launch, msg string, h agent.Handler) (*claude.Session, agent.TurnResult) {
	t.Helper()
	s := start(t, l)
	res := turn(t, s, msg, h)
	closeSession(t, s)
	return s, res
}

func TestRealAutonomousWrite(t *testing.T) {
	e := newEnv(t)
	x := filepath.Join(e.work, "x.txt")
	e.model.Push(
		claudetest.Step{Reply: claudetest.Reply{Thinking: "let me write it", Text: "writing x.txt",
			Tools: []claudetest.ToolUse{{Name: "Write", Input: map[string]any{"file_path": x, "content": "hi\n"}}}}},
		claudetest.Text("all done"),
	)
	id := newUUID()
	l, log := e.launch("autonomous", id, false)
	h := &recorder{}
	s, res := turnThenClose(t, l, "please write x.txt", h)
	record(t, "autonomous-write", log)

	if res.Outcome != agent.TurnCompleted || res.ErrorText != "" {
		t.Fatalf("result = %+v, want completed", res)
	}
	if b, err := os.ReadFile(x); err != nil || string(b) != "hi\n" {
		t.Fatalf("x.txt = %q, %v; want hi", b, err)
	}
	got := h.Types()
	want := []string{agent.ItemThinking, agent.ItemText, agent.ItemToolCall, agent.ItemToolResult, agent.ItemText}
	if !slices.Equal(got, want) {
		t.Fatalf("items = %v, want %v\nlog:\n%s", got, want, log)
	}
	call := h.OfType(agent.ItemToolCall)[0]
	if !strings.Contains(call.Brief, "Write → "+x) {
		t.Errorf("tool_call brief = %q", call.Brief)
	}
	if len(h.Calls()) != 0 {
		t.Errorf("autonomous asked the gate: %+v", h.Calls())
	}
	if s.SessionID() != id {
		t.Errorf("SessionID = %q, want %q", s.SessionID(), id)
	}
	if res.NumTurns != 2 || res.Usage.OutputTokens == 0 || res.Usage.InputTokensCached == 0 ||
		res.Usage.InputTokens <= res.Usage.InputTokensCached || res.DurationMS <= 0 {
		t.Errorf("result numbers = %+v", res)
	}
}

func TestRealResumeSeesHistory(t *testing.T) {
	e := newEnv(t, claudetest.Text("FIRST-ANSWER"), claudetest.Text("second"))
	id := newUUID()
	l, log1 := e.launch("approval", id, false)
	s := start(t, l)
	if res := turn(t, s, "remember MARKER-ONE", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("first turn = %+v", res)
	}
	closeSession(t, s)

	l, log2 := e.launch("approval", id, true)
	s = start(t, l)
	if res := turn(t, s, "what did I say?", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("resumed turn = %+v\n%s", res, log2)
	}
	closeSession(t, s)
	record(t, "resume", log1, log2)
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	last := reqs[1]
	if !last.Contains("MARKER-ONE") || !last.Contains("FIRST-ANSWER") || last.LastUserText() != "what did I say?" {
		t.Fatalf("resumed request lacks the history; last user text %q", last.LastUserText())
	}
	if s.SessionID() != id {
		t.Errorf("SessionID = %q, want %q", s.SessionID(), id)
	}
}

// Park on Write: nothing written, outcome parked; a resumed process with an
// allow by fingerprint then writes the file.
func TestRealParkThenResumeAllowed(t *testing.T) {
	e := newEnv(t)
	x := filepath.Join(e.work, "x.txt")
	write := claudetest.Tool("Write", map[string]any{"file_path": x, "content": "hi"})
	e.model.Push(write, write, claudetest.Text("written"))
	id := newUUID()
	l, log1 := e.launch("approval", id, false)
	h := &recorder{}
	_, res := turnThenClose(t, l, "write x.txt", h)
	if res.Outcome != agent.TurnParked || res.ErrorText != "" {
		t.Fatalf("result = %+v, want parked\n%s", res, log1)
	}
	if _, err := os.Stat(x); !os.IsNotExist(err) {
		t.Fatalf("x.txt exists after park: %v", err)
	}
	if len(h.Calls()) != 1 {
		t.Fatalf("calls = %+v", h.Calls())
	}
	parked := h.Calls()[0]
	if parked.Tool != "Write" || parked.Effect != policy.EffectWrite || parked.Kind != policy.KindApproval ||
		!slices.Equal(parked.Target.Paths, []string{x}) || !strings.HasPrefix(parked.Fingerprint, "sha256:") ||
		parked.InvocationID == "" {
		t.Fatalf("parked call = %+v", parked)
	}

	l, log2 := e.launch("approval", id, true)
	h2 := &recorder{Gate: func(c policy.Call) policy.Verdict {
		if c.Fingerprint == parked.Fingerprint {
			return policy.Verdict{Action: policy.Allow}
		}
		return policy.Verdict{Action: policy.Deny, Message: "not the granted call"}
	}}
	_, res = turnThenClose(t, l, "A person approved your call to Write "+x+". Run it again now, unchanged.", h2)
	record(t, "park-resume-allow", log1, log2)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("resumed result = %+v\n%s", res, log2)
	}
	if len(h2.Calls()) != 1 || h2.Calls()[0].InvocationID == parked.InvocationID {
		t.Fatalf("resumed calls = %+v (parked id %s)", h2.Calls(), parked.InvocationID)
	}
	if b, err := os.ReadFile(x); err != nil || string(b) != "hi" {
		t.Fatalf("x.txt = %q, %v", b, err)
	}
	if !e.model.Requests()[1].Contains("A person approved your call") {
		t.Error("the resume message did not reach the model")
	}
}

// A deny without interrupt: the model sees the message as an error result.
func TestRealDenyMessageReachesModel(t *testing.T) {
	e := newEnv(t)
	x := filepath.Join(e.work, "x.txt")
	e.model.Push(claudetest.Tool("Write", map[string]any{"file_path": x, "content": "hi"}), claudetest.Text("ok, not writing"))
	l, log := e.launch("guarded", newUUID(), false)
	h := &recorder{Answers: map[string]policy.Verdict{"Write": {Action: policy.Deny, Message: "denied by worker rule 2"}}}
	_, res := turnThenClose(t, l, "write x.txt", h)
	record(t, "deny", log)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("result = %+v", res)
	}
	if _, err := os.Stat(x); !os.IsNotExist(err) {
		t.Fatal("x.txt written despite the deny")
	}
	tr := h.OfType(agent.ItemToolResult)
	if len(tr) != 1 || tr[0].Meta["tool"].(map[string]any)["is_error"] != true ||
		tr[0].Meta["tool"].(map[string]any)["output"] != "denied by worker rule 2" {
		t.Fatalf("tool_result = %+v", tr)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastUserText(), "denied by worker rule 2") {
		t.Fatalf("the model did not see the deny message")
	}
}

func TestRealAskUserQuestion(t *testing.T) {
	e := newEnv(t, claudetest.Tool("AskUserQuestion", map[string]any{"questions": []any{map[string]any{
		"question": "Which target?", "header": "Target", "multiSelect": false,
		"options": []any{map[string]any{"label": "staging", "description": "s"}, map[string]any{"label": "production", "description": "p"}},
	}}}))
	l, log := e.launch("autonomous", newUUID(), false)
	h := &recorder{}
	_, res := turnThenClose(t, l, "ask me", h)
	record(t, "ask", log)
	if res.Outcome != agent.TurnParked {
		t.Fatalf("result = %+v", res)
	}
	if len(h.Calls()) != 1 {
		t.Fatalf("calls = %+v", h.Calls())
	}
	c := h.Calls()[0]
	want := []policy.Question{{Question: "Which target?", Header: "Target", Options: []policy.Option{{Label: "staging", Description: "s"}, {Label: "production", Description: "p"}}}}
	if c.Kind != policy.KindAskUserQuestion || !slices.EqualFunc(c.Questions, want, func(a, b policy.Question) bool {
		return a.Question == b.Question && a.Header == b.Header && slices.Equal(a.Options, b.Options) && a.MultiSelect == b.MultiSelect
	}) {
		t.Fatalf("call = %+v", c)
	}
}

// An allow rule in .claude/settings.local.json must not approve a write
// under approval: --setting-sources= keeps it out (docs/agents.md).
func TestRealLocalSettingsDoNotApprove(t *testing.T) {
	e := newEnv(t)
	x := filepath.Join(e.work, "x.txt")
	if err := os.MkdirAll(filepath.Join(e.work, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	rules := `{"permissions":{"allow":["Write","Bash"]}}`
	if err := os.WriteFile(filepath.Join(e.work, ".claude", "settings.local.json"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Push(claudetest.Tool("Write", map[string]any{"file_path": x, "content": "hi"}))
	l, _ := e.launch("approval", newUUID(), false)
	s := start(t, l)
	h := &recorder{}
	res := turn(t, s, "write", h)
	if res.Outcome != agent.TurnParked || len(h.Calls()) != 1 {
		t.Fatalf("result = %+v calls = %+v: the local allow rule approved the call", res, h.Calls())
	}
	if _, err := os.Stat(x); !os.IsNotExist(err) {
		t.Fatal("x.txt written")
	}
}

// CLAUDE.md reaches the model through --append-system-prompt-file even
// though --setting-sources= drops it: the bytes run checked
// (Launch.Instructions), not what the work folder's CLAUDE.md says when
// the CLI starts, and the private copy is gone after Close.
func TestRealClaudeMDAppended(t *testing.T) {
	e := newEnv(t, claudetest.Text("ok"))
	if err := os.WriteFile(filepath.Join(e.work, "CLAUDE.md"), []byte("SWAPPED-IN-8812\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	l, log := e.launch("guarded", newUUID(), false)
	l.Instructions = []byte("PROJECT-RULE-7731: be brief\n")
	s := start(t, l)
	copies, _ := filepath.Glob(filepath.Join(tmp, "bhw-claude-md-*", "CLAUDE.md"))
	if len(copies) != 1 {
		t.Fatalf("private copies %v, want one", copies)
	}
	if fi, err := os.Stat(filepath.Dir(copies[0])); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the copy's folder: %v %v, want mode 0700", fi.Mode(), err)
	}
	if res := turn(t, s, "hi", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("result = %+v\n%s", res, log)
	}
	sys := string(e.model.Requests()[0].System)
	if !strings.Contains(sys, "PROJECT-RULE-7731") || strings.Contains(sys, "SWAPPED-IN-8812") {
		t.Fatalf("the system prompt holds %q, want the checked CLAUDE.md and not the work folder's", sys)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copies[0]); !os.IsNotExist(err) {
		t.Fatalf("the private copy outlived the session: %v", err)
	}
}

// A resumed session keeps the system prompt it started with: the
// --append-system-prompt-file of a resume is not read, so a CLAUDE.md
// changed (or skipped, or added) after the session began does not reach
// the model until a new session starts.
func TestRealResumeKeepsAppendedPrompt(t *testing.T) {
	e := newEnv(t, claudetest.Text("one"), claudetest.Text("two"))
	id := newUUID()
	l, _ := e.launch("approval", id, false)
	l.Instructions = []byte("FIRST-RULE-1001\n")
	s := start(t, l)
	turn(t, s, "hi", &recorder{})
	closeSession(t, s)
	l, _ = e.launch("approval", id, true)
	l.Instructions = []byte("SECOND-RULE-2002\n")
	s = start(t, l)
	turn(t, s, "again", &recorder{})
	reqs := e.model.Requests()
	last := string(reqs[len(reqs)-1].System)
	if !strings.Contains(last, "FIRST-RULE-1001") || strings.Contains(last, "SECOND-RULE-2002") {
		t.Fatalf("the resumed request's system prompt: first %v second %v; the CLI changed how a resume reads --append-system-prompt-file",
			strings.Contains(last, "FIRST-RULE-1001"), strings.Contains(last, "SECOND-RULE-2002"))
	}
}

func TestRealAPIError(t *testing.T) {
	e := newEnv(t, claudetest.Error(500))
	l, log := e.launch("approval", newUUID(), false)
	s := start(t, l)
	res := turn(t, s, "hi", &recorder{})
	record(t, "apierr-500", log)
	if res.Outcome != agent.TurnFailed || !strings.Contains(res.ErrorText, "500") || res.ResumeFailed {
		t.Fatalf("result = %+v", res)
	}
}

func TestRealUnknownResume(t *testing.T) {
	e := newEnv(t)
	l, log := e.launch("approval", newUUID(), true)
	s := start(t, l)
	res := turn(t, s, "hi", &recorder{})
	record(t, "resume-unknown", log)
	if !res.ResumeFailed {
		t.Fatalf("result = %+v, want ResumeFailed\n%s", res, log)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests", n)
	}
}

// Every tool the pinned CLI offers is classified by the policy package.
func TestRealToolsAreKnown(t *testing.T) {
	e := newEnv(t, claudetest.Text("ok"))
	l, _ := e.launch("autonomous", newUUID(), false)
	s := start(t, l)
	turn(t, s, "hi", &recorder{})
	tools := s.Tools()
	if len(tools) == 0 {
		t.Fatal("no system/init.tools seen")
	}
	for _, tool := range tools {
		if !slices.Contains(claude.KnownTools, tool) {
			t.Errorf("tool %q of the pinned CLI is not in claude.KnownTools", tool)
		}
	}
}

// Interrupt during a sleeping Bash tool, then Close: nothing of the group,
// nor the sleep, is left.
func TestRealInterruptThenClose(t *testing.T) {
	e := newEnv(t)
	fifo := filepath.Join(e.work, "pid.fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	e.model.Push(claudetest.Tool("Bash", map[string]any{"command": "echo $$ > " + fifo + "; exec sleep 300", "description": "sleep"}))
	l, log := e.launch("autonomous", newUUID(), false)
	s := start(t, l)
	pidc := make(chan int, 1)
	go func() { pidc <- readPid(fifo) }()
	h := &recorder{}
	var sleepPid int
	h.OnItem = func(it agent.Item) {
		if it.Type() == agent.ItemToolCall {
			// The sleep's pid arrives through the fifo once Bash runs it.
			sleepPid = <-pidc
			if err := s.Interrupt(); err != nil {
				t.Errorf("Interrupt: %v", err)
			}
		}
	}
	t0 := time.Now()
	res := turn(t, s, "sleep", h)
	if res.Outcome != agent.TurnInterrupted {
		t.Fatalf("result = %+v\n%s", res, log)
	}
	pgid := s.Pgid()
	closeSession(t, s)
	record(t, "interrupt", log)
	if sleepPid <= 0 {
		t.Fatal("no sleep pid")
	}
	waitGone(t, sleepPid, 10*time.Second)
	if pids := groupMembers(pgid); len(pids) > 0 {
		t.Fatalf("processes left in group %d: %v", pgid, pids)
	}
	t.Logf("interrupt + close took %v", time.Since(t0))
}

// A retried API error becomes an api_retry status item; the turn completes.
func TestRealAPIRetryStatus(t *testing.T) {
	e := newEnv(t, claudetest.Error(529), claudetest.Text("recovered"))
	l, log := e.launch("approval", newUUID(), false)
	l.Env = append(l.Env, "CLAUDE_CODE_MAX_RETRIES=1")
	s := start(t, l)
	h := &recorder{}
	res := turn(t, s, "hi", h)
	record(t, "api-retry", log)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("result = %+v", res)
	}
	st := h.OfType(agent.ItemStatus)
	if len(st) != 1 || st[0].Meta["status"] != "api_retry" ||
		st[0].Meta["error_status"] != 529 {
		t.Fatalf("status items = %+v", st)
	}
}

// --model= and --effort= reach the API request.
func TestRealModelAndEffort(t *testing.T) {
	e := newEnv(t, claudetest.Text("ok"))
	l, log := e.launch("approval", newUUID(), false)
	l.Model, l.Effort = "sonnet", "low"
	s := start(t, l)
	if res := turn(t, s, "hi", &recorder{}); res.Outcome != agent.TurnCompleted {
		t.Fatalf("result = %+v\n%s", res, log)
	}
	r := e.model.Requests()[0]
	if !strings.Contains(r.Model, "sonnet") || !r.Contains(`"effort":"low"`) {
		t.Fatalf("model %q, effort low in body: %v", r.Model, r.Contains(`"effort":"low"`))
	}
}

// A provider's limits and refusals, as the pinned CLI reports them: each
// fails the turn with its Failure; a subscription's usage limit (OAuth
// login) names its reset, an API key's 429 does not.
func TestRealLimitsAndRefusedKey(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	cases := []struct {
		name    string
		step    claudetest.Step
		oauth   bool   // logged in with claude.ai instead of an API key
		key     string // the key the fake takes, "" any
		noKey   bool   // no key and no login at all
		want    string
		resetAt time.Time
	}{
		{name: "rate-limit-429", step: claudetest.RateLimited(time.Now().Add(time.Hour)), want: agent.FailureRateLimit},
		{name: "usage-limit-oauth", step: claudetest.UsageLimited(reset), oauth: true, want: agent.FailureRateLimit, resetAt: reset},
		{name: "overloaded-529", step: claudetest.Error(529), want: agent.FailureRateLimit},
		{name: "auth-401", step: claudetest.Text("never"), key: "the-right-key", want: agent.FailureAuth},
		{name: "not-logged-in", step: claudetest.Text("never"), noKey: true, want: agent.FailureAuth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.step)
			e.model.RequireKey(c.key)
			l, log := e.launch("approval", newUUID(), false)
			if c.oauth || c.noKey {
				l.Env = slices.DeleteFunc(l.Env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
			}
			if c.oauth {
				claudetest.WriteOAuthLogin(t, e.config, time.Now().Add(24*time.Hour))
			}
			s := start(t, l)
			res := turn(t, s, "hi", &recorder{})
			record(t, c.name, log)
			if res.Outcome != agent.TurnFailed || res.Failure != c.want || !res.ResetAt.Equal(c.resetAt) {
				t.Fatalf("result %+v, want failed %q resetting %v", res, c.want, c.resetAt)
			}
			t.Logf("error text %q", res.ErrorText)
		})
	}
}
