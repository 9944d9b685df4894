package agenttest

import (
	"time"

	"github.com/blobhub/bhw-run/agent/proc"
)

// WaitGone waits until pid has exited (a zombie counts as gone) or d
// passes, and reports whether it has. The exit itself wakes it, no
// polling: a pidfd on Linux, a kqueue on macOS (process_linux.go,
// process_darwin.go).
func WaitGone(pid int, d time.Duration) bool {
	waitExit(pid, d)
	return proc.Exited(pid)
}
