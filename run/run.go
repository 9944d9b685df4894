// Package run is one activation of one thread: the order of work, the
// decision table, the checklist, the turn, the gate's machinery (parking,
// grants) and the exactly-once journal, as docs/run.md tells them. This file
// tells the run's story top to bottom; the others hold its parts. It knows
// the agents only as the descriptors main lists.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// Runner runs activations. main builds one per invocation; the agents it
// can start are Setup.Adapters.
type Runner struct {
	Setup  *setup.Setup
	Client blobhub.Client
	Logger *slog.Logger

	LockWait     time.Duration
	SlotWait     time.Duration // wait this long for an agent slot, in arrival order (0: fail fast)
	MaxDuration  time.Duration // one turn's wall-clock cap
	StallTimeout time.Duration // agent silent this long → stalled
	Grace        time.Duration // SIGTERM → SIGKILL grace
	// OwnProcess is set when bhw-run is the whole process (the CLI): it may
	// then become a child subreaper and sweep every descendant. Tests that
	// run activations in-process leave it off.
	OwnProcess bool
	Environ    []string         // the environment the agent's is built from (default os.Environ)
	Signals    <-chan os.Signal // SIGINT/SIGTERM, from main, caught before anything ran
	// Observer, when set, is told how the run goes as it goes (main's
	// terminal status line); nil: nobody watches.
	Observer Observer
}

// Outcomes of a run.
const (
	OutcomeTurnCompleted = "turn_completed"
	OutcomeIdle          = "idle"
	OutcomeParked        = "parked"
	OutcomeStopped       = "stopped"
	OutcomeFailed        = "failed"
	OutcomeTurnFailed    = "turn_failed"
	OutcomeNotHere       = "not_here"
	OutcomeInterrupted   = "interrupted"
)

// Summary is the run's result: the --json object and section.log's record.
type Summary struct {
	Alias          string        `json:"alias"`
	Outcome        string        `json:"outcome"`
	ExitCode       int           `json:"exit_code"`
	Error          *SummaryError `json:"error"`
	AgentSessionID string        `json:"agent_session_id"`
	ItemsPosted    int           `json:"items_posted"`
	Usage          agent.Usage   `json:"usage"`
	CostUSD        float64       `json:"cost_usd"`
	DurationMS     int64         `json:"duration_ms"`
	// Tools are the turn's tool calls, when a turn ran.
	Tools *agent.ToolCounts `json:"tools,omitempty"`
	// LimitedUntil is when the provider's limit that stopped (or held)
	// the turn resets (RATE_LIMITED).
	LimitedUntil string `json:"limited_until,omitempty"`
	// ThreadState is the thread's state when the run found it finished
	// (completed, failed) and so did nothing; the command line says how to
	// retry a failed one.
	ThreadState string `json:"thread_state,omitempty"`
}

// SummaryError is the coded error of a run.
type SummaryError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Run is one activation of the thread alias (docs/run.md). It always returns
// a summary with the exit code; err explains a non-zero one.
func (r *Runner) Run(ctx context.Context, alias string) (sum *Summary, err error) {
	start := time.Now()
	sum = &Summary{Alias: alias}
	a := &activation{r: r, alias: alias, log: r.Logger.With("alias", alias), report: report{sum: sum, prog: &progress{obs: r.Observer}}}
	ctx, stopSignals := a.watchSignals(ctx)
	defer stopSignals()
	defer func() { err = a.summarize(ctx, start, err) }()

	r.Setup.LogIgnored(a.log)
	// 1. The alias, before anything touches disk or network.
	if err := setup.ValidateAlias(alias); err != nil {
		return sum, exit.Errorf(exit.CodeBadAlias, "invalid alias %q: %v", alias, err)
	}
	// 2. The Setup was resolved by cli (credentials, config, section).
	if err := ctx.Err(); err != nil {
		return sum, err // a signal already: nothing is written
	}
	// A live daemon on this tree runs the same threads: nothing is touched.
	if err := r.Setup.CheckNoDaemon(); err != nil {
		return sum, err
	}
	if err := a.makeThreadDir(ctx); err != nil {
		return sum, err
	}

	// 3. The thread lock: fail fast, or wait up to --lock-wait.
	lk, err := a.lockThread(ctx)
	if err != nil {
		return sum, err
	}
	defer lk.Unlock()
	a.locks.thread = true

	if err := a.load(); err != nil {
		return sum, err
	}
	defer a.close()
	defer a.poster.flushNotMine(ctx)

	// 4. An agent left behind by a killed bhw-run is stopped first.
	if err := a.stopLeftover(); err != nil {
		return sum, err
	}

	// 5. The envelope.
	if err := a.download(ctx); err != nil {
		return sum, err
	}
	// A park the daemon left is completed from the thread's items.
	if err := a.adoptPark(ctx); err != nil {
		return sum, err
	}
	// 6. The items after items.scanned.
	if err := a.readItems(ctx); err != nil {
		return sum, err
	}

	// 7. Decide; act at most once. 8. Wrap up; the deferred calls release
	// the lock and write the summary.
	return sum, a.decideAndAct(ctx)
}

