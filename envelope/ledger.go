package envelope

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Budget is what a thread may spend over all its activations: the
// envelope's agent.budget, and the ceiling the machine owner sets per agent
// type in config.yaml (agents.<type>.budget), which a thread can only
// lower. A zero field is no cap.
type Budget struct {
	// MaxCostUSD caps the cost the agent reports, in US dollars.
	MaxCostUSD float64 `yaml:"max_cost_usd,omitempty" json:"max_cost_usd,omitempty"`
	// MaxTurns caps the agent turns: the model's responses, one per
	// request the agent makes.
	MaxTurns int64 `yaml:"max_turns,omitempty" json:"max_turns,omitempty"`
	// MaxTokens caps the tokens: input (cached included) and output.
	MaxTokens int64 `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
}

// IsZero reports a budget without a cap.
func (b Budget) IsZero() bool { return b == Budget{} }

// Lower is b with every cap of ceiling that is lower (or that b lacks):
// the thread's budget under the machine's ceiling.
func (b Budget) Lower(ceiling Budget) Budget {
	if ceiling.MaxCostUSD > 0 && (b.MaxCostUSD == 0 || ceiling.MaxCostUSD < b.MaxCostUSD) {
		b.MaxCostUSD = ceiling.MaxCostUSD
	}
	lower := func(v, c int64) int64 {
		if c > 0 && (v == 0 || c < v) {
			return c
		}
		return v
	}
	b.MaxTurns = lower(b.MaxTurns, ceiling.MaxTurns)
	b.MaxTokens = lower(b.MaxTokens, ceiling.MaxTokens)
	return b
}

// Validate refuses a cap that is not positive, naming the key (prefixed
// with where, "agent.budget").
func (b Budget) Validate(where string) error {
	switch {
	case b.MaxCostUSD < 0 || math.IsNaN(b.MaxCostUSD) || math.IsInf(b.MaxCostUSD, 0):
		return fmt.Errorf("%s.max_cost_usd %v is not a positive number of dollars", where, b.MaxCostUSD)
	case b.MaxTurns < 0:
		return fmt.Errorf("%s.max_turns %d is not a positive number", where, b.MaxTurns)
	case b.MaxTokens < 0:
		return fmt.Errorf("%s.max_tokens %d is not a positive number", where, b.MaxTokens)
	}
	return nil
}

// budgetKeys are agent.budget's keys.
var budgetKeys = []string{"max_cost_usd", "max_tokens", "max_turns"}

// parseBudget reads agent.budget leniently: each key of the wrong type, a
// value that is not positive, or an unknown key is recorded in Bad under
// agent.budget(.key), for the checklist to fail the thread with.
func (e *Envelope) parseBudget(v any) {
	const path = "agent.budget"
	if v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		e.Bad[path] = "not a mapping but " + kind(v)
		return
	}
	for k := range m {
		if !slices.Contains(budgetKeys, k) {
			e.Bad[path] = fmt.Sprintf("has an unknown key %q (the keys are %s)", k, strings.Join(budgetKeys, ", "))
		}
	}
	num := func(key string, integer bool) (float64, int64) {
		raw, ok := m[key]
		if !ok || raw == nil {
			return 0, 0
		}
		n, isNum := raw.(json.Number)
		if !isNum {
			e.Bad[path+"."+key] = "not a number but " + kind(raw)
			return 0, 0
		}
		if integer {
			i, err := n.Int64()
			if err != nil || i <= 0 {
				e.Bad[path+"."+key] = fmt.Sprintf("%s, not a whole number above 0", n)
				return 0, 0
			}
			return 0, i
		}
		f, err := n.Float64()
		if err != nil || f <= 0 || math.IsInf(f, 0) {
			e.Bad[path+"."+key] = fmt.Sprintf("%s, not a number above 0", n)
			return 0, 0
		}
		return f, 0
	}
	e.Agent.Budget.MaxCostUSD, _ = num("max_cost_usd", false)
	_, e.Agent.Budget.MaxTurns = num("max_turns", true)
	_, e.Agent.Budget.MaxTokens = num("max_tokens", true)
}

// Ledger is thread.yaml's ledger block: what the thread's agent has spent,
// in total and in each of the last activations that ran a turn, and what
// holds it back (a provider's limit, a login that failed, a spent budget).
// It stays small: LedgerActivations entries at most.
type Ledger struct {
	Total Spend `yaml:"total"`
	// Activations are the last LedgerActivations runs that ran a turn,
	// oldest first.
	Activations []Activation `yaml:"activations,omitempty"`
	// SessionCostUSD is the running cost the agent reported for its
	// current session (Claude Code's survives a resume, so a resumed
	// turn's own cost is its report minus this); 0 for a new session.
	SessionCostUSD float64 `yaml:"session_cost_usd,omitempty"`
	// LimitedUntil is when the provider's rate or usage limit that
	// stopped the last turn resets: no run starts the agent before it.
	LimitedUntil string `yaml:"limited_until,omitempty"`
	// Limit is what the agent said of that limit.
	Limit string `yaml:"limit,omitempty"`
	// AuthFailed is what the agent said when its login or key was refused,
	// until a turn runs again (the thread is told once).
	AuthFailed string `yaml:"auth_failed,omitempty"`
	// BudgetSpent names the caps found spent, once the thread was told.
	BudgetSpent []string `yaml:"budget_spent,omitempty"`
}

// LedgerActivations is how many activations the ledger keeps one by one.
const LedgerActivations = 20

// Spend is what an agent used: cost, tokens, agent turns (model
// responses) and the wall time of its turns.
type Spend struct {
	CostUSD      float64 `yaml:"cost_usd" json:"cost_usd"`
	InputTokens  int64   `yaml:"input_tokens" json:"input_tokens"`
	OutputTokens int64   `yaml:"output_tokens" json:"output_tokens"`
	AgentTurns   int64   `yaml:"agent_turns" json:"agent_turns"`
	WallMS       int64   `yaml:"wall_ms" json:"wall_ms"`
	// Activations counts the runs that ran a turn (in Total only).
	Activations int64 `yaml:"activations,omitempty" json:"activations,omitempty"`
}

// Tokens is what max_tokens counts: input (cached included) and output.
func (s Spend) Tokens() int64 { return s.InputTokens + s.OutputTokens }

// Add is s plus o (Activations included).
func (s Spend) Add(o Spend) Spend {
	return Spend{CostUSD: s.CostUSD + o.CostUSD, InputTokens: s.InputTokens + o.InputTokens,
		OutputTokens: s.OutputTokens + o.OutputTokens, AgentTurns: s.AgentTurns + o.AgentTurns,
		WallMS: s.WallMS + o.WallMS, Activations: s.Activations + o.Activations}
}

// Activation is one run's spend: when it started, and what its turns used.
type Activation struct {
	At    string `yaml:"at"`
	Spend `yaml:",inline"`
}

// Spent names the caps of b that s has reached: max_cost_usd, max_turns,
// max_tokens.
func (b Budget) Spent(s Spend) []string {
	var out []string
	if b.MaxCostUSD > 0 && s.CostUSD >= b.MaxCostUSD {
		out = append(out, "max_cost_usd")
	}
	if b.MaxTurns > 0 && s.AgentTurns >= b.MaxTurns {
		out = append(out, "max_turns")
	}
	if b.MaxTokens > 0 && s.Tokens() >= b.MaxTokens {
		out = append(out, "max_tokens")
	}
	return out
}
