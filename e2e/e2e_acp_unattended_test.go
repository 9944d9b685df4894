//go:build realcli

package e2e

// Unattended runs of the four ACP presets with their real pinned CLIs
// against the scripted fake models: a turn whose every tool call a rule
// refuses, a refused key, a provider's rate limit and a budget of two agent
// turns each end the run with the code that says so, as for Claude Code and
// Codex (e2e_unattended_test.go).

import (
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
)

// acpUnattended is what every preset is put through.
var acpUnattended = []acpScenario{
	{"every_call_denied", acpNoProgress, ""},
	{"refused_key", acpAuthFailed, ""},
	{"rate_limited", acpRateLimited, ""},
	{"budget_of_two_turns", acpBudget, ""},
	// The only preset that reports usage during a turn.
	{"budget_cuts_the_turn", acpBudgetCut, acptest.Qwen.Type},
}

// acpFix is the key variable each preset's AGENT_AUTH_FAILED names.
var acpFix = map[string]string{
	acptest.Gemini.Type: "GEMINI_API_KEY", acptest.Qwen.Type: "OPENAI_API_KEY",
	acptest.OpenCode.Type: "OPENAI_API_KEY", acptest.Copilot.Type: "COPILOT_PROVIDER_API_KEY",
}

// TestE2EACPUnattended runs every unattended scenario on every preset, as
// many at once as acpSlots admits.
func TestE2EACPUnattended(t *testing.T) {
	var cases []acpCase
	for _, a := range acptest.Agents {
		cases = append(cases, acpCase{a.Type, a, false})
	}
	runACPScenarios(t, cases, acpUnattended)
}

// lastUserText is the last user text the fake model got with tools.
func (e *acpE2E) lastUserText() string {
	reqs := e.modelRequests()
	if len(reqs) == 0 {
		return ""
	}
	return reqs[len(reqs)-1].LastUserText()
}

func (e *acpE2E) requestCount() int { return len(e.modelRequests()) }

// acpNoProgress: the turn's only call, a write outside the work folder, is
// refused by the worker's rule. Gemini CLI refuses such a write itself,
// unasked, so its call is a shell command writing there, refused by an
// exec rule.
func acpNoProgress(t *testing.T, e *acpE2E) {
	s := newGuardedScenario(e.e2eEnv, e.typ, e.requestCount)
	call := e.a.Write(s.deniedPath, "no\n")
	if e.a == acptest.Gemini {
		// Named as the write rule it stands in for, which the checks name.
		e.Config.Policy.Rules = []policy.Rule{{ID: "stay-home", Effect: policy.EffectExec, Command: []string{"touch *"}, Action: policy.DecisionDeny}}
		e.writeConfig()
		call = e.a.Shell("touch " + s.deniedPath)
	}
	checkNoProgress(t, e.e2eEnv, s, "projects/p1/"+e.typ+"-noprogress", "write the file outside "+call)
}

func acpAuthFailed(t *testing.T, e *acpE2E) {
	checkAuthFailed(t, e.e2eEnv, e.typ, acpFix[e.typ],
		func() { e.model.RequireKey("the-right-key", 401) }, func() { e.model.RequireKey("", 0) },
		e.requestCount, e.lastUserText)
}

// acpRateLimited: every model request is answered 429 with a 1 s reset,
// which each agent retries a few times (Qwen Code about once a second for
// a while) before it gives up; the reset is a retry's, so run waits its
// own while. Gemini CLI is given a 2 h reset instead, beyond its longest
// retry: it fails the turn at once naming the reset, which is recorded.
// (The others would wait such a reset out retrying.)
func acpRateLimited(t *testing.T, e *acpE2E) {
	reset := time.Second
	if e.a == acptest.Gemini {
		reset = 2 * time.Hour
	}
	e.model.Inject(acptest.Fault{Status: 429, RetryAfter: reset})
	t0 := time.Now()
	until := checkRateLimited(t, e.e2eEnv, e.typ, time.Time{}, e.model.ClearFaults, e.requestCount, e.lastUserText)
	if want := t0.Add(reset); e.a == acptest.Gemini && (until.Before(want.Add(-time.Second)) || until.After(want.Add(5*time.Minute))) {
		t.Errorf("limited_until %s, want the agent's reset %s", until, want.UTC().Format(time.RFC3339))
	}
}

