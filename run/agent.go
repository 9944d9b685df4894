package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// The agents a run can start are the adapters main lists (setup.Options.Adapters):
// run knows each one only by its descriptor, never by name.

// agentTurn is the agent's turn as the run drives it: how its agent starts,
// when --max-duration ends it, and the two ways it is stopped early.
type agentTurn struct {
	// launch is how the agent of the turn running starts (turnWith).
	launch *launch
	// deadline is when --max-duration ends the turn, whatever attempt of
	// it runs (zero: no bound); retry.go.
	deadline time.Time
	// stop cancels the running turn's context when its thread is deleted
	// (stopTurnFor); set by runAgent, nil between turns; under rec.mu.
	stop context.CancelCauseFunc
	// hurry is closed on a second signal: the agent is stopped without
	// the politeness (watchSignals).
	hurry <-chan struct{}
	// instructionsNoted: the status item saying the instructions file was
	// skipped is posted (once per run, whatever the agent starts).
	instructionsNoted bool
}

// runAgent starts the agent and runs the turn, with the watchdogs.
func (a *activation) runAgent(ctx context.Context, l *launch, gate policy.Gate, message string, plan turnPlan, tally *toolTally) (agent.TurnResult, error) {
	sess, rules, stop, err := a.startAgent(ctx, l)
	if err != nil {
		return agent.TurnResult{}, err
	}
	defer stop()
	h := &turnHandler{a: a, gate: gate, posture: l.Permissions, resolved: plan.resolved, tally: tally, confined: rules}
	h.touch()
	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	_, h.meter = a.remaining(l.adapter)
	h.cut = cancel
	a.rec.mu.Lock()
	a.agentTurn.stop = cancel
	a.rec.mu.Unlock()
	if a.r.MaxDuration > 0 {
		if a.agentTurn.deadline.IsZero() {
			a.agentTurn.deadline = time.Now().Add(a.r.MaxDuration)
		}
		var stopTimer context.CancelFunc
		turnCtx, stopTimer = context.WithDeadlineCause(turnCtx, a.agentTurn.deadline, errTimeout)
		defer stopTimer()
	}
	stopWatch := h.watch(a.r.StallTimeout, sess.LastOutput, cancel)
	defer stopWatch()

	// An agent that takes pictures gets a person's images as pictures
	// too (the message names them with their paths all the same).
	if it, ok := sess.(agent.ImageTaker); ok {
		if imgs := a.turnImages(); len(imgs) > 0 {
			it.AttachImages(imgs)
		}
	}
	result, err := sess.Turn(turnCtx, message, h)
	a.report.prog.stage(StageFinishing)
	a.rec.mu.Lock()
	a.agentTurn.stop = nil // the turn is over: a post failing now stops nothing
	if id := sess.SessionID(); id != "" {
		a.rec.t.Agent.AgentSessionID = id
	}
	a.rec.mu.Unlock()
	h.postPrompt(ctx)
	h.acknowledge()
	if err != nil && turnCtx.Err() != nil {
		switch cause := context.Cause(turnCtx); {
		case ctx.Err() != nil:
			return result, ctx.Err()
		case errors.Is(cause, errStalled), errors.Is(cause, errTimeout), errors.Is(cause, errBudget), errors.Is(cause, errThreadGone):
			return result, cause
		}
	}
	return result, err
}

// startAgent starts l's agent and records its process, with the
// turn turnWith set up and the session id, before any message goes out;
// stop ends it (on a second signal at once) and every descendant. A
// host-picked session id is recorded in that same write: a crash before it
// has sent the new session nothing (its agent reads end of input and
// exits), so the next run starts another with the same messages and
// nothing is lost. One atomic write less for each new session. rules is
// the rule set the agent runs in, nil unconfined.
func (a *activation) startAgent(ctx context.Context, l *launch) (sess agent.Session, rules *confine.Rules, stop func(), err error) {
	t := a.rec.t
	resume := t.Agent.AgentSessionID != ""
	sessionID := t.Agent.AgentSessionID
	if !resume && l.adapter.HostSessionID {
		sessionID = agent.NewSessionID()
	}
	if a.r.OwnProcess {
		if err := proc.BecomeSubreaper(); err != nil {
			a.log.Warn("cannot become a child subreaper; orphaned tool processes may survive", "error", err)
		}
	}
	al, rules, unconfine, err := a.r.startLaunch(l, l.WorkFolder)
	if err != nil {
		return nil, nil, nil, err
	}
	al.SessionID, al.Resume, al.Log, al.Logger = sessionID, resume, a.tlog.Log, a.log
	if resume && t.Ledger != nil {
		al.SessionCostUSD = t.Ledger.SessionCostUSD
	}
	al.Instructions = a.instructions(l)
	al.Budget, _ = a.remaining(l.adapter)
	a.report.prog.stage(StageStarting)
	sess, err = l.adapter.Start(ctx, al)
	if err != nil {
		unconfine()
		a.report.prog.stage(StageFinishing)
		return nil, nil, nil, err
	}
	a.report.prog.stage(StageModel)
	// A second signal skips the politeness for as long as the agent lives,
	// closing included.
	stopHurry := make(chan struct{})
	go func() {
		select {
		case <-a.agentTurn.hurry:
			proc.StopGroup(sess.Pgid(), 0)
		case <-stopHurry:
		}
	}()
	stop = func() {
		a.closeAgent(ctx, sess)
		close(stopHurry)
		unconfine() // after every descendant is gone
	}
	a.rec.mu.Lock()
	t.Agent.Process = &envelope.ProcessInfo{Pgid: sess.Pgid(), StartedAt: now()}
	t.Agent.AgentSessionID = sessionID
	if id := sess.SessionID(); id != "" {
		t.Agent.AgentSessionID = id
	}
	err = a.rec.saveLocked()
	a.rec.mu.Unlock()
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return sess, rules, stop, nil
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
	case <-a.agentTurn.hurry:
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
	// Saved with the turn's end (every path after this saves): a kill
	// before that leaves a group id that names no process, which the next
	// run's leftover check finds gone. One atomic write less per turn.
	a.rec.mu.Lock()
	a.rec.t.Agent.Process = nil
	a.rec.mu.Unlock()
}

// maxInstructions bounds the instructions file run reads for the agent.
const maxInstructions = 1 << 20

// instructions reads the adapter's instructions file (CLAUDE.md) of the
// work folder for a gated posture, through outbox.ReadInside: a link is
// followed only while it stays inside the work folder, so a CLAUDE.md
// linked to a file outside — any file the user can read — never reaches
// the model. A file it will not pass on gets one status item per run
// saying why; a missing one is nothing.
func (a *activation) instructions(l *launch) []byte {
	name := l.adapter.Instructions
	if name == "" || l.Permissions == setup.PermAutonomous {
		return nil
	}
	f, err := outbox.ReadInside(l.WorkFolder, name, maxInstructions)
	if err == nil {
		return f.Data
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	why := err.Error()
	var skip outbox.Skip
	if errors.As(err, &skip) {
		why = skip.Reason
		if why == outbox.ReasonTooLarge {
			why = fmt.Sprintf("larger than %d bytes", maxInstructions)
		}
	}
	a.log.Warn("not passing the work folder's instructions to the agent", "path", name, "reason", why)
	if !a.agentTurn.instructionsNoted {
		a.agentTurn.instructionsNoted = true
		a.emit(agent.StatusItem("instructions_skipped", fmt.Sprintf("%s was not passed to the agent: %s", name, why),
			map[string]any{"path": name, "reason": why}))
	}
	return nil
}
