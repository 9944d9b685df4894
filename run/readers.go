package run

import (
	"cmp"
	"context"
	"os"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// The readers, `ls`, `policy explain` and `doctor`, judge what a run would
// do without running one. These are the only doors they take into the
// activation, so each reads in its own file (ls.go, explain.go,
// doctor.go) with no other file of run/ needed: a peek at a thread and
// the decision a run would take (ls), the posture and gate of an envelope
// (explain), the launch of an agent type (doctor).

// threadPeek is a job thread as a run would find it, read in memory only
// and never written: no lock, no thread.yaml, no journal line.
type threadPeek struct {
	a *activation
	// Thread is thread.yaml as this state tree holds it (an empty record
	// without one, or with one recording another alias).
	Thread *envelope.Thread
}

// peekThread reads thread.yaml and the journal of the job thread alias,
// whose envelope is env, as a run under the lock would; userID is the
// state tree's user (identity.yaml), "" when none is recorded. env stays
// the peek's: a change to it counts in what it reads and decides after.
func (r *Runner) peekThread(alias string, env *envelope.Envelope, userID string) (*threadPeek, error) {
	a := &activation{r: r, alias: alias, dir: setup.ThreadDir(r.Setup.JobDir, alias), env: env, log: r.Logger.With("alias", alias), report: report{sum: &Summary{Alias: alias}}, self: self{userID: userID}}
	if err := a.peek(); err != nil {
		return nil, err
	}
	return &threadPeek{a: a, Thread: a.rec.t}, nil
}

// readItems reads the thread's items after items.scanned, as a run does
// before it decides (a park the daemon left is answered as a run would
// find it). unread says the read stopped at its bound: a run would read
// on, so it has something to do.
func (p *threadPeek) readItems(ctx context.Context) (unread bool, err error) {
	if err := p.a.adoptPark(ctx); err != nil {
		return false, err
	}
	if err := p.a.readItems(ctx); err != nil {
		return false, err
	}
	return p.a.read.unread, nil
}

// decide is the row of the decision table a run would take now, on what
// the peek has read.
func (p *threadPeek) decide() Decision { return Decide(p.a.facts()) }

// threadGate is the posture a thread's envelope asks for and the gate a
// turn of it runs under, its work folder as the envelope writes it: the
// checklist's step 3 (an *agent.Error when it fails) without the machine's
// checks.
func (r *Runner) threadGate(env *envelope.Envelope) (posture string, g policy.Gate, err error) {
	perm, pol, err := r.posture(env, r.Setup.AgentConfig(env.Agent.Type))
	return perm, r.gate(perm, pol, env.WorkFolder, policyOutbox(env)), err
}

// typeLaunch is the launch of ad's agent for a thread that asks nothing
// of its own, as config.yaml resolves it, in bhw-run's temp folder. exe
// is the executable it names; err says it is not found (the launch then
// has no executable, and is not confined).
func (r *Runner) typeLaunch(ad *agent.Adapter) (l *launch, exe string, err error) {
	res := r.configured(ad)
	res.WorkFolder = os.TempDir()
	exe = cmp.Or(r.Setup.AgentConfig(ad.Type).Executable, ad.Executable)
	abs, err := lookPath(exe)
	if err == nil {
		res.Executable = abs
		res.Confined = r.confined(res)
	}
	return r.newLaunch(res, ""), exe, err
}
