package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// turnPlan is what a row adds to the turn's message.
type turnPlan struct {
	notes     []string  // lines before the person's messages
	redeliver bool      // deliver the interrupted turn's messages again
	resolved  *emission // pending_prompt_resolved, posted once the turn runs
	// deniedByPerson: the person's answer refused the call that waited,
	// counted in the turn that delivers the answer.
	deniedByPerson int
}

var (
	errStalled = errors.New("agent stalled")
	// errThreadGone: the thread was deleted while its turn ran.
	errThreadGone = errors.New("thread deleted")
	errTimeout    = errors.New("turn timed out")
	// errBudget: the turn used what remained of the thread's budget.
	errBudget = errors.New("budget spent")
)

// answerPrompt reads the person's answer to the open prompt and turns it
// into the resume note, a grant for an approved call, and the journaled
// pending_prompt_resolved (docs/gate.md).
func (a *activation) answerPrompt() (turnPlan, error) {
	t := a.rec.t
	p := t.Prompt
	i := a.answerIndex()
	var ans envelope.InboundItem
	if i >= 0 {
		ans = t.Items.PendingInbound[i]
	} else {
		ans = *a.read.answer // past the bound of pending_inbound
	}
	text := strings.TrimSpace(inboundText(ans))
	brief, note, decision := "answered", "", ""
	var answers []map[string]any
	// Answers picked where the prompt was shown (metadata.answers) win
	// over the text when there is one per question, as in blobhub-worker;
	// they are posted back as they came.
	nq := 1
	if p.Kind != policy.KindApproval {
		nq = len(p.Call.Questions)
	}
	picked := policy.UsablePicks(ans.Picked, nq)
	if picked {
		answers = pickedAnswers(ans.Picked)
	}
	approved, _ := policy.ParseApproval(text)
	if picked {
		approved = policy.PicksApprove(ans.Picked)
	}
	switch {
	case p.Kind != policy.KindApproval: // a question, of whatever kind the daemon asked it
		parsed := policy.ParseQuestionAnswers(p.Call.Questions, text)
		if picked {
			parsed = policy.PickedToAnswers(p.Call.Questions, ans.Picked)
		} else {
			answers = questionAnswers(p.Call.Questions, parsed)
		}
		note = policy.FormatAnswers(p.Call.Questions, parsed)
	case approved:
		if p.Call.Fingerprint != "" {
			t.Grants = append(t.Grants, p.Call.Fingerprint)
		}
		recordGrant(t, p)
		brief, decision = "✓ approved", "approved"
		note = fmt.Sprintf("A person approved your call to %s. Run it again now, unchanged.", p.Call.Phrase())
		if !picked {
			answers = approvalAnswers(p, "Approve")
		}
	default:
		brief, decision = "✗ denied", "denied"
		note = fmt.Sprintf("A person denied your call to %s. Do not retry it.", p.Call.Phrase())
		if reason := denialReason(text); reason != "" {
			note = fmt.Sprintf("A person denied your call to %s: %s. Do not retry it.", p.Call.Phrase(), strings.TrimRight(reason, "."))
		}
		if !picked {
			answers = approvalAnswers(p, "Deny")
		}
	}
	it := resolutionItem(p, "answered", brief, answers, "")
	it.Meta["answer"] = text
	if decision != "" {
		it.Meta["decision"] = decision
	}
	// The answer is consumed by the note; the items before and after it go
	// into the same turn.
	if i >= 0 {
		t.Items.PendingInbound = append(t.Items.PendingInbound[:i:i], t.Items.PendingInbound[i+1:]...)
	}
	// Files attached to the answer reach the agent in the same turn, as a
	// message of their own.
	if files := answerFiles(ans); files != nil {
		t.Items.PendingInbound = append([]envelope.InboundItem{*files}, t.Items.PendingInbound...)
	}
	if ans.CreatedAt > t.Items.LastConsumed.CreatedAt {
		t.Items.LastConsumed = envelope.ItemRef{ItemID: ans.ID, CreatedAt: ans.CreatedAt}
	}
	t.Prompt = nil
	e, err := a.rec.j.resolution(a.alias, p.ItemID, it)
	if err != nil {
		return turnPlan{}, err
	}
	plan := turnPlan{notes: []string{note}, resolved: e}
	if decision == "denied" {
		plan.deniedByPerson = 1
	}
	return plan, a.rec.save()
}