// acpBudget: a budget of two agent turns. Qwen Code tells its model
// requests, so its first turn (a call and the answer) spends both; the
// others count one agent turn a prompt, so the second message spends it.
// Either way the thread then parks, told once what was spent and the flag
// that raises it; the runs after it start nothing, and once a person
// raises the budget the waiting message is delivered.
func acpBudget(t *testing.T, e *acpE2E) {
	alias := "projects/p1/" + e.typ + "-budget"
	x := e.file("x.txt")
	e.asPerson("thread", "new", "--work-folder", e.work, "--agent", e.typ, "--permissions", "autonomous",
		"--max-turns", "2", "--message", "write the file "+e.a.Write(x, "x\n"), alias)
	turns := 0
	for i := 0; len(e.statusItems(alias, "budget_spent")) == 0; i++ {
		if i == 2 {
			t.Fatalf("no budget_spent after two turns: ledger %+v", e.threadYAML(alias).Ledger)
		}
		if i > 0 {
			e.post(alias, "one more message")
			e.beforeResume(alias)
		}
		code, out, _ := e.run("--json", alias)
		sum := parseSummary(t, out)
		if code != 0 || (sum.Outcome != run.OutcomeTurnCompleted && sum.Outcome != run.OutcomeParked) {
			t.Fatalf("turn %d: exit %d outcome %q error %+v", i+1, code, sum.Outcome, sum.Error)
		}
		turns++
	}
	fileIs(t, x, "x\n")
	th := e.threadYAML(alias)
	if th.Ledger == nil || th.Ledger.Total.AgentTurns < 2 || th.Ledger.Total.Activations != int64(turns) {
		t.Fatalf("ledger %+v, want 2 agent turns in %d activations", th.Ledger, turns)
	}
	if e.a == acptest.Qwen && turns != 1 {
		t.Errorf("Qwen Code's budget took %d activations, want 1: its first turn's 2 model requests are 2 agent turns", turns)
	}
	if th.Ledger.Total.InputTokens == 0 {
		t.Errorf("ledger %+v counts no tokens", th.Ledger.Total)
	}
	told := e.statusItems(alias, "budget_spent")
	if len(told) != 1 || !strings.Contains(told[0], "of max_turns 2") || !strings.Contains(told[0], "thread edit "+alias+" --max-turns") {
		t.Fatalf("budget_spent status items %q, want one saying what was spent and the flag", told)
	}

	e.post(alias, "the message that waits")
	n := e.requestCount()
	e.activate(alias, 0, run.OutcomeParked)
	if e.requestCount() != n {
		t.Errorf("a run with the budget spent asked the model")
	}
	if got := e.statusItems(alias, "budget_spent"); len(got) != 1 {
		t.Errorf("%d budget_spent status items, want the thread told once", len(got))
	}
	if _, out, _ := e.run("thread", "show", alias); !strings.Contains(out, "budget spent (max_turns)") {
		t.Errorf("thread show does not show the spent budget:\n%s", out)
	}
	e.asPerson("thread", "edit", alias, "--max-turns", "10")
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if e.requestCount() == n || !strings.Contains(e.lastUserText(), "the message that waits") {
		t.Errorf("the run after the raise sent the model %q, want the message that waited", e.lastUserText())
	}
}

// acpBudgetCut: Qwen Code's usage per model request (110 tokens each from
// the fake) is metered, and the turn is interrupted once it reaches
// max_tokens, while the second command runs (slower than the interrupt).
func acpBudgetCut(t *testing.T, e *acpE2E) {
	msg := e.a.Shell("echo a > a.txt") + " " + e.a.Shell("sleep 3; echo b > b.txt")
	checkCutMidTurn(t, e.e2eEnv, e.typ, "--max-tokens", "150", "max_tokens", 3, e.requestCount, msg)
}
