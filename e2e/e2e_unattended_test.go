//go:build realcli

package e2e

// Unattended runs: a turn whose every tool call is refused, a provider's
// rate limit, a refused key and a spent budget each end the run with a
// code that says so, for Claude Code and for Codex.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// checkNoProgress: the turn's only tool call was refused by the worker's
// rule, so the run ends turn_failed NO_PROGRESS naming the rule, the
// counts say so, and the thread stays active.
func checkNoProgress(t *testing.T, e *e2eEnv, s *guardedScenario, alias, message string) {
	t.Helper()
	e.handOffGuarded(alias, s.agent, s.threadPolicy(), message)
	sum := e.activate(alias, exit.TurnFailed, run.OutcomeTurnFailed)
	if sum.Error == nil || sum.Error.Code != exit.CodeNoProgress || !strings.Contains(sum.Error.Message, `worker rule "stay-home"`) {
		t.Fatalf("summary error %+v, want NO_PROGRESS naming worker rule stay-home", sum.Error)
	}
	want := agent.ToolCounts{Calls: 1, DeniedByRule: 1}
	if sum.Tools == nil || *sum.Tools != want {
		t.Errorf("summary tools %+v, want %+v", sum.Tools, want)
	}
	ends := e.itemsOfType(alias, agent.ItemTurnEnd)
	if len(ends) != 1 {
		t.Fatalf("%d turn_end items: %v", len(ends), e.itemTypes(alias))
	}
	if m := meta(t, ends[0]); m.Outcome != "no_progress" || m.Tools == nil || *m.Tools != want {
		t.Errorf("turn_end outcome %q tools %+v, want no_progress %+v", m.Outcome, m.Tools, want)
	}
	var found bool
	for _, it := range e.itemsOfType(alias, agent.ItemStatus) {
		if m := meta(t, it); m.Status == "no_progress" {
			found = strings.Contains(it.Content[0].Text, s.deniedPath) && strings.Contains(it.Content[0].Text, `worker rule "stay-home"`)
		}
	}
	if !found {
		t.Errorf("no no_progress status naming the call and the rule: %v", e.itemTypes(alias))
	}
	if exists(s.deniedPath) {
		t.Errorf("%s was written", s.deniedPath)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
}

func TestE2EClaudeEveryCallDeniedNoProgress(t *testing.T) {
	e := newClaudeE2E(t)
	s := newGuardedScenario(e.e2eEnv, claudeType, func() int { return len(e.model.Requests()) })
	e.model.Push(claudetest.Tool("Write", map[string]any{"file_path": s.deniedPath, "content": "no\n"}),
		claudetest.Text("I could not write it"))
	checkNoProgress(t, e.e2eEnv, s, "projects/p1/claude-noprogress", "write the file outside")
}

func TestE2ECodexEveryCallDeniedNoProgress(t *testing.T) {
	e := newCodexE2E(t)
	s := newGuardedScenario(e.e2eEnv, codexType, func() int { return len(e.model.Requests()) })
	e.model.Push(codextest.Patch(codextest.AddFile(s.deniedPath, "no")), codextest.Say("I could not write it"))
	checkNoProgress(t, e.e2eEnv, s, "projects/p1/codex-noprogress", "write the file outside")
}

// statusItems are the thread's status items with token.
func (e *e2eEnv) statusItems(alias, token string) []string {
	e.t.Helper()
	var out []string
	for _, it := range e.itemsOfType(alias, agent.ItemStatus) {
		if meta(e.t, it).Status == token {
			out = append(out, it.Content[0].Text)
		}
	}
	return out
}

// checkAuthFailed: a refused key ends every run AGENT_AUTH_FAILED (78)
// with the fix named, the thread is told once, its message waits, and the
// run after the fix delivers it. refuse and accept switch the fake's key
// check; requests counts what the model got.
func checkAuthFailed(t *testing.T, e *e2eEnv, typ, fix string, refuse, accept func(), requests func() int, lastUser func() string) {
	t.Helper()
	alias := "projects/p1/" + typ + "-auth"
	refuse()
	e.handOff(alias, typ, "approval", "the message that waits")
	for i := 0; i < 2; i++ {
		sum := e.activate(alias, exit.Config, "")
		if sum.Error == nil || sum.Error.Code != exit.CodeAgentAuthFailed || !strings.Contains(sum.Error.Message, fix) {
			t.Fatalf("run %d: summary error %+v, want AGENT_AUTH_FAILED naming %q", i+1, sum.Error, fix)
		}
	}
	if got := e.statusItems(alias, "agent_auth_failed"); len(got) != 1 || !strings.Contains(got[0], fix) {
		t.Errorf("agent_auth_failed status items %q, want one naming %q", got, fix)
	}
	if n := len(e.itemsOfType(alias, agent.ItemTurnEnd)); n != 0 {
		t.Errorf("%d turn_end items, want none: the turn did not happen", n)
	}
	th := e.threadYAML(alias)
	if th.Agent.State != "active" || len(th.Items.PendingInbound) != 1 || th.Turn.State != "idle" {
		t.Fatalf("thread.yaml agent %q turn %q pending %d, want active, idle, the message kept",
			th.Agent.State, th.Turn.State, len(th.Items.PendingInbound))
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
	accept()
	n := requests()
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if requests() == n || !strings.Contains(lastUser(), "the message that waits") {
		t.Errorf("the run after the fix sent the model %q, want the message that waited", lastUser())
	}
	if th := e.threadYAML(alias); th.Ledger != nil && th.Ledger.AuthFailed != "" {
		t.Errorf("ledger.auth_failed %q after a turn ran", th.Ledger.AuthFailed)
	}
}

func TestE2EClaudeRefusedKeyAuthFailed(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Text("at last"))
	checkAuthFailed(t, e.e2eEnv, claudeType, "/login",
		func() { e.model.RequireKey("the-right-key") }, func() { e.model.RequireKey("") },
		func() int { return len(e.model.Requests()) }, func() string { return e.lastRequest().LastUserText() })
}

func TestE2ECodexRefusedKeyAuthFailed(t *testing.T) {
	e := newCodexE2E(t, codextest.Say("at last"))
	checkAuthFailed(t, e.e2eEnv, codexType, "codex login",
		func() { e.model.RequireKey("the-right-key") }, func() { e.model.RequireKey("") },
		func() int { return len(e.model.Requests()) }, func() string {
			reqs := e.model.Requests()
			return reqs[len(reqs)-1].LastUserText()
		})
}

// checkRateLimited: a usage limit with a reset time is waited out. The
// run exits 75 RATE_LIMITED naming the reset, the message waits, a run
// before the reset starts nothing and writes nothing, and the first run
// after it delivers the message again. A zero reset: the agent names
// none, and run's own wait is in the future. lift, when set, is called
// once the limit has been met (the fake stops refusing). It returns the
// limited_until of the first run.
func checkRateLimited(t *testing.T, e *e2eEnv, typ string, reset time.Time, lift func(), requests func() int, lastUser func() string) time.Time {
	t.Helper()
	alias := "projects/p1/" + typ + "-limit"
	e.handOff(alias, typ, "approval", "the message that waits")
	t0 := time.Now()
	sum := e.activate(alias, exit.TempFail, "")
	at := reset.UTC().Format(time.RFC3339)
	if reset.IsZero() {
		at = sum.LimitedUntil
		if until, err := time.Parse(time.RFC3339, at); err != nil || !until.After(t0.Add(time.Minute)) {
			t.Fatalf("limited_until %q, want run's own wait from now", at)
		}
	}
	if sum.Error == nil || sum.Error.Code != exit.CodeRateLimited || !strings.Contains(sum.Error.Message, at) || sum.LimitedUntil != at {
		t.Fatalf("summary %+v error %+v, want RATE_LIMITED until %s", sum, sum.Error, at)
	}
	if lift != nil {
		lift()
	}
	if got := e.statusItems(alias, "rate_limited"); len(got) != 1 || !strings.Contains(got[0], at) {
		t.Errorf("rate_limited status items %q, want one naming %s", got, at)
	}
	if n := len(e.itemsOfType(alias, agent.ItemTurnEnd)); n != 0 {
		t.Errorf("%d turn_end items, want none: the turn did not happen", n)
	}
	th := e.threadYAML(alias)
	if th.Ledger == nil || th.Ledger.LimitedUntil != at || len(th.Items.PendingInbound) != 1 || th.Agent.State != "active" {
		t.Fatalf("thread.yaml ledger %+v pending %d state %q", th.Ledger, len(th.Items.PendingInbound), th.Agent.State)
	}

	// Before the reset: nothing starts, nothing is written.
	yamlPath := filepath.Join(setup.ThreadDir(e.jobDir(), alias), "thread.yaml")
	before, _ := os.ReadFile(yamlPath)
	n, items := requests(), len(e.items(alias))
	sum = e.activate(alias, exit.TempFail, "")
	if sum.Error == nil || sum.Error.Code != exit.CodeRateLimited || sum.LimitedUntil != at {
		t.Errorf("the run before the reset: %+v %+v", sum, sum.Error)
	}
	if after, _ := os.ReadFile(yamlPath); requests() != n || len(e.items(alias)) != items || string(after) != string(before) {
		t.Errorf("the run before the reset asked the model, posted or wrote thread.yaml")
	}
	if _, out, _ := e.run("ls", "--runnable"); strings.Contains(out, alias) {
		t.Errorf("ls --runnable lists %s before the reset: %q", alias, out)
	}

	// The reset has passed (the test cannot wait hours: it moves the
	// recorded time into the past).
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if err := os.WriteFile(yamlPath, []byte(strings.Replace(string(before), at, past, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if requests() == n || !strings.Contains(lastUser(), "the message that waits") {
		t.Errorf("the run after the reset sent the model %q, want the message that waited", lastUser())
	}
	if th := e.threadYAML(alias); th.Ledger != nil && th.Ledger.LimitedUntil != "" {
		t.Errorf("ledger.limited_until %q after a turn ran", th.Ledger.LimitedUntil)
	}
	until, _ := time.Parse(time.RFC3339, at)
	return until
}

func TestE2EClaudeUsageLimitWaitedOut(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	e := newClaudeE2E(t, claudetest.UsageLimited(reset), claudetest.Text("after the limit"))
	// A claude.ai login: the API reports a subscription's limit with its reset.
	delete(e.agentConfig(claudeType).Env, "ANTHROPIC_API_KEY")
	e.writeConfig()
	claudetest.WriteOAuthLogin(t, e.configDir, time.Now().Add(24*time.Hour))
	checkRateLimited(t, e.e2eEnv, claudeType, reset, nil,
		func() int { return len(e.model.Requests()) }, func() string { return e.lastRequest().LastUserText() })
}

func TestE2ECodexUsageLimitWaitedOut(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	e := newCodexE2E(t, codextest.UsageLimited(reset), codextest.Say("after the limit"))
	checkRateLimited(t, e.e2eEnv, codexType, reset, nil,
		func() int { return len(e.model.Requests()) }, func() string {
			reqs := e.model.Requests()
			return reqs[len(reqs)-1].LastUserText()
		})
}

// checkBudget: a budget of two agent turns, spent by the first turn (a
// tool call and the answer), parks the thread: it is told once what was
// spent and which flag raises the budget, the runs after it start nothing
// (and, with nothing new, write nothing), thread show shows the ledger,
// and once a person raises the budget the waiting message is delivered.
func checkBudget(t *testing.T, e *e2eEnv, typ string, requests func() int, lastUser func() string) {
	t.Helper()
	alias := "projects/p1/" + typ + "-budget"
	e.asPerson("thread", "new", "--work-folder", e.work, "--agent", typ, "--permissions", "autonomous",
		"--max-turns", "2", "--message", "write the file", alias)
	sum := e.activate(alias, 0, run.OutcomeTurnCompleted)
	th := e.threadYAML(alias)
	if th.Ledger == nil || th.Ledger.Total.AgentTurns != 2 || th.Ledger.Total.Activations != 1 || len(th.Ledger.Activations) != 1 {
		t.Fatalf("ledger after the first turn %+v, want 2 agent turns in 1 activation", th.Ledger)
	}
	if th.Ledger.Total.InputTokens == 0 || th.Ledger.Total.InputTokens != sum.Usage.InputTokens {
		t.Errorf("ledger input tokens %d, the summary's %d", th.Ledger.Total.InputTokens, sum.Usage.InputTokens)
	}
	told := e.statusItems(alias, "budget_spent")
	if len(told) != 1 || !strings.Contains(told[0], "2 agent turns of max_turns 2") || !strings.Contains(told[0], "thread edit "+alias+" --max-turns") {
		t.Fatalf("budget_spent status items %q, want one saying what was spent and the flag", told)
	}

	e.post(alias, "the message that waits")
	n := requests()
	sum = e.activate(alias, 0, run.OutcomeParked)
	yamlPath := filepath.Join(setup.ThreadDir(e.jobDir(), alias), "thread.yaml")
	before, _ := os.ReadFile(yamlPath)
	items := len(e.items(alias))
	e.activate(alias, 0, run.OutcomeParked)
	if after, _ := os.ReadFile(yamlPath); requests() != n || len(e.items(alias)) != items || string(after) != string(before) {
		t.Errorf("a run with the budget spent asked the model, posted or wrote thread.yaml")
	}
	if got := e.statusItems(alias, "budget_spent"); len(got) != 1 {
		t.Errorf("%d budget_spent status items, want the thread told once", len(got))
	}
	if _, out, _ := e.run("ls", "--runnable"); strings.Contains(out, alias) {
		t.Errorf("ls --runnable lists %s with its budget spent: %q", alias, out)
	}
	if _, out, _ := e.run("thread", "show", alias); !strings.Contains(out, "2 agent turns") || !strings.Contains(out, "budget spent (max_turns)") {
		t.Errorf("thread show does not show the ledger:\n%s", out)
	}

	e.asPerson("thread", "edit", alias, "--max-turns", "4")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if requests() == n || !strings.Contains(lastUser(), "the message that waits") {
		t.Errorf("the run after the raise sent the model %q, want the message that waited", lastUser())
	}
	if th := e.threadYAML(alias); th.Ledger.Total.AgentTurns != 3 || th.Ledger.Total.Activations != 2 || len(th.Ledger.BudgetSpent) != 0 {
		t.Errorf("ledger after the raise %+v", th.Ledger)
	}
}

func TestE2EClaudeBudgetOfTwoTurns(t *testing.T) {
	e := newClaudeE2E(t)
	e.allowAutonomous()
	e.model.Push(writeTool(e.path("x.txt"), "x\n"), claudetest.Text("written"), claudetest.Text("at last"))
	checkBudget(t, e.e2eEnv, claudeType, func() int { return len(e.model.Requests()) },
		func() string { return e.lastRequest().LastUserText() })
}

func TestE2ECodexBudgetOfTwoTurns(t *testing.T) {
	e := newCodexE2E(t, codextest.Run("echo hi > x.txt"), codextest.Say("written"), codextest.Say("at last"))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	checkBudget(t, e.e2eEnv, codexType, func() int { return len(e.model.Requests()) }, func() string {
		reqs := e.model.Requests()
		return reqs[len(reqs)-1].LastUserText()
	})
}

// A budget that is not numbers above 0 is refused where it is given:
// thread new (64, BUDGET_INVALID, nothing created) and, written straight
// into the envelope, the checklist (the thread fails with the code).
func TestE2EBudgetInvalid(t *testing.T) {
	e := newCodexE2E(t)
	code, _, stderr := e.run("thread", "new", "--work-folder", e.work, "--agent", codexType, "--max-turns", "two", "projects/p1/bad-budget")
	if code != exit.Usage || !strings.Contains(stderr, exit.CodeBudgetInvalid) || !strings.Contains(stderr, "--max-turns") {
		t.Errorf("thread new --max-turns two: exit %d\n%s", code, stderr)
	}
	if len(e.srv.Items("projects/p1/bad-budget")) != 0 {
		t.Error("the refused thread got items")
	}

	const alias = "projects/p1/bad-budget-envelope"
	var v map[string]any
	if err := json.Unmarshal(envelope.NewThread(e.work, codexType, setup.PermApproval, alias), &v); err != nil {
		t.Fatal(err)
	}
	v["thread"].(map[string]any)["metadata"].(map[string]any)["agent"].(map[string]any)["budget"] = map[string]any{"max_turns": "two"}
	b, _ := json.Marshal(v)
	e.srv.Put(alias, string(b))
	e.post(alias, "hello")
	sum := e.activate(alias, exit.Failed, run.OutcomeFailed)
	if sum.Error == nil || sum.Error.Code != exit.CodeBudgetInvalid || !strings.Contains(sum.Error.Message, "agent.budget.max_turns") {
		t.Errorf("summary error %+v, want BUDGET_INVALID naming agent.budget.max_turns", sum.Error)
	}
	if len(e.model.Requests()) != 0 {
		t.Error("the model was asked")
	}
}

// checkCutMidTurn: a turn that reaches the budget mid-way is stopped there
// (by the CLI's own cap, or by run metering the agent's usage), and the
// thread parks with its budget_spent status. maxRequests is how many
// model requests the agent may have made by then.
func checkCutMidTurn(t *testing.T, e *e2eEnv, typ, flag, value, cap string, maxRequests int, requests func() int, calls string) {
	t.Helper()
	alias := "projects/p1/" + typ + "-cut"
	e.asPerson("thread", "new", "--work-folder", e.work, "--agent", typ, "--permissions", "autonomous",
		flag, value, "--message", strings.TrimSpace("write both files "+calls), alias)
	e.activate(alias, 0, run.OutcomeParked)
	if n := requests(); n < 2 || n > maxRequests {
		t.Errorf("%d model requests, want 2 to %d: the turn stops at the cap", n, maxRequests)
	}
	ends := e.itemsOfType(alias, agent.ItemTurnEnd)
	if len(ends) != 1 || meta(t, ends[0]).Outcome != "budget" {
		t.Fatalf("turn_end items %d (%v), want one with outcome budget", len(ends), e.itemTypes(alias))
	}
	if told := e.statusItems(alias, "budget_spent"); len(told) != 1 || !strings.Contains(told[0], cap) {
		t.Errorf("budget_spent status items %q, want one naming %s", told, cap)
	}
	if th := e.threadYAML(alias); th.Ledger == nil || len(th.Ledger.BudgetSpent) != 1 || th.Ledger.BudgetSpent[0] != cap {
		t.Errorf("ledger %+v, want %s spent", th.Ledger, cap)
	}
}

func TestE2EClaudeBudgetCutsTheTurn(t *testing.T) {
	e := newClaudeE2E(t)
	e.allowAutonomous()
	e.model.Push(writeTool(e.path("a.txt"), "a\n"), writeTool(e.path("b.txt"), "b\n"), claudetest.Text("never asked"))
	// Claude Code stops itself before a third request: --max-turns is
	// what remains.
	checkCutMidTurn(t, e.e2eEnv, claudeType, "--max-turns", "2", "max_turns", 2, func() int { return len(e.model.Requests()) }, "")
}

func TestE2ECodexBudgetCutsTheTurn(t *testing.T) {
	// 110 tokens a response: the second reaches 150, and run interrupts
	// the turn while its command runs (slower than the interrupt, so the
	// turn cannot finish first). Codex lets the command end and may send
	// the request after it before it stops.
	e := newCodexE2E(t, codextest.Run("echo a > a.txt"), codextest.Run("sleep 2; echo b > b.txt"), codextest.Say("stopped anyway"))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	checkCutMidTurn(t, e.e2eEnv, codexType, "--max-tokens", "150", "max_tokens", 3, func() int { return len(e.model.Requests()) }, "")
}