// consumedUpTo moves items.last_consumed to the newest of items.
func consumedUpTo(t *envelope.Thread, items []envelope.InboundItem) {
	for _, in := range items {
		if in.CreatedAt >= t.Items.LastConsumed.CreatedAt {
			t.Items.LastConsumed = envelope.ItemRef{ItemID: in.ID, CreatedAt: in.CreatedAt}
		}
	}
}

// turnWith runs one turn: spawn, persist the turn before the message goes
// out, relay, and end it in the documented order (docs/run.md). It returns
// the run's outcome.
func (a *activation) turnWith(ctx context.Context, l *launch, plan turnPlan) (string, error) {
	t := a.rec.t
	var items []envelope.InboundItem
	if plan.redeliver || a.turnInterrupted() {
		items = append(items, t.Turn.Inbound...)
	}
	items = append(items, t.Items.PendingInbound...)
	// A person's files are fetched into the inbox before the message
	// names them (their outcomes are recorded in the items' blocks).
	a.materialize(ctx, items)
	message := composeMessage(plan.notes, items)
	ids := make([]string, 0, len(items))
	for _, in := range items {
		ids = append(ids, in.ID)
	}
	t.Turn = envelope.TurnState{State: envelope.TurnStateRunning, StartedAt: now(), InboundIDs: ids, Inbound: items}
	t.Items.PendingInbound = nil
	t.Agent.Resolved.Permissions, t.Agent.Resolved.Model, t.Agent.Resolved.Effort = l.Permissions, l.Model, l.Effort
	// The agent's home, the thread's own included (newLaunch): recorded,
	// it stays the thread's. A thread.yaml of an earlier version named the
	// home under the agent's own key: from now on it is agent_home too
	// (the old key stays for an older bhw-run).
	t.Agent.Resolved.AgentHome = l.AgentHome
	// A thread.yaml of an earlier version did not pin the resolved folder:
	// from now on it does.
	t.Workspace.ResolvedFolder = l.WorkFolder
	// Not saved here: startAgent saves the turn with the agent's process
	// group, after the spawn and before the message goes out (and, for a
	// session id the host picks, before the spawn too). A kill before that
	// finds the messages still pending and runs the turn again. One atomic
	// write less per turn.

	a.agentTurn.launch = l
	gate := a.r.gate(l.Permissions, l.Policy, l.WorkFolder, policyOutbox(a.env))
	if l.Permissions == setup.PermGuarded {
		a.emitPolicyApplied(gate, l.Policy)
	}

	tally := &toolTally{person: plan.deniedByPerson}
	sessionBefore := t.Agent.AgentSessionID
	result, err := a.runAgent(ctx, l, gate, message, plan, tally)
	if err == nil && result.ResumeFailed {
		a.emit(agent.StatusItem("resume_failed", "the earlier agent session could not be resumed; starting a new one with the same messages", nil))
		a.rec.mu.Lock()
		t.Agent.AgentSessionID = ""
		a.rec.mu.Unlock()
		note := "(The earlier conversation could not be resumed; this is a new session.)\n\n"
		result, err = a.runAgent(ctx, l, gate, note+message, plan, tally)
	}
	result, err = a.retryTransient(ctx, l, gate, tally, result, err)
	// agent.usage_total is where blobhub-worker measures the session's next
	// turn from: it follows the agent's counters as the worker's own turn
	// leaves them (replaced when the agent reports them or the session
	// changed), so the daemon's next turn does not count this one's tokens.
	a.rec.mu.Lock()
	if result.UsageTotal != nil || t.Agent.AgentSessionID != sessionBefore {
		t.Agent.UsageTotal = result.UsageTotal
	}
	a.rec.mu.Unlock()
	if err != nil || result.Outcome != agent.TurnCompleted && result.Outcome != agent.TurnParked {
		// Cut short: a call still open never gets its result.
		a.closeOpenCalls(tally)
	}
	return a.endTurn(ctx, result, tally, err)
}

