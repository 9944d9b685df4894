package run

import (
	"context"
	"log/slog"
	"sync"
)

// stateFaults is the first state write of the run that failed where its
// caller could not return it, and the cancel that stops the run for it.
type stateFaults struct {
	mu    sync.Mutex // guards first
	first error
	// abort ends the run's context with the fault (watchSignals sets it).
	abort context.CancelCauseFunc
}

// stateFault records a state write that failed where the caller cannot
// return it (an item journaled from the agent's output, a post confirmed)
// and stops the run: the turn is interrupted, so the next run resumes it,
// and the run ends with the first such error (STATE_INVALID) whatever it
// was doing. Going on would lose items: nothing journaled is posted.
func (a *activation) stateFault(err error) { a.faults.stop(a.log, err) }

// stop is stateFault: only the first fault is kept, logged and ends the
// run's context.
func (f *stateFaults) stop(log *slog.Logger, err error) {
	f.mu.Lock()
	first := f.first == nil
	if first {
		f.first = err
	}
	f.mu.Unlock()
	if !first {
		return
	}
	log.Error("a state file cannot be written; stopping the run", "error", err)
	if f.abort != nil {
		f.abort(err)
	}
}

// err is the fault stateFault recorded, or nil.
func (f *stateFaults) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}
