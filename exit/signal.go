package exit

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// Signals: main catches SIGINT and SIGTERM from its first instruction and
// hands them to the command. The first one ends the command's context, the
// signal its cause; a run then ends at once while it holds nothing (before
// the thread lock: nothing is written), and after that interrupts the agent
// politely and saves its state. The second one closes hurry: the agent's
// group is killed at once.

// signalError is the cause of a context a signal cancelled.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

// SignalOf is the signal that cancelled ctx, or nil.
func SignalOf(ctx context.Context) os.Signal {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return se.sig
	}
	return nil
}

// SignalName is sig as a person knows it: SIGINT, SIGTERM.
func SignalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt, syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// OfSignal is the exit code of a command a signal ended: 130 for SIGINT,
// 143 otherwise.
func OfSignal(sig os.Signal) int {
	if sig == syscall.SIGINT || sig == os.Interrupt {
		return Interrupted
	}
	return Terminated
}

// WatchSignals returns parent ended by the first signal on sigs (the
// signal its cause) and hurry, closed by the second; stop ends the watch.
// A nil sigs is never signalled.
func WatchSignals(parent context.Context, sigs <-chan os.Signal) (ctx context.Context, hurry <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	h := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(signalError{s})
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(h)
		case <-done:
		}
	}()
	return ctx, h, func() { close(done); cancel(nil) }
}
