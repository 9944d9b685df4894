package run

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// turnHandler is the run side of a turn: it relays items and is the gate.
type turnHandler struct {
	a        *activation
	gate     policy.Gate
	posture  string
	resolved *emission // posted once the agent shows it took the message
	// confined is the rule set the agent runs in, nil unconfined
	// (confinementRefused).
	confined *confine.Rules
	prompt   *emission // the pending_prompt of a parked turn

	last       atomic.Int64 // unix nanos of the last sign of life
	mu         sync.Mutex
	open       map[string]bool // tool calls without a result yet
	inGate     bool
	ackOnce    sync.Once
	promptOnce sync.Once

	// tally follows the turn's tool calls.
	tally *toolTally
	// meter is what run meters of the budget (the caps the agent does not
	// enforce itself); cut is called with errBudget once the turn's
	// Progress reaches one.
	meter agent.Budget
	cut   context.CancelCauseFunc
}

// Progress meters the budget: once the turn has used what remains of a
// cap the agent does not enforce itself, the turn is interrupted
// (errBudget).
func (h *turnHandler) Progress(p agent.Progress) {
	h.touch()
	cut, m := h.cut, h.meter
	over := (m.MaxCostUSD > 0 && p.CostUSD >= m.MaxCostUSD) || (m.MaxTurns > 0 && p.Turns >= m.MaxTurns) ||
		(m.MaxTokens > 0 && p.Usage.InputTokens+p.Usage.OutputTokens >= m.MaxTokens)
	if over && cut != nil {
		h.a.logf("budget reached mid-turn (%d agent turns, %d tokens, $%.4f); interrupting the turn", p.Turns, p.Usage.InputTokens+p.Usage.OutputTokens, p.CostUSD)
		cut(errBudget)
	}
}

func (h *turnHandler) touch() { h.last.Store(time.Now().UnixNano()) }

// acknowledge posts pending_prompt_resolved once the resumed turn runs.
func (h *turnHandler) acknowledge() {
	h.ackOnce.Do(func() {
		if h.resolved != nil {
			h.a.poster.post(context.Background(), h.resolved)
		}
	})
}

// postPrompt posts the parked turn's pending_prompt, once: with the parked
// call's result, so the prompt follows its call directly, or when the turn
// has ended, before its turn_end.
func (h *turnHandler) postPrompt(ctx context.Context) {
	h.promptOnce.Do(func() {
		if h.prompt != nil {
			h.a.poster.post(ctx, h.prompt)
		}
	})
}

// waiting is the parked call's result as the thread shows it: posted
// after the pending_prompt, naming it, and saying the call waits for a
// person (the adapter's agent.ParkedResultItem).
func (h *turnHandler) waiting(invocationID string, it agent.Item) agent.Item {
	a := h.a
	a.rec.mu.Lock()
	p := a.rec.t.Prompt
	a.rec.mu.Unlock()
	if h.prompt == nil || p == nil || p.Call.InvocationID != invocationID {
		return it
	}
	h.postPrompt(context.Background())
	a.rec.mu.Lock()
	ref := map[string]any{"emission_id": h.prompt.ID}
	if p.ItemID != "" {
		ref["item_id"] = p.ItemID
	}
	a.rec.mu.Unlock()
	it.Meta["pending_prompt"] = ref
	it.Brief = "⏸ not run yet: waiting for a person to answer the ❓ question above"
	return it
}

// Emit relays one item.
func (h *turnHandler) Emit(it agent.Item) {
	h.touch()
	h.acknowledge()
	if id, ok := agent.IsParkedResult(it); ok {
		it = h.waiting(id, it)
	}
	h.tally.emitted(it)
	if typ := it.Type(); typ == agent.ItemToolCall || typ == agent.ItemToolResult {
		h.mu.Lock()
		if h.open == nil {
			h.open = map[string]bool{}
		}
		if typ == agent.ItemToolCall {
			h.open[toolID(it)] = true
		} else {
			delete(h.open, toolID(it))
		}
		h.mu.Unlock()
	}
	h.a.emit(it)
	// After the emit, so a -v line of the call comes before the status
	// line names it.
	switch it.Type() {
	case agent.ItemToolCall:
		h.a.report.prog.callOpened(toolID(it), h.a.r.Setup.Secrets.String(it.Brief))
	case agent.ItemToolResult:
		h.a.report.prog.callClosed(toolID(it))
		h.a.confinementRefused(h.confined, it)
	}
}

// toolID is the invocation id of a tool_call or tool_result item.
func toolID(it agent.Item) string {
	tool, _ := it.Meta["tool"].(map[string]any)
	id, _ := tool["invocation_id"].(string)
	return id
}