// watchSignals watches the signals from the run's first instruction: the
// first cancels the run, the signal its cause — before the thread lock
// the run ends at once and writes nothing, after it the agent is
// interrupted politely and state is saved; a second skips the politeness.
// The context it returns also ends with the run's first state fault
// (a.faults.abort); stop releases it all.
func (a *activation) watchSignals(ctx context.Context) (_ context.Context, stop func()) {
	ctx, hurry, stopSignals := exit.WatchSignals(ctx, a.r.Signals)
	a.agentTurn.hurry = hurry
	ctx, a.faults.abort = context.WithCancelCause(ctx)
	stopNote := context.AfterFunc(ctx, func() {
		if s := exit.SignalOf(ctx); s != nil && a.locks.thread {
			a.log.Warn("signal received; stopping the agent and saving state", "signal", s.String())
		}
	})
	return ctx, func() {
		stopNote()
		a.faults.abort(nil)
		stopSignals()
	}
}

// summarize ends the run's summary whatever ended the run: its duration,
// the session, the exit code from err (or from the state fault that
// stopped the run, or the signal), and section.log's record. It returns
// the run's error.
func (a *activation) summarize(ctx context.Context, start time.Time, err error) error {
	sum := a.report.sum
	sum.DurationMS = time.Since(start).Milliseconds()
	if a.rec != nil && a.rec.t != nil && sum.AgentSessionID == "" {
		sum.AgentSessionID = a.rec.t.Agent.AgentSessionID
	}
	sig := exit.SignalOf(ctx)
	if fault := a.faults.err(); fault != nil && sig == nil {
		err = fault // what stopped the run, whatever it was doing then
	}
	finish(sum, err, sig)
	if sig != nil {
		// What was cut short (a wait on BlobHub, the agent) is the
		// signal's doing, not an error of its own.
		ee := &exit.Error{Exit: sum.ExitCode, Code: exit.CodeInterrupted, Message: interruptedMessage(sig, a.locks.thread)}
		if sum.Error == nil {
			sum.Error = &SummaryError{Code: ee.Code, Message: ee.Message}
		}
		err = ee
	}
	if sig == nil || a.locks.thread {
		a.writeSectionLog(sum)
	}
	return err
}

// makeThreadDir makes the thread's folder in the state tree. A thread this
// state tree has never run gets its folder only once BlobHub says it is a
// job thread, so a misspelled alias leaves nothing behind. This read only
// decides whether to make the folder; the one under the lock (step 5)
// decides the run. Two first runs of one thread both read, then queue on
// the lock as every run does: the lock file is never deleted, so both lock
// the same one. The tree is checked first (owner, modes, links): the
// download of a thread that is not a job writes not_mine.yaml.
func (a *activation) makeThreadDir(ctx context.Context) error {
	s := a.r.Setup
	a.dir = setup.ThreadDir(s.JobDir, a.alias)
	if err := s.EnsureDir(s.JobDir); err != nil {
		return err
	}
	if _, err := os.Lstat(a.dir); errors.Is(err, fs.ErrNotExist) {
		if err := a.download(ctx); err != nil {
			return err
		}
	}
	return s.EnsureDir(a.dir)
}

