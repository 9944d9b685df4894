package run

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
)

// turnPlan is what a row adds to the turn's message.
type turnPlan struct {
	notes     []string  // lines before the person's messages
	redeliver bool      // deliver the interrupted turn's messages again
	resolved  *emission // pending_prompt_resolved, posted once the turn runs
}

var (
	errStalled = errors.New("agent stalled")
	errTimeout = errors.New("turn timed out")
)

// answerPrompt reads the person's answer to the open prompt and turns it
// into the resume note, a grant for an approved call, and the journaled
// pending_prompt_resolved (SPEC §8.4, §8.5).
func (a *activation) answerPrompt() (turnPlan, error) {
	t := a.t
	p := t.Prompt
	i := a.answerIndex()
	ans := t.Items.PendingInbound[i]
	text := strings.TrimSpace(inboundText(ans))
	meta := map[string]any{"type": agent.ItemPendingPromptResolved, "prompt_item_id": p.ItemID,
		"resolution": "answered", "answer": text}
	brief, note := "answered", ""
	if p.Kind == policy.KindAskUserQuestion {
		note = policy.FormatAnswers(p.Call.Questions, policy.ParseQuestionAnswers(p.Call.Questions, text))
	} else if ok, reason := policy.ParseApproval(text); ok {
		t.Grants = append(t.Grants, p.Call.Fingerprint)
		brief, meta["decision"] = "✓ approved", "approved"
		note = fmt.Sprintf("A person approved your call to %s. Run it again now, unchanged.", callPhrase(p.Call))
	} else {
		brief, meta["decision"] = "✗ denied", "denied"
		note = fmt.Sprintf("A person denied your call to %s: %s. Do not retry it.", callPhrase(p.Call), strings.TrimRight(reason, "."))
	}
	// The answer is consumed by the note; the items before and after it go
	// into the same turn.
	t.Items.PendingInbound = append(t.Items.PendingInbound[:i:i], t.Items.PendingInbound[i+1:]...)
	if ans.CreatedAt > t.Items.LastConsumed.CreatedAt {
		t.Items.LastConsumed = envelope.ItemRef{ItemID: ans.ID, CreatedAt: ans.CreatedAt}
	}
	t.Prompt = nil
	e, err := a.j.resolution(a.alias, p.ItemID, agent.Item{Brief: brief, Meta: meta})
	if err != nil {
		return turnPlan{}, err
	}
	return turnPlan{notes: []string{note}, resolved: e}, a.save()
}

// callPhrase names a call for the model: Write /abs/x.txt, Bash `rm -rf build`.
func callPhrase(c policy.Call) string {
	switch {
	case c.Target.Command != "":
		return fmt.Sprintf("%s `%s`", c.Tool, c.Target.Command)
	case len(c.Target.Paths) > 0:
		return c.Tool + " " + strings.Join(c.Target.Paths, ", ")
	case c.Target.URL != "":
		return c.Tool + " " + c.Target.URL
	}
	return c.Tool
}

// turnWith runs one turn (SPEC §6.4): persist the turn before the message
// goes out, spawn, relay, and end it in the documented order.
func (a *activation) turnWith(ctx context.Context, res *resolved, plan turnPlan) error {
	t := a.t
	var items []envelope.InboundItem
	if plan.redeliver || a.turnInterrupted() {
		items = append(items, t.Turn.Inbound...)
	}
	items = append(items, t.Items.PendingInbound...)
	message := composeMessage(plan.notes, items)
	ids := make([]string, 0, len(items))
	for _, in := range items {
		ids = append(ids, in.ID)
		if in.CreatedAt >= t.Items.LastConsumed.CreatedAt {
			t.Items.LastConsumed = envelope.ItemRef{ItemID: in.ID, CreatedAt: in.CreatedAt}
		}
	}
	t.Turn = envelope.TurnState{State: envelope.TurnStateRunning, StartedAt: now(), InboundIDs: ids, Inbound: items}
	t.Items.PendingInbound = nil
	t.Agent.Resolved.Permissions, t.Agent.Resolved.Model, t.Agent.Resolved.Effort = res.Permissions, res.Model, res.Effort
	// A thread.yaml of an earlier version named the home under the agent's
	// own key: from now on it is agent_home too (the old key stays for an
	// older bhw-run).
	t.Agent.Resolved.AgentHome = res.AgentHome
	if err := a.save(); err != nil {
		return err
	}

	gate := a.r.gate(res.Permissions, res.Policy, t.Workspace.WorkFolder)
	if res.Permissions == PermGuarded {
		a.emitPolicyApplied(gate, res.Policy)
	}

	result, err := a.runAgent(ctx, res, gate, message, plan)
	if err == nil && result.ResumeFailed {
		a.emit(agent.StatusItem("resume_failed", "the earlier agent session could not be resumed; starting a new one with the same messages", nil))
		a.mu.Lock()
		t.Agent.AgentSessionID = ""
		a.mu.Unlock()
		note := "(The earlier conversation could not be resumed; this is a new session.)\n\n"
		result, err = a.runAgent(ctx, res, gate, note+message, plan)
	}
	return a.endTurn(ctx, result, err)
}

