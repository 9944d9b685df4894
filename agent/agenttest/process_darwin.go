package agenttest

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// waitExit returns once pid has exited or d has passed: a kqueue with
// EVFILT_PROC and NOTE_EXIT, which macOS has in place of a pidfd.
func waitExit(pid int, d time.Duration) {
	kq, err := unix.Kqueue()
	if err != nil {
		return
	}
	defer unix.Close(kq)
	watch := []unix.Kevent_t{{Ident: uint64(pid), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD | unix.EV_ONESHOT, Fflags: unix.NOTE_EXIT}}
	out := make([]unix.Kevent_t, 1)
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		ts := unix.NsecToTimespec(left.Nanoseconds())
		n, err := unix.Kevent(kq, watch, out, &ts)
		if errors.Is(err, unix.EINTR) {
			watch = nil // registered already
			continue
		}
		if err != nil || n > 0 {
			return // ESRCH: gone already; else the exit came
		}
	}
}