// lockThread takes the thread lock: at once, or waiting up to --lock-wait
// when it is held.
func (a *activation) lockThread(ctx context.Context) (*lock.Lock, error) {
	r, alias := a.r, a.alias
	lockPath := filepath.Join(a.dir, "thread.lock")
	lk, err := lock.Acquire(ctx, lockPath, 0)
	if held := (*lock.HeldError)(nil); errors.As(err, &held) && r.LockWait > 0 {
		a.log.Info("the thread lock is held; waiting for it", "holder_pid", held.Holder.PID, "lock_wait", r.LockWait.String())
		lk, err = lock.Acquire(ctx, lockPath, r.LockWait)
	}
	if err == nil {
		return lk, nil
	}
	var held *lock.HeldError
	switch {
	case exit.SignalOf(ctx) != nil:
		return nil, err // interrupted while waiting: nothing is written
	case errors.As(err, &held) && r.LockWait > 0:
		return nil, exit.Errorf(exit.CodeLocked, "thread %q is %v; waited %v for it (--lock-wait); retry later, or pass a longer --lock-wait", alias, held, r.LockWait)
	case errors.As(err, &held):
		return nil, exit.Errorf(exit.CodeLocked, "thread %q is %v; retry later or pass --lock-wait", alias, held)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, exit.Errorf(exit.CodeLocked, "gave up waiting for the lock of thread %q: %v; retry later", alias, err)
	}
	// Not contention: the lock file cannot be opened or locked, which
	// waiting will not mend.
	return nil, exit.Errorf(exit.CodeStateTreeInvalid, "cannot lock thread %q: %v; check the state tree", alias, err)
}

// decideAndAct is steps 7 and 8: decide on what the run has read, act at
// most once (after the agent slot, when the row starts the agent, and
// after unfinished work), and wrap up a run that acted.
func (a *activation) decideAndAct(ctx context.Context) error {
	d := Decide(a.facts())
	a.log.Debug("decided", "row", d.Row.String(), "unfinished", d.Unfinished, "acts", d.Acts)
	if a.read.tooLarge != nil && d.Acts && a.rec.t.Agent.State != envelope.StateFailed {
		// Acting needs the envelope bhw-run refuses to read.
		if err := a.attach(ctx); err != nil {
			return err
		}
		err := a.failTooLarge(ctx)
		if a.report.failed {
			a.report.sum.Outcome = OutcomeFailed
		}
		return a.wrapUp(ctx, err)
	}
	if d.Spawns {
		// The agent slot comes before the run's first write: a wait that ends
		// without one (--slot-wait elapsed, a signal) leaves everything as it
		// was. The thread lock is held meanwhile, so no second run of this
		// thread queues behind this one.
		if err := a.reserveSlot(ctx); err != nil {
			return err
		}
		var err error
		if d, err = a.lookAgain(ctx, d); err != nil {
			return err
		}
	}
	if !d.Acts {
		if err := a.act(ctx, d); err != nil {
			return err
		}
		return a.rec.save()
	}
	if err := a.attach(ctx); err != nil {
		return err
	}
	if d.Unfinished {
		if err := a.finishUnfinished(ctx); err != nil {
			return err
		}
		d = Decide(a.facts())
	}
	// A tool call a killed run left open gets its result before anything
	// follows it on the thread.
	a.closeOpenCalls(nil)
	return a.wrapUp(ctx, a.act(ctx, d))
}

// stopLeftover stops the agent a killed bhw-run left behind, when its
// group still runs the agent's executable, and forgets it.
func (a *activation) stopLeftover() error {
	p := a.rec.t.Agent.Process
	if p == nil {
		return nil
	}
	if proc.GroupAlive(p.Pgid) && proc.IsAgentGroup(p.Pgid, a.rec.t.Agent.Resolved.Executable) {
		a.log.Warn("stopping an agent left behind by an earlier run", "pgid", p.Pgid)
		proc.StopGroup(p.Pgid, a.r.grace())
	}
	a.rec.t.Agent.Process = nil
	return a.rec.save()
}

// wrapUp ends a run that acted: a last tail covers our own items, the
// state is saved, and items left unposted make the exit say so.
func (a *activation) wrapUp(ctx context.Context, err error) error {
	if terr := a.readItems(context.WithoutCancel(ctx)); terr != nil && err == nil {
		a.log.Warn("could not read the thread after the run", "error", terr)
	}
	if serr := a.rec.saveAndCompact(); serr != nil && err == nil {
		err = serr
	}
	if err == nil {
		err = a.poster.err()
	}
	return err
}

