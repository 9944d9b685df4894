package run

import (
	"context"

	"github.com/blobhub/bhw-run/setup"
)

// self is who a run is on BlobHub: the user its key belongs to, which
// tells our own items from a person's, and the session's worker object it
// answers to (a thread_failed names its instance), as this run checked or
// made it.
type self struct {
	userID     string // identity.yaml's, or asked once (load, tail, attach)
	instanceID string // the worker object's instance (attach, remakeWorker)
	remade     bool   // the worker object was made again this run
}

// attach checks identity and the session's worker object before the
// run's first side effect, so a run with the wrong key or in another
// user's session changes nothing.
func (a *activation) attach(ctx context.Context) error {
	id, err := setup.CheckIdentity(ctx, a.r.Client, a.r.Setup.StateDir)
	if err != nil {
		return err
	}
	a.self.userID = id.UserID
	st, err := a.r.Setup.EnsureWorker(ctx, a.r.Client, a.self.userID)
	if err != nil {
		return err
	}
	a.self.instanceID = st.InstanceID
	return nil
}

// remakeWorker makes the session's worker object again, once per run,
// after a post to it found it gone (deleted while the run worked), with
// the same check of its owner as at the run's start. false when it was
// made again already or could not be.
func (a *activation) remakeWorker(ctx context.Context) bool {
	if a.self.remade {
		return false
	}
	a.self.remade = true
	a.log.Warn("the worker object is gone from BlobHub (deleted?); making it again")
	st, err := a.r.Setup.EnsureWorker(ctx, a.r.Client, a.self.userID)
	if err != nil {
		a.log.Error("could not make the worker object again; its items stay journaled", "error", err)
		return false
	}
	a.self.instanceID = st.InstanceID
	return true
}