// runAgent starts the agent and runs the turn, with the watchdogs.
func (a *activation) runAgent(ctx context.Context, res *resolved, gate policy.Gate, message string, plan turnPlan) (agent.TurnResult, error) {
	t := a.t
	resume := t.Agent.AgentSessionID != ""
	if !resume && res.adapter.HostSessionID {
		// The host picks the session id; it is recorded before the spawn so
		// a crash cannot lose it.
		t.Agent.AgentSessionID = newUUID()
		if err := a.save(); err != nil {
			return agent.TurnResult{}, err
		}
	}
	if a.r.OwnProcess {
		if err := proc.BecomeSubreaper(); err != nil {
			a.log.Warn("cannot become a child subreaper; orphaned tool processes may survive", "error", err)
		}
	}
	l := a.r.launch(res, t.Workspace.WorkFolder)
	l.SessionID, l.Resume, l.Log, l.Logger = t.Agent.AgentSessionID, resume, a.tlog, a.log
	sess, err := res.adapter.Start(ctx, l)
	if err != nil {
		return agent.TurnResult{}, err
	}
	a.mu.Lock()
	t.Agent.Process = &envelope.ProcessInfo{Pgid: sess.Pgid(), StartedAt: now()}
	if id := sess.SessionID(); id != "" {
		t.Agent.AgentSessionID = id
	}
	err = a.saveLocked()
	a.mu.Unlock()
	// A second signal skips the politeness for as long as the agent lives,
	// closing included.
	stopHurry := make(chan struct{})
	go func() {
		select {
		case <-a.hurry:
			proc.StopGroup(sess.Pgid(), 0)
		case <-stopHurry:
		}
	}()
	defer close(stopHurry)
	defer a.closeAgent(ctx, sess)
	if err != nil {
		return agent.TurnResult{}, err
	}

	h := &turnHandler{a: a, gate: gate, posture: res.Permissions, resolved: plan.resolved}
	h.touch()
	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if a.r.MaxDuration > 0 {
		var stopTimer context.CancelFunc
		turnCtx, stopTimer = context.WithTimeoutCause(turnCtx, a.r.MaxDuration, errTimeout)
		defer stopTimer()
	}
	stopWatch := h.watch(a.r.StallTimeout, cancel)
	defer stopWatch()

	result, err := sess.Turn(turnCtx, message, h)
	a.mu.Lock()
	if id := sess.SessionID(); id != "" {
		t.Agent.AgentSessionID = id
	}
	a.mu.Unlock()
	if h.prompt != nil {
		a.post(ctx, h.prompt)
	}
	h.acknowledge()
	if err != nil && turnCtx.Err() != nil {
		switch cause := context.Cause(turnCtx); {
		case ctx.Err() != nil:
			return result, ctx.Err()
		case errors.Is(cause, errStalled), errors.Is(cause, errTimeout):
			return result, cause
		}
	}
	return result, err
}

// closeAgent ends the agent process and every descendant, on a context
// that outlives a cancelled run.
func (a *activation) closeAgent(ctx context.Context, sess agent.Session) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*a.r.grace()+5*time.Second)
	defer cancel()
	if err := sess.Close(cctx); err != nil {
		a.log.Warn("closing the agent", "error", err)
	}
	grace := a.r.grace()
	select {
	case <-a.hurry:
		grace = 0
	default:
	}
	if proc.GroupAlive(sess.Pgid()) {
		proc.StopGroup(sess.Pgid(), grace)
	}
	if a.r.OwnProcess {
		if n := proc.SweepDescendants(grace); n > 0 {
			a.log.Warn("stopped processes the agent left behind", "count", n)
		}
	}
	a.mu.Lock()
	a.t.Agent.Process = nil
	_ = a.saveLocked()
	a.mu.Unlock()
}