// act does what the row says, after unfinished work is done. The run's
// outcome is what the row returns, or failed when the thread failed in
// this run whatever the row.
func (a *activation) act(ctx context.Context, d Decision) error {
	outcome, err := a.row(ctx, d)
	if a.report.failed {
		outcome = OutcomeFailed
	}
	if outcome != "" {
		a.report.sum.Outcome = outcome
	}
	return err
}

// row runs the row of the decision table d names (docs/run.md) and returns
// the run's outcome.
func (a *activation) row(ctx context.Context, d Decision) (string, error) {
	switch d.Held {
	case HeldLimit:
		return "", a.stillLimited()
	case HeldBudget:
		return a.budgetSpent(a.budget())
	}
	switch d.Row {
	case RowNoInstance, RowFinal, RowLocalDone:
		switch {
		case d.Row == RowFinal:
			a.report.sum.ThreadState = a.env.State
		case d.Row == RowLocalDone && a.rec.t != nil:
			a.report.sum.ThreadState = a.rec.t.Agent.State
		}
		return d.Outcome, nil
	case RowNotHere:
		return d.Outcome, notHere(a.alias)
	case RowStop:
		return a.stop(ctx)
	case RowActivate:
		return a.activate(ctx)
	case RowParked:
		if !d.Spawns {
			return OutcomeParked, nil
		}
		return a.resumeParked(ctx)
	case RowRecover:
		return a.recover(ctx)
	case RowFresh, RowTurn:
		if !d.Spawns {
			return OutcomeIdle, nil
		}
		return a.turn(ctx, turnPlan{})
	}
	return "", nil
}

// stop follows the wire's completed/failed: an open prompt is resolved
// cancelled and the local state follows.
func (a *activation) stop(ctx context.Context) (string, error) {
	if err := a.cancelPrompt(ctx, "the thread was stopped"); err != nil {
		return "", err
	}
	a.rec.t.Agent.State = a.env.State
	if a.env.State == envelope.StateFailed {
		a.rec.t.Agent.FailedOnWire = true
	}
	a.rec.t.Turn.State, a.rec.t.Turn.Inbound = envelope.TurnStateIdle, nil
	return OutcomeStopped, a.rec.save()
}

// activate is the pending row: checklist, then local active, upload active,
// the outbox, and the first turn when there is something to say.
func (a *activation) activate(ctx context.Context) (string, error) {
	l, err := a.r.checklist(ctx, a.env, nil, a.dir)
	if err != nil {
		return "", a.failOrExit(ctx, err)
	}
	if err := a.cancelPrompt(ctx, "the thread was activated again"); err != nil {
		return "", err
	}
	inbound := len(a.rec.t.Items.PendingInbound) > 0 || a.turnInterrupted()
	if inbound {
		if err := a.r.modelReachable(ctx, l); err != nil {
			return "", err
		}
		if err := a.reserveSlot(ctx); err != nil {
			return "", err
		}
	}
	t := a.rec.t
	if t.Workspace.AgentType != l.Type || t.Workspace.WorkFolder != a.env.WorkFolder ||
		t.Workspace.ResolvedFolder != "" && t.Workspace.ResolvedFolder != l.WorkFolder {
		// A new agent type or work folder is a new session.
		t.Agent.AgentSessionID = ""
	}
	t.Workspace = envelope.Workspace{AgentType: l.Type, WorkFolder: a.env.WorkFolder, ResolvedFolder: l.WorkFolder, Extra: t.Workspace.Extra}
	t.Agent.State = envelope.StateActive
	t.Agent.Error.Clear()
	t.Agent.FailedOnWire = false
	t.Agent.Resolved = l.Resolved
	if l.ownHome {
		t.Agent.Resolved.AgentHome = "" // recorded with the first turn (turnWith)
	}
	sec := a.r.Setup.Section
	t.Session = envelope.SessionRef{OrgID: sec.Session.OrgID, BlobID: sec.Session.BlobID, RevisionID: sec.Session.RevisionID,
		SessionID: sec.Session.SessionID, SessionPrefix: sec.Prefix(), Extra: t.Session.Extra}
	if err := a.rec.save(); err != nil {
		return "", err
	}
	if err := a.setWireState(ctx, envelope.StatePending, envelope.StateActive); err != nil {
		return "", err
	}
	if err := a.createOutbox(ctx); err != nil || a.report.failed {
		return "", err
	}
	if !inbound {
		return OutcomeIdle, nil
	}
	return a.turnWith(ctx, l, turnPlan{})
}