// Decide is the gate (docs/gate.md): it never lets a request go unanswered and
// never allows by default.
func (h *turnHandler) Decide(c policy.Call) policy.Verdict {
	h.touch()
	h.mu.Lock()
	h.inGate = true
	h.mu.Unlock()
	h.a.report.prog.deciding(true)
	defer func() {
		h.mu.Lock()
		h.inGate = false
		h.mu.Unlock()
		h.a.report.prog.deciding(false)
		h.touch()
	}()
	h.acknowledge()
	v, d := h.decide(c)
	h.tally.decided(c, v, d)
	return v
}

// decide is Decide's verdict, with the gate's decision when it was asked.
func (h *turnHandler) decide(c policy.Call) (policy.Verdict, *policy.Decision) {
	a := h.a
	if c.Kind == policy.KindAskUserQuestion {
		return h.park(c), nil
	}
	if h.prompt != nil {
		return policy.Verdict{Action: policy.Deny, Message: "another call of this turn is already waiting for a person"}, nil
	}
	if h.posture == setup.PermAutonomous {
		a.logf("gate allow (autonomous) %s", c.Brief())
		return policy.Verdict{Action: policy.Allow}, nil
	}
	a.rec.mu.Lock()
	h.gate.Grants = append([]string(nil), a.rec.t.Grants...)
	a.rec.mu.Unlock()
	d := h.gate.Decide(c)
	a.logf("gate %s %s: %s", d.Decision, c.Brief(), d.Reason)
	switch d.Decision {
	case policy.DecisionAllow:
		if d.Granted {
			a.rec.mu.Lock()
			for i, g := range a.rec.t.Grants {
				if g == c.Fingerprint {
					a.rec.t.Grants = append(a.rec.t.Grants[:i:i], a.rec.t.Grants[i+1:]...)
					break
				}
			}
			// The same approval, as the worker recorded it, is spent with it.
			_, _ = a.takeGrant(c)
			_ = a.rec.saveLocked()
			a.rec.mu.Unlock()
		}
		return policy.Verdict{Action: policy.Allow}, &d
	case policy.DecisionDeny:
		a.emit(policyDeniedItem(c, d))
		return d.Verdict(), &d
	}
	// The worker's one-shot grant (a person's approval the daemon, or an
	// answer to it, recorded) lets through the call it names, once; only
	// a call the gate would ask a person about.
	a.rec.mu.Lock()
	g, ok := a.takeGrant(c)
	if ok {
		_ = a.rec.saveLocked()
	}
	a.rec.mu.Unlock()
	if ok {
		a.logf("gate allow (one-shot grant of %s) %s", g.GrantedBy, c.Brief())
		a.emit(grantedItem(g, c))
		return policy.Verdict{Action: policy.Allow}, &d
	}
	return h.park(c), &d
}

// park records the prompt and journals its item before the agent is
// answered; the item is posted with the parked call's result, or when the
// turn has ended (postPrompt).
func (h *turnHandler) park(c policy.Call) policy.Verdict {
	if h.prompt != nil {
		return policy.Verdict{Action: policy.Deny, Message: "another call of this turn is already waiting for a person"}
	}
	a := h.a
	a.rec.mu.Lock()
	defer a.rec.mu.Unlock()
	kind := c.Kind
	if kind == "" {
		kind = policy.KindApproval
	}
	id := a.rec.j.nextID()
	p := &envelope.Prompt{Kind: kind, PromptID: agent.NewPromptID(), EmissionID: id, Call: c, InputJSON: string(c.Input)}
	a.rec.t.Prompt = p
	if err := a.rec.saveLocked(); err != nil {
		a.log.Error("cannot record the prompt; denying the call", "error", err)
		a.rec.t.Prompt = nil
		return policy.Verdict{Action: policy.Deny, Message: "bhw-run could not record the question for a person"}
	}
	it := promptItem(p)
	e, err := a.rec.j.addID(id, a.alias, it, "")
	if err != nil {
		a.log.Error("cannot journal the prompt", "error", err)
	}
	h.prompt = e
	a.logf("parked on %s (%s)", c.Brief(), kind)
	return policy.Verdict{Action: policy.Park}
}

// watch is the stall watchdog: the agent silent past timeout while no tool
// call and no gate decision is open → interrupt the turn (AGENT_STALLED).
// Silent is no line of its stream (lastOutput) and nothing relayed: a
// model that streams its answer or its reasoning for longer than timeout,
// in tokens the adapter does not relay one by one, is not stalled.
func (h *turnHandler) watch(timeout time.Duration, lastOutput func() time.Time, cancel context.CancelCauseFunc) func() {
	if timeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	tick := timeout / 10
	if tick > time.Second {
		tick = time.Second
	}
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.mu.Lock()
				busy := len(h.open) > 0 || h.inGate
				h.mu.Unlock()
				last := time.Unix(0, h.last.Load())
				if out := lastOutput(); out.After(last) {
					last = out
				}
				if !busy && time.Since(last) > timeout {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}