// endTurn closes the turn in the documented order: journal turn_end and
// the turn state, then post, then confirm (SPEC §6.4).
func (a *activation) endTurn(ctx context.Context, r agent.TurnResult, err error) error {
	t := a.t
	a.sum.AgentSessionID = t.Agent.AgentSessionID
	a.sum.Usage, a.sum.CostUSD = r.Usage, r.CostUSD
	var te *agent.Error
	outcome, status := "", ""
	switch {
	case errors.Is(err, context.Canceled) && (signalOf(ctx) != nil || ctx.Err() != nil):
		// A signal: the next run resumes this turn.
		t.Turn.State = envelope.TurnStateInterrupted
		return a.save()
	case errors.As(err, &te) && te.Code == agent.CodeAgentCrashed:
		// turn.state stays running, so `thread retry` delivers it again.
		return a.fail(ctx, te)
	case errors.As(err, &te):
		if te.Code == agent.CodeAgentSpawnFailed {
			t.Turn.State = envelope.TurnStateIdle
			t.Items.PendingInbound = append(t.Turn.Inbound, t.Items.PendingInbound...)
		}
		return a.fail(ctx, te)
	case errors.Is(err, errTimeout):
		outcome, status = "timeout", "turn_timeout"
		a.sum.Error = &SummaryError{Code: CodeTurnTimeout, Message: fmt.Sprintf("the turn ran longer than --max-duration (%s) and was interrupted", a.r.MaxDuration)}
	case errors.Is(err, errStalled):
		outcome, status = "stalled", "agent_stalled"
		a.sum.Error = &SummaryError{Code: CodeAgentStalled, Message: fmt.Sprintf("the agent was silent for --stall-timeout (%s) with nothing open and was interrupted", a.r.StallTimeout)}
	case err != nil:
		return err
	}
	if status != "" {
		a.emit(agent.StatusItem(status, a.sum.Error.Message, nil))
		a.sum.Outcome = OutcomeTurnFailed
	} else {
		switch r.Outcome {
		case agent.TurnParked:
			outcome, a.sum.Outcome = "parked", OutcomeParked
		case agent.TurnCompleted:
			outcome, a.sum.Outcome = "completed", OutcomeTurnCompleted
			t.Grants = nil
		default:
			outcome, a.sum.Outcome = "failed", OutcomeTurnFailed
			msg := r.ErrorText
			if msg == "" {
				msg = "the agent ended the turn with an error"
			}
			a.emit(agent.StatusItem("turn_failed", msg, nil))
			a.sum.Error = &SummaryError{Code: CodeTurnFailed, Message: msg}
			if r.Outcome == agent.TurnFailed {
				t.Grants = nil
			}
		}
	}
	// A completed turn publishes the outbox; a parked or failed one does not.
	var files []outbox.File
	if outcome == "completed" {
		files = a.scanOutbox()
	}
	a.mu.Lock()
	intents, jerr := a.journalIntents(files)
	var e *emission
	if jerr == nil {
		e, jerr = a.j.add(a.alias, agent.TurnEndItem(outcome, r), "")
	}
	t.Turn.State = envelope.TurnStateIdle
	// The journal reaches the disk before the record that says the turn
	// ended, so a power loss cannot keep the state and lose the turn_end.
	_ = a.j.sync()
	serr := a.saveLocked()
	a.mu.Unlock()
	if jerr != nil {
		return jerr
	}
	if serr != nil {
		return serr
	}
	// An upload BlobHub did not take stays journaled for the next run.
	_ = a.publishArtifacts(ctx, intents)
	a.post(ctx, e)
	return nil
}

// emitPolicyApplied posts the rules in force before a guarded turn.
func (a *activation) emitPolicyApplied(g policy.Gate, p policy.Policy) {
	var rules []map[string]any
	for _, m := range g.RulesInForce() {
		rules = append(rules, map[string]any{"source": m.Source, "index": m.Index, "effect": m.Rule.Effect,
			"path": m.Rule.Path, "command": m.Rule.Command, "decision": m.Rule.Decision})
	}
	a.emit(agent.Item{Brief: fmt.Sprintf("policy: %d rules in force", len(rules)), Meta: map[string]any{
		"type": agent.ItemPolicyApplied, "policy": map[string]any{"default": p.Default, "rules": rules},
	}})
}

// turnHandler is the run side of a turn: it relays items and is the gate.
type turnHandler struct {
	a        *activation
	gate     policy.Gate
	posture  string
	resolved *emission // posted once the agent shows it took the message
	prompt   *emission // the pending_prompt of a parked turn

	last    atomic.Int64 // unix nanos of the last sign of life
	mu      sync.Mutex
	open    map[string]bool // tool calls without a result yet
	inGate  bool
	ackOnce sync.Once
}

func (h *turnHandler) touch() { h.last.Store(time.Now().UnixNano()) }

// acknowledge posts pending_prompt_resolved once the resumed turn runs.
func (h *turnHandler) acknowledge() {
	h.ackOnce.Do(func() {
		if h.resolved != nil {
			h.a.post(context.Background(), h.resolved)
		}
	})
}