// resumeParked hands a person's answer to the parked agent.
func (a *activation) resumeParked(ctx context.Context) (string, error) {
	l, err := a.r.checklist(ctx, a.env, a.rec.t, a.dir)
	if err != nil {
		return "", a.failOrExit(ctx, err)
	}
	if err := a.r.modelReachable(ctx, l); err != nil {
		return "", err // the answer stays unread for the next run
	}
	if err := a.reserveSlot(ctx); err != nil {
		return "", err
	}
	plan, err := a.answerPrompt()
	if err != nil {
		return "", err
	}
	return a.turnWith(ctx, l, plan)
}

// recover resumes after a turn that was running or interrupted when the
// last run ended, delivering that turn's messages again.
func (a *activation) recover(ctx context.Context) (string, error) {
	if err := a.reserveSlot(ctx); err != nil {
		return "", err
	}
	a.emit(agent.StatusItem("interrupted_turn_resumed", "the previous turn was interrupted; resuming it", nil))
	return a.turn(ctx, turnPlan{notes: []string{"Your previous turn was interrupted before it finished. Check the state of the work folder and continue."}, redeliver: true})
}

// turn checks the thread again (permissions, model, policy are resolved
// afresh on every run) and runs one turn.
func (a *activation) turn(ctx context.Context, plan turnPlan) (string, error) {
	l, err := a.r.checklist(ctx, a.env, a.rec.t, a.dir)
	if err != nil {
		return "", a.failOrExit(ctx, err)
	}
	if err := a.r.modelReachable(ctx, l); err != nil {
		return "", err
	}
	if err := a.reserveSlot(ctx); err != nil {
		return "", err
	}
	return a.turnWith(ctx, l, plan)
}

// failOrExit turns a checklist error into a thread failure, or passes an
// exit (AGENT_NOT_INSTALLED leaves the thread as it is).
func (a *activation) failOrExit(ctx context.Context, err error) error {
	var te *agent.Error
	if errors.As(err, &te) {
		return a.fail(ctx, te)
	}
	return err
}

// fail writes local failed + error and journals thread_failed in one step,
// then uploads failed and posts the item. A prompt still open (a parked
// thread that fails before its answer is delivered) is resolved failed, so
// it does not stay open for ever.
func (a *activation) fail(ctx context.Context, te *agent.Error) error {
	// The message may quote an envelope field; thread.yaml and the summary
	// keep it too, so it is redacted here, not only in the item.
	te = &agent.Error{Code: te.Code, Message: a.r.Setup.Secrets.String(te.Message)}
	a.log.Error("thread failed", "code", te.Code, "error", te.Message)
	resolved, err := a.resolvePrompt("failed", "✗ failed: "+te.Code, te.Code)
	if err != nil {
		return err
	}
	a.rec.t.Agent.State = envelope.StateFailed
	a.rec.t.Agent.Error.Set(te.Code, te.Message)
	a.rec.t.Agent.FailedOnWire = false
	// blobhub-worker's shape, thread {alias, error}; instance_id is
	// bhw-run's own. An earlier bhw-run put alias and error at the top.
	it := agent.Item{Brief: fmt.Sprintf("✗ %s failed: %s — %s", a.alias, te.Code, te.Message), Meta: map[string]any{
		"type": agent.ItemThreadFailed,
		"thread": map[string]any{"alias": a.alias,
			"error": map[string]any{"code": te.Code, "message": te.Message}},
		"instance_id": a.self.instanceID,
	}}
	// The reason, on the thread itself, as blobhub-worker posts it: a
	// status error {code, detail}, journaled with the rest so it is
	// posted once, and before failed goes on the wire (a reader acting
	// on failed finds why; a next run posts what is journaled first).
	// A run killed after journaling them had them posted by this run's
	// reconcile: the same failure found again adds them no second time.
	var reason, e *emission
	if !a.poster.failurePosted["reason:"+te.Code] {
		if reason, err = a.rec.j.add(a.alias, failureItem(te), ""); err != nil {
			return err
		}
	}
	if !a.poster.failurePosted["failed:"+te.Code] {
		if e, err = a.rec.j.add(setup.WorkerAlias, it, ""); err != nil {
			return err
		}
	}
	if err := a.rec.save(); err != nil {
		return err
	}
	a.report.sum.Error = &SummaryError{Code: te.Code, Message: te.Message}
	a.report.failed = true
	a.poster.post(ctx, resolved)
	a.poster.post(ctx, reason)
	if a.read.tooLarge == nil {
		if err := a.uploadFailed(ctx); err != nil {
			return err
		}
	}
	a.poster.post(ctx, e)
	return nil
}

