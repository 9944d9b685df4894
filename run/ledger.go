package run

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// budget is the thread's budget.
func (a *activation) budget() envelope.Budget {
	typ := a.rec.t.Workspace.AgentType
	if typ == "" {
		typ = a.env.Agent.Type
	}
	return a.r.Setup.ThreadBudget(a.env, typ)
}

// remaining is what the thread may still spend, split into the caps the
// adapter's CLI enforces itself (passed in the Launch) and the ones run
// meters from the turn's Progress: cost and tokens. Agent turns the CLI
// does not cap itself are checked between turns only: a report comes after
// the response, so a cut there would as often stop a turn that was done.
func (a *activation) remaining(ad *agent.Adapter) (enforced, metered agent.Budget) {
	b := a.budget()
	var total envelope.Spend
	if a.rec.t.Ledger != nil {
		total = a.rec.t.Ledger.Total
	}
	left := agent.Budget{}
	if b.MaxCostUSD > 0 {
		left.MaxCostUSD = max(b.MaxCostUSD-total.CostUSD, 0)
	}
	if b.MaxTurns > 0 {
		left.MaxTurns = max(b.MaxTurns-total.AgentTurns, 0)
	}
	if b.MaxTokens > 0 {
		left.MaxTokens = max(b.MaxTokens-total.Tokens(), 0)
	}
	if ad.Enforces.CostUSD {
		enforced.MaxCostUSD = left.MaxCostUSD
	} else {
		metered.MaxCostUSD = left.MaxCostUSD
	}
	if ad.Enforces.Turns {
		enforced.MaxTurns = left.MaxTurns
	}
	if ad.Enforces.Tokens {
		enforced.MaxTokens = left.MaxTokens
	} else {
		metered.MaxTokens = left.MaxTokens
	}
	return enforced, metered
}

// budgetShape is the checklist's check of agent.budget: numbers above 0
// under its three keys.
func budgetShape(env *envelope.Envelope) error {
	for _, f := range []string{"agent.budget", "agent.budget.max_cost_usd", "agent.budget.max_turns", "agent.budget.max_tokens"} {
		if why := env.Bad[f]; why != "" {
			return agent.Errorf(exit.CodeBudgetInvalid, "%s is %s; give max_cost_usd (dollars), max_turns and max_tokens (whole numbers) above 0, or remove it", f, why)
		}
	}
	return nil
}

// recordSpend adds what the turn used to the ledger: the total, and this
// run's entry among the last LedgerActivations.
func (a *activation) recordSpend(r agent.TurnResult) {
	sp := envelope.Spend{CostUSD: r.CostUSD, InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		AgentTurns: int64(r.NumTurns), WallMS: r.DurationMS}
	l := a.ledger()
	l.Total = l.Total.Add(sp)
	l.Total.Activations++
	l.Activations = append(l.Activations, envelope.Activation{At: a.rec.t.Turn.StartedAt, Spend: sp})
	if n := len(l.Activations) - envelope.LedgerActivations; n > 0 {
		l.Activations = append([]envelope.Activation(nil), l.Activations[n:]...)
	}
	l.SessionCostUSD = r.SessionCostUSD
}

// spentCaps are the caps of the thread's budget its ledger has reached.
func spentCaps(b envelope.Budget, t *envelope.Thread) []string {
	if b.IsZero() {
		return nil
	}
	var total envelope.Spend
	if t != nil && t.Ledger != nil {
		total = t.Ledger.Total
	}
	return b.Spent(total)
}

// budgetSpent parks a thread whose budget is spent: it is told once what
// was spent and how a person raises the budget; nothing runs until then.
func (a *activation) budgetSpent(b envelope.Budget) (string, error) {
	spent := spentCaps(b, a.rec.t)
	l := a.ledger()
	if slices.Equal(spent, l.BudgetSpent) {
		return OutcomeParked, nil
	}
	l.BudgetSpent = spent
	msg := budgetMessage(a.alias, b, l.Total, spent)
	a.emit(agent.StatusItem("budget_spent", msg, map[string]any{"spent": spent, "total": l.Total, "budget": b}))
	a.log.Warn("budget spent; the thread waits for a person", "caps", strings.Join(spent, ","))
	return OutcomeParked, a.rec.save()
}

// budgetMessage says what was spent against which caps, and the flag that
// raises each.
func budgetMessage(alias string, b envelope.Budget, total envelope.Spend, spent []string) string {
	var parts, flags []string
	for _, c := range spent {
		switch c {
		case "max_cost_usd":
			parts = append(parts, fmt.Sprintf("$%.4f of max_cost_usd $%.4f", total.CostUSD, b.MaxCostUSD))
			flags = append(flags, "--max-cost-usd N")
		case "max_turns":
			parts = append(parts, fmt.Sprintf("%d agent turns of max_turns %d", total.AgentTurns, b.MaxTurns))
			flags = append(flags, "--max-turns N")
		case "max_tokens":
			parts = append(parts, fmt.Sprintf("%d tokens of max_tokens %d", total.Tokens(), b.MaxTokens))
			flags = append(flags, "--max-tokens N")
		}
	}
	return fmt.Sprintf("budget spent: %s over %d activation(s); no turn runs until a person raises it: bhw-run thread edit %s %s (a machine's agents.<type>.budget in config.yaml caps what a thread may set)",
		strings.Join(parts, ", "), total.Activations, alias, strings.Join(flags, " "))
}
