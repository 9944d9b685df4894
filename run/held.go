package run

import (
	"fmt"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// What keeps a run from starting the agent though it has messages for it
// (Decision.Held).
const (
	// HeldLimit: the provider's rate or usage limit has not reset yet
	// (ledger.limited_until).
	HeldLimit = "rate_limited"
	// HeldBudget: the thread's budget is spent.
	HeldBudget = "budget_spent"
)

// limitWait is how long a run waits out a limit the agent named no reset
// time for: the CLIs retry a 429 themselves before they give up, so the
// provider wants a pause, not the next cron tick.
const limitWait = 5 * time.Minute

// ledger is thread.yaml's ledger, made on first use.
func (a *activation) ledger() *envelope.Ledger {
	if a.rec.t.Ledger == nil {
		a.rec.t.Ledger = &envelope.Ledger{}
	}
	return a.rec.t.Ledger
}

// limitedUntil is when the limit the ledger records resets (zero: none).
func limitedUntil(t *envelope.Thread) time.Time {
	if t == nil || t.Ledger == nil || t.Ledger.LimitedUntil == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339, t.Ledger.LimitedUntil)
	if err != nil {
		return time.Time{}
	}
	return at
}

// keepInbound puts the turn's messages back in front of the pending ones:
// the turn did not happen as far as the thread is concerned, and the next
// run delivers them again.
func (a *activation) keepInbound() {
	t := a.rec.t
	t.Turn.State = envelope.TurnStateIdle
	t.Items.PendingInbound = append(append([]envelope.InboundItem(nil), t.Turn.Inbound...), t.Items.PendingInbound...)
	t.Turn.Inbound, t.Turn.InboundIDs = nil, nil
}

// authFailed ends a turn the agent could not run because its login or key
// was refused: the machine needs a person, not the thread. The messages
// are kept, the thread stays active, and it is told once (until a turn
// runs again) what to fix; the run ends AGENT_AUTH_FAILED (78).
func (a *activation) authFailed(r agent.TurnResult) error {
	res := a.agentTurn.launch
	fix := res.loginFix()
	said := r.ErrorText
	if said == "" {
		said = "the provider refused the agent's credentials"
	}
	msg := fmt.Sprintf("%s could not reach its model: %s; %s, then run the thread again (its messages wait)", res.Type, said, fix)
	a.rec.mu.Lock()
	a.keepInbound()
	l := a.ledger()
	tell := l.AuthFailed == ""
	l.AuthFailed = said
	err := a.rec.saveLocked()
	a.rec.mu.Unlock()
	if err != nil {
		return err
	}
	if tell {
		a.emit(agent.StatusItem("agent_auth_failed", msg, map[string]any{"agent": res.Type, "fix": fix}))
	}
	return exit.Errorf(exit.CodeAgentAuthFailed, "%s", msg)
}

// rateLimited ends a turn a provider's rate or usage limit stopped: not a
// failed turn. The messages are kept, limited_until records the reset (the
// agent's, or limitWait from now), no run starts the agent before it, and
// the run ends RATE_LIMITED (75) naming it.
func (a *activation) rateLimited(r agent.TurnResult) error {
	until := r.ResetAt
	if until.IsZero() || until.Before(time.Now()) {
		until = time.Now().Add(limitWait)
	}
	at := until.UTC().Format(time.RFC3339)
	said := r.ErrorText
	if said == "" {
		said = "the provider's rate limit"
	}
	a.rec.mu.Lock()
	a.keepInbound()
	l := a.ledger()
	l.LimitedUntil, l.Limit = at, said
	err := a.rec.saveLocked()
	a.rec.mu.Unlock()
	if err != nil {
		return err
	}
	a.report.sum.LimitedUntil = at
	msg := fmt.Sprintf("the agent's provider refused the turn for a rate or usage limit (%s); the turn's messages wait, and the first run after %s delivers them again", said, at)
	a.emit(agent.StatusItem("rate_limited", "⏳ rate limited: "+msg, map[string]any{"limited_until": at, "agent": a.agentTurn.launch.Type}))
	return exit.Errorf(exit.CodeRateLimited, "%s", msg)
}

// stillLimited is a run before the limit resets: nothing is started and
// nothing written.
func (a *activation) stillLimited() error {
	at := a.rec.t.Ledger.LimitedUntil
	a.report.sum.LimitedUntil = at
	return exit.Errorf(exit.CodeRateLimited, "the agent's provider refused the last turn (%s) until %s; its messages wait, run the thread again after that", a.rec.t.Ledger.Limit, at)
}

// turnRan forgets what held the agent back: a turn ran.
func (a *activation) turnRan() {
	if l := a.rec.t.Ledger; l != nil {
		l.LimitedUntil, l.Limit, l.AuthFailed = "", "", ""
	}
}