// Emit relays one item.
func (h *turnHandler) Emit(it agent.Item) {
	h.touch()
	h.acknowledge()
	if tool, ok := it.Meta["tool"].(map[string]any); ok {
		id, _ := tool["invocation_id"].(string)
		h.mu.Lock()
		if h.open == nil {
			h.open = map[string]bool{}
		}
		switch it.Type() {
		case agent.ItemToolCall:
			h.open[id] = true
		case agent.ItemToolResult:
			delete(h.open, id)
		}
		h.mu.Unlock()
	}
	h.a.emit(it)
}

// Decide is the gate (SPEC §8): it never lets a request go unanswered and
// never allows by default.
func (h *turnHandler) Decide(c policy.Call) policy.Verdict {
	h.touch()
	h.mu.Lock()
	h.inGate = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inGate = false
		h.mu.Unlock()
		h.touch()
	}()
	h.acknowledge()
	a := h.a
	if c.Kind == policy.KindAskUserQuestion {
		return h.park(c)
	}
	if h.prompt != nil {
		return policy.Verdict{Action: policy.Deny, Message: "another call of this turn is already waiting for a person"}
	}
	if h.posture == PermAutonomous {
		a.logf("gate allow (autonomous) %s", callSummary(c))
		return policy.Verdict{Action: policy.Allow}
	}
	a.mu.Lock()
	h.gate.Grants = append([]string(nil), a.t.Grants...)
	a.mu.Unlock()
	d := h.gate.Decide(c)
	a.logf("gate %s %s: %s", d.Decision, callSummary(c), d.Reason)
	switch d.Decision {
	case policy.DecisionAllow:
		if d.Granted {
			a.mu.Lock()
			for i, g := range a.t.Grants {
				if g == c.Fingerprint {
					a.t.Grants = append(a.t.Grants[:i:i], a.t.Grants[i+1:]...)
					break
				}
			}
			_ = a.saveLocked()
			a.mu.Unlock()
		}
		return policy.Verdict{Action: policy.Allow}
	case policy.DecisionDeny:
		if d.By != nil {
			a.emit(agent.Item{
				Brief: fmt.Sprintf("⛔ %s %s denied by %s rule %d", c.Effect, targetText(c), d.By.Source, d.By.Index+1),
				Meta: map[string]any{"type": agent.ItemPolicyDenied, "call": agent.CallMeta(c),
					"rule": map[string]any{"source": d.By.Source, "index": d.By.Index, "effect": d.By.Rule.Effect,
						"path": d.By.Rule.Path, "command": d.By.Rule.Command, "decision": d.By.Rule.Decision}},
			})
		}
		return d.Verdict()
	}
	return h.park(c)
}

func targetText(c policy.Call) string {
	switch {
	case c.Target.Command != "":
		return c.Target.Command
	case len(c.Target.Paths) > 0:
		return strings.Join(c.Target.Paths, " ")
	}
	return c.Target.URL
}

// park records the prompt and journals its item before the agent is
// answered; the item is posted when the turn has ended (SPEC §8.4).
func (h *turnHandler) park(c policy.Call) policy.Verdict {
	if h.prompt != nil {
		return policy.Verdict{Action: policy.Deny, Message: "another call of this turn is already waiting for a person"}
	}
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	kind := c.Kind
	if kind == "" {
		kind = policy.KindApproval
	}
	id := a.j.nextID()
	p := &envelope.Prompt{Kind: kind, EmissionID: id, Call: c, InputJSON: string(c.Input)}
	a.t.Prompt = p
	if err := a.saveLocked(); err != nil {
		a.log.Error("cannot record the prompt; denying the call", "error", err)
		a.t.Prompt = nil
		return policy.Verdict{Action: policy.Deny, Message: "bhw-run could not record the question for a person"}
	}
	it := promptItem(p)
	e, err := a.j.addID(id, a.alias, it, "")
	if err != nil {
		a.log.Error("cannot journal the prompt", "error", err)
	}
	h.prompt = e
	a.logf("parked on %s (%s)", callSummary(c), kind)
	return policy.Verdict{Action: policy.Park}
}

// watch is the stall watchdog: the agent silent past timeout while no tool
// call and no gate decision is open → interrupt the turn (AGENT_STALLED).
func (h *turnHandler) watch(timeout time.Duration, cancel context.CancelCauseFunc) func() {
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
				if !busy && time.Since(time.Unix(0, h.last.Load())) > timeout {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// composeMessage joins the notes and the person items into one user
// message: text blocks by a blank line, JSON blocks fenced.
func composeMessage(notes []string, items []envelope.InboundItem) string {
	parts := append([]string(nil), notes...)
	for _, in := range items {
		if s := inboundText(in); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

func inboundText(in envelope.InboundItem) string {
	var parts []string
	for _, b := range in.Content {
		switch {
		case b.Type == "json" || b.JSON != "":
			parts = append(parts, "```json\n"+b.JSON+"\n```")
		case b.Text != "":
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
