package run

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// The readers, `ls`, `policy explain` and `doctor`, judge what a run would
// do without running one. These are the only doors they take into the
// activation, so each reads in its own file (ls.go, explain.go,
// doctor.go) with no other file of run/ needed: a peek at a thread and
// the decision a run would take (ls), the posture and gate of an envelope
// (explain), the launch of an agent type (doctor). The doors a run takes
// too (the envelope's download, whether this tree holds a thread, the
// kernel's confinement check, a dial of a local model) are here as well.

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

// wake is when a thread its limit holds may run again.
func (p *threadPeek) wake() time.Time { return limitedUntil(p.Thread) }

// confineCheck is whether this kernel confines an agent as s's config.yaml
// asks (confine.ports), the check a run makes before it starts a confined
// agent, and fix, what a machine owner does when it cannot.
func confineCheck(s *setup.Setup) (fix string, err error) {
	return confineFix, confine.Check(confine.Spec{Ports: s.Config.Confine.Ports})
}

// modelCheck is one local model of a launch's environment (a loopback
// *_BASE_URL) and what one dial of it said, as a run's start dials it.
type modelCheck struct {
	Var, URL string
	// Err is nil when the model accepts a connection; Said is the dial's
	// error without its preamble ("connection refused"), Fix what a
	// person does about it.
	Err       error
	Said, Fix string
}

// modelChecks dials every local model of l's environment once, in name
// order.
func modelChecks(ctx context.Context, l *launch) []modelCheck {
	var out []modelCheck
	for _, m := range localModels(l.Agent.Env) {
		c := modelCheck{Var: m.Var, URL: m.URL, Err: m.dial(ctx)}
		if c.Err != nil {
			c.Said, c.Fix = dialSaid(c.Err), modelFix(&m)
		}
		out = append(out, c)
	}
	return out
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

// downloadEnvelope reads alias's envelope, refusing one larger than
// envelope.MaxSize before it is read whole (blobhub.ErrTooLarge).
func downloadEnvelope(ctx context.Context, c blobhub.Client, alias string) (blobhub.Object, error) {
	return c.Download(blobhub.WithMaxValue(ctx, envelope.MaxSize), alias)
}

// holdsThread reports whether the state tree has a thread.yaml for alias
// (of any kind: a bad one is still this tree's record).
func holdsThread(jobDir, alias string) bool {
	_, err := os.Lstat(filepath.Join(setup.ThreadDir(jobDir, alias), "thread.yaml"))
	return err == nil
}

// malformed is the exit of a download of a thread this state tree holds
// whose value is not even a JSON object: the wire's fault (a proxy, a
// truncated answer), not a reason to forget the thread.
func malformed(alias string, err error) error {
	e := exit.Errorf(exit.CodeUnavailable, "BlobHub answered the thread %q with a value that is not a JSON object (%v), yet this state tree holds the thread; taking it for a fault of the wire: the next run reads it again", alias, err)
	e.Err = errMalformed
	return e
}

// errMalformed is the cause of malformed's error.
var errMalformed = errors.New("a garbled envelope of a thread this state tree holds")
