package claude_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/proc"
)

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// readPid blocks until a writer has put a pid into the fifo.
func readPid(fifo string) int {
	b, err := os.ReadFile(fifo)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// waitGone waits (no polling) until pid has exited.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	if !agenttest.WaitGone(pid, d) {
		t.Fatalf("process %d still alive after %v", pid, d)
	}
}

// groupMembers are the live (non-zombie) processes of a process group.
func groupMembers(pgid int) []int { return proc.Members(pgid) }
