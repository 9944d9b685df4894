package envelope

import (
	"slices"
	"testing"
)

func TestParseBudget(t *testing.T) {
	env := func(budget string) *Envelope {
		t.Helper()
		e, err := Parse([]byte(`{"type":"session_agent_harness","thread":{"metadata":{"workspace":{"work_folder":"/w"},"agent":{"type":"codex","budget":` + budget + `}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := env(`{"max_cost_usd":2.5,"max_turns":40,"max_tokens":1000000}`)
	if want := (Budget{MaxCostUSD: 2.5, MaxTurns: 40, MaxTokens: 1000000}); e.Agent.Budget != want || len(e.Bad) != 0 {
		t.Fatalf("budget %+v bad %v, want %+v", e.Agent.Budget, e.Bad, want)
	}
	for _, c := range []struct{ budget, bad string }{
		{`"lots"`, "agent.budget"},
		{`{"max_turns":"two"}`, "agent.budget.max_turns"},
		{`{"max_turns":2.5}`, "agent.budget.max_turns"},
		{`{"max_tokens":0}`, "agent.budget.max_tokens"},
		{`{"max_cost_usd":-1}`, "agent.budget.max_cost_usd"},
		{`{"max_dollars":5}`, "agent.budget"},
	} {
		if e := env(c.budget); e.Bad[c.bad] == "" {
			t.Errorf("budget %s: Bad %v, want %s named", c.budget, e.Bad, c.bad)
		}
	}
}

func TestBudgetLowerAndSpent(t *testing.T) {
	thread := Budget{MaxCostUSD: 10, MaxTurns: 100}
	ceiling := Budget{MaxCostUSD: 5, MaxTurns: 200, MaxTokens: 1000}
	if got, want := thread.Lower(ceiling), (Budget{MaxCostUSD: 5, MaxTurns: 100, MaxTokens: 1000}); got != want {
		t.Errorf("Lower %+v, want %+v: a thread only lowers the machine's ceiling", got, want)
	}
	b := Budget{MaxCostUSD: 1, MaxTurns: 2, MaxTokens: 100}
	if got := b.Spent(Spend{CostUSD: 0.5, AgentTurns: 2, InputTokens: 60, OutputTokens: 40}); !slices.Equal(got, []string{"max_turns", "max_tokens"}) {
		t.Errorf("Spent %v", got)
	}
	if got := (Budget{}).Spent(Spend{CostUSD: 100}); got != nil {
		t.Errorf("no budget spent %v", got)
	}
}