// failureItem is the reason a thread failed as blobhub-worker posts it on
// the thread: text "CODE: message", metadata status error {code, detail}.
func failureItem(te *agent.Error) agent.Item {
	it := agent.StatusItem("error", te.Message, map[string]any{"code": te.Code})
	it.Brief = te.Code
	if te.Message != "" {
		it.Brief = te.Code + ": " + te.Message
	}
	return it
}

// uploadFailed puts failed on the wire once, and remembers that it landed.
// Only over the state the run decided on: a person who changed it meanwhile
// (stopped the thread, say) is not overwritten.
func (a *activation) uploadFailed(ctx context.Context) error {
	if err := a.setWireState(ctx, a.env.State, envelope.StateFailed); err != nil {
		return err
	}
	a.rec.t.Agent.FailedOnWire = true
	return a.rec.save()
}

// finishUnfinished is the first row of the table: post what is journaled,
// upload the artifacts whose intents are journaled, put failed on the wire.
func (a *activation) finishUnfinished(ctx context.Context) error {
	if err := a.poster.reconcile(ctx); err != nil {
		return err
	}
	// A run killed after failing the thread, before failed reached the
	// wire, left it active, or pending when it failed at its activation:
	// failed goes on the wire now, rather than the thread taken for one a
	// person handed off again (and failed, and explained, twice).
	if a.rec.t.Agent.State == envelope.StateFailed && !a.rec.t.Agent.FailedOnWire && (a.env.State == envelope.StateActive || a.env.State == envelope.StatePending) {
		if err := a.uploadFailed(ctx); err != nil {
			return err
		}
		a.report.failed = true
		if code, msg, ok := a.rec.t.Agent.Error.Get(); ok {
			a.report.sum.Error = &SummaryError{Code: code, Message: msg}
		}
	}
	return nil
}

// finish sets the exit code from the outcome and the error.
func finish(sum *Summary, err error, sig os.Signal) {
	ee := exit.Of(err)
	switch {
	case sig != nil:
		sum.Outcome = OutcomeInterrupted
		sum.ExitCode = exit.Terminated
		if sig == syscall.SIGINT || sig == os.Interrupt {
			sum.ExitCode = exit.Interrupted
		}
		if ee != nil && ee.Code != "" && ee.Code != exit.CodeInternal && sum.Error == nil {
			sum.Error = &SummaryError{Code: ee.Code, Message: ee.Message}
		}
		return
	case ee != nil:
		sum.ExitCode = ee.Exit
		if ee.Exit == exit.NotHere {
			sum.Outcome = OutcomeNotHere
		}
		switch {
		case ee.Code == exit.CodeInternal && sum.Error != nil:
			// The run's own error (a thread failure) says more.
		case ee.Code != "":
			sum.Error = &SummaryError{Code: ee.Code, Message: ee.Message}
		case sum.Error == nil:
			sum.Error = &SummaryError{Message: ee.Message}
		}
		return
	}
	switch sum.Outcome {
	case OutcomeFailed:
		sum.ExitCode = exit.Failed
	case OutcomeTurnFailed:
		sum.ExitCode = exit.TurnFailed
	case OutcomeNotHere:
		sum.ExitCode = exit.NotHere
	default:
		sum.ExitCode = exit.OK
	}
}

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return 5 * time.Second
}

// interruptedMessage says what a signal left: state saved under the lock,
// nothing written before it.
func interruptedMessage(sig os.Signal, locked bool) string {
	name := exit.SignalName(sig)
	if locked {
		return "interrupted by " + name + "; state saved, the next run resumes"
	}
	return "interrupted by " + name + " before the run held the thread; nothing was written"
}

// notHere is the not_here exit: an active thread this state tree never
// activated.
func notHere(alias string) error {
	return &exit.Error{Exit: exit.NotHere, Message: fmt.Sprintf("thread %q is active but this state tree never activated it (another host's, or its record was lost); if it should run here, run `bhw-run thread retry %s`", alias, alias)}
}

// now stamps a local file: see envelope.StampLayout.
func now() string { return envelope.Stamp(time.Now()) }

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