// endTurn closes the turn in the documented order: journal turn_end and
// the turn state, then post, then confirm. It returns the run's outcome.
func (a *activation) endTurn(ctx context.Context, r agent.TurnResult, tally *toolTally, err error) (string, error) {
	t := a.rec.t
	a.report.sum.AgentSessionID = t.Agent.AgentSessionID
	a.report.sum.Usage, a.report.sum.CostUSD = r.Usage, r.CostUSD
	tools := tally.counts()
	a.report.sum.Tools = &tools
	outcome, turnEnd, err := a.judgeTurn(ctx, r, tally, err)
	if turnEnd == "" {
		return outcome, err
	}
	inbound := t.Turn.Inbound
	// A completed turn publishes the outbox; a parked or failed one does not.
	var files []outbox.File
	var pack *outboxPack
	if turnEnd == "completed" {
		files, pack = a.boundOutbox(a.scanOutbox())
	}
	// In blobhub-worker's form every turn with a turn_end publishes the
	// whole outbox before it (run/publish.go).
	var intent *emission
	var pubItems []agent.Item
	if a.publishing() {
		var perr error
		a.rec.mu.Lock()
		intent, perr = a.journalPublish()
		a.rec.mu.Unlock()
		if perr != nil {
			return "", perr
		}
		pubItems = a.publishOutbox(ctx, intent)
	}
	a.rec.mu.Lock()
	a.turnRan()
	a.recordSpend(r)
	b := a.budget()
	spent := spentCaps(b, t)
	a.ledger().BudgetSpent = spent
	intents, jerr := a.journalIntents(files, pack)
	var published []*emission
	if jerr == nil && intent != nil {
		published, jerr = a.journalPublished(pubItems)
	}
	var e *emission
	if jerr == nil {
		e, jerr = a.rec.j.add(a.alias, agent.TurnEndItem(turnEnd, r, tools), "")
	}
	if jerr == nil && intent != nil {
		jerr = a.closePublish(intent)
	}
	// The delivered messages are kept only while a turn may have to
	// deliver them again (running, interrupted): every later run would
	// read and write them for nothing (a flood of 20,000 made each idle run
	// of its thread cost hundreds of MiB). Their ids stay.
	t.Turn.State, t.Turn.Inbound = envelope.TurnStateIdle, nil
	// items.last_consumed passes the turn's messages only now that the
	// turn has ended, as blobhub-worker moves it: a turn cut short leaves
	// it before them, so a daemon that takes the thread over delivers them
	// again (bhw-run's own next run resumes the turn from turn.inbound).
	if jerr == nil {
		consumedUpTo(t, inbound)
	}
	switch {
	case jerr != nil:
		// The turn's end is not journaled: the next run resumes the turn
		// rather than lose what it said (its grants with it).
		t.Turn.State, t.Turn.Inbound = envelope.TurnStateInterrupted, inbound
	case turnEnd != "parked":
		// A one-shot grant serves the call a person approved in this turn;
		// one the turn never used must not approve a later turn's call
		// (nor pile up in thread.yaml, which every run reads).
		t.Grants, t.Agent.Grant = nil, nil
	}
	// The journal reaches the disk before the record that says the turn
	// ended, so a power loss cannot keep the state and lose the turn_end.
	_ = a.rec.j.sync()
	serr := a.rec.saveLocked()
	a.rec.mu.Unlock()
	if jerr != nil {
		return "", jerr
	}
	if serr != nil {
		return "", serr
	}
	// An upload BlobHub did not take stays journaled for the next run; a
	// journal that cannot be written stops the run.
	if err := a.publishArtifacts(ctx, intents); setup.IsStateInvalid(err) {
		a.stateFault(err)
	}
	for _, p := range published {
		a.poster.post(ctx, p)
	}
	a.poster.post(ctx, e)
	if len(spent) > 0 {
		// Told with the turn that spent it; the next run holds.
		a.emit(agent.StatusItem("budget_spent", budgetMessage(a.alias, b, t.Ledger.Total, spent),
			map[string]any{"spent": spent, "total": t.Ledger.Total, "budget": b}))
	}
	return outcome, nil
}

