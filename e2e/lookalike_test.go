package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workerLookalike starts a process whose argv[0] is blobhub-worker, as
// the daemon's console script runs (it sleeps), and returns its pid; the
// test's end stops it.
func workerLookalike(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec -a blobhub-worker sleep 600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Until bash has exec'd, the pid's command line is bash's.
	waitFor(t, 30*time.Second, "the lookalike's exec", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		return strings.HasPrefix(string(b), "blobhub-worker\x00")
	})
	return cmd.Process.Pid
}
