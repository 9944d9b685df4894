package e2e

import (
	"bufio"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestThreadShowFollowSIGINT: `thread show --follow` prints an item posted
// after it started and exits 130 on SIGINT.
func TestThreadShowFollowSIGINT(t *testing.T) {
	e := newE2E(t)
	const alias = "show/t1"
	e.handOff(alias, claudeType, "", "first message")

	cmd := exec.Command(bhwBin, "thread", "show", "--follow", "--poll-interval", "10ms", alias)
	cmd.Env = e.environ(bhtest.PersonKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var mu sync.Mutex
	var out strings.Builder
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	printed := func(s string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Contains(out.String(), s)
		}
	}
	waitFor(t, time.Minute, "the first item", printed("first message"))
	e.post(alias, "posted while following")
	waitFor(t, time.Minute, "the item posted after start", printed("posted while following"))

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		// Stopped, not done: 130 as for every command a SIGINT ends.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("after SIGINT: %v, want exit 130", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("thread show --follow kept running after SIGINT")
	}
	if n := strings.Count(out.String(), "posted while following"); n != 1 {
		t.Fatalf("the new item was printed %d times:\n%s", n, out.String())
	}
}