// judgeTurn is how the turn ended: the run's outcome, and the outcome its
// turn_end records ("" when it gets none: a signal stopped it, or the
// thread failed).
func (a *activation) judgeTurn(ctx context.Context, r agent.TurnResult, tally *toolTally, err error) (outcome, turnEnd string, _ error) {
	t := a.rec.t
	var te *agent.Error
	switch {
	case errors.Is(err, context.Canceled) && (exit.SignalOf(ctx) != nil || ctx.Err() != nil):
		// A signal: the next run resumes this turn.
		t.Turn.State = envelope.TurnStateInterrupted
		return "", "", a.rec.save()
	case errors.As(err, &te) && te.Code == agent.CodeAgentCrashed:
		// turn.state stays running, so `thread retry` delivers it again.
		return "", "", a.fail(ctx, te)
	case errors.As(err, &te):
		if te.Code == agent.CodeAgentSpawnFailed {
			t.Turn.State = envelope.TurnStateIdle
			t.Items.PendingInbound = append(t.Turn.Inbound, t.Items.PendingInbound...)
			t.Turn.Inbound = nil
		}
		return "", "", a.fail(ctx, te)
	case errors.Is(err, errTimeout):
		a.turnFailed(exit.CodeTurnTimeout, "turn_timeout", fmt.Sprintf("the turn ran longer than --max-duration (%s) and was interrupted", a.r.MaxDuration))
		return OutcomeTurnFailed, "timeout", nil
	case errors.Is(err, errBudget) && r.Outcome == agent.TurnCompleted:
		// The cap was reached with the turn's last response.
		return OutcomeTurnCompleted, "completed", nil
	case errors.Is(err, errBudget):
		// run stopped the turn at the budget's cap; endTurn tells the
		// thread what was spent.
		return OutcomeParked, "budget", nil
	case errors.Is(err, errStalled):
		a.turnFailed(exit.CodeAgentStalled, "agent_stalled", fmt.Sprintf("the agent was silent for --stall-timeout (%s) with nothing open and was interrupted", a.r.StallTimeout))
		return OutcomeTurnFailed, "stalled", nil
	case errors.Is(err, errThreadGone):
		// Stopped because the thread was deleted: the run ends
		// THREAD_NOT_FOUND, and its turn_end waits in the journal.
		return OutcomeTurnFailed, "failed", nil
	case err != nil:
		return "", "", err
	}
	switch r.Outcome {
	case agent.TurnParked:
		return OutcomeParked, "parked", nil
	case agent.TurnCompleted:
		// A turn whose every tool call was refused did nothing the person
		// asked for, however politely the agent ends it.
		if msg, none := tally.noProgress(); none {
			a.turnFailed(exit.CodeNoProgress, "no_progress", msg)
			return OutcomeTurnFailed, "no_progress", nil
		}
		return OutcomeTurnCompleted, "completed", nil
	}
	switch r.Failure {
	case agent.FailureBudget:
		// The agent stopped itself at what remained of the budget.
		return OutcomeParked, "budget", nil
	case agent.FailureAuth:
		return "", "", a.authFailed(r)
	case agent.FailureRateLimit:
		return "", "", a.rateLimited(r)
	}
	msg := r.ErrorText
	if msg == "" {
		msg = "the agent ended the turn with an error"
	}
	a.turnFailed(exit.CodeTurnFailed, "turn_failed", msg)
	return OutcomeTurnFailed, "failed", nil
}

// turnFailed records a turn that did not complete: the summary's error and
// a status item saying why.
func (a *activation) turnFailed(code, token, msg string) {
	a.report.sum.Error = &SummaryError{Code: code, Message: msg}
	a.emit(agent.StatusItem(token, msg, nil))
}

// emitPolicyApplied posts the rules in force before a guarded turn.
func (a *activation) emitPolicyApplied(g policy.Gate, _ policy.Policy) {
	if why := outboxRulesUnusable(g); why != "" {
		a.log.Warn("the policy has outside: outbox rules but the outbox is unusable; every read or write counts as outside it", "why", why)
	}
	a.emit(policyAppliedItem(g))
}

// composeMessage joins the notes and the person items into one user
// message: text blocks by a blank line, JSON blocks fenced.
func composeMessage(notes []string, items []envelope.InboundItem) string {
	parts := append([]string(nil), notes...)
	for _, in := range items {
		s := inboundText(in)
		if att := attachmentsText(in); att != "" {
			s = strings.TrimSpace(s + "\n\n" + att)
		}
		if s != "" {
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
