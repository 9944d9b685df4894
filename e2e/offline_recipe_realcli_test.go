//go:build realcli

package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOfflineRecipeFirstTick runs the offline try-out's scheduled recipe
// as its command lines say: `make model MODEL_PORT=N` in the background,
// the lines it prints for cron put above the crontab's line (and nothing
// else of a terminal's environment), then the crontab's command as cron's
// sh runs it, from a fresh HOME, with the pinned claude on the crontab's
// PATH; then the systemd unit's ExecStart with the same lines as
// Environment=. Each first pass runs its thread to its first approval, the model
// prints a line per request, and a Ctrl-C ends make model cleanly (no make
// error). Before, the first tick failed CREDENTIALS_NOT_FOUND
// until six lines were added by hand, and make model's port changed at
// each start.
func TestOfflineRecipeFirstTick(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	prefix := t.TempDir()
	work := filepath.Join(home, "demo-repo")
	for _, d := range []string{home, filepath.Join(prefix, "bin"), work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// bhw-run and claude where make install and npm put them: the first
	// folder of the crontab's PATH.
	for name, target := range map[string]string{"bhw-run": bhwBin, "claude": claudeBin(t)} {
		if err := os.Symlink(target, filepath.Join(prefix, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()

	model := exec.Command("make", "model", "MODEL_PORT="+port)
	model.Env = append(os.Environ(), "HOME="+home)
	lines := startJob(t, model)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-model.Process.Pid, syscall.SIGKILL)
			_ = model.Wait()
		}
	})
	var printed strings.Builder
	var cronVars []string
	inBlock := false
	deadline := time.After(5 * time.Minute) // a cold build on a busy machine
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("make model ended early:\n%s", printed.String())
			}
			printed.WriteString(line + "\n")
			switch {
			case strings.HasPrefix(line, "Under cron or systemd"):
				inBlock = true
			case inBlock && strings.Contains(line, "=") && !strings.Contains(line, " "):
				cronVars = append(cronVars, line)
			case inBlock && len(cronVars) > 0 && line == "":
				done = true
			}
		case <-deadline:
			t.Fatalf("make model printed no lines for cron within 5 minutes:\n%s", printed.String())
		}
	}
	if !strings.Contains(printed.String(), "127.0.0.1:"+port) {
		t.Fatalf("make model MODEL_PORT=%s is not on that port:\n%s", port, printed.String())
	}

	// The person's one step at a terminal: the thread, handed off with
	// the same lines (as README step 3 exports them).
	cronEnv := append([]string{"HOME=" + home, "LOGNAME=bhw", "SHELL=/bin/sh", "LANG=C.UTF-8",
		"PATH=" + recipePath(t, "crontab", crontabPath(t), prefix)}, cronVars...)
	handOff := exec.Command(bhwBin, "thread", "new", "--work-folder", work, "--message", "Add a README.md that says hello", "demo/t1")
	handOff.Env = cronEnv
	if out, err := handOff.CombinedOutput(); err != nil {
		t.Fatalf("thread new with make model's lines: %v\n%s", err, out)
	}
	tick := exec.Command("/bin/sh", "-c", cronCommand(t))
	tick.Env, tick.Dir = cronEnv, home
	out, err := tick.CombinedOutput()
	log, _ := os.ReadFile(filepath.Join(home, ".blobhub-worker", "cron.log"))
	t.Logf("the first tick: %v\n%s\ncron.log:\n%s", err, out, log)
	if err != nil || !strings.Contains(string(log), "demo/t1: parked (exit 0)") {
		t.Errorf("the first tick with make model's lines did not park the thread on its approval")
	}

	// The systemd unit's ExecStart, with its own Environment= lines and
	// make model's lines as more of them.
	svc := parseUnit(t, "contrib/systemd/bhw-run.service")
	unitEnv := []string{"HOME=" + home, "LANG=C.UTF-8"}
	for _, kv := range svc["Service"]["Environment"] {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + recipePath(t, "unit", p, prefix)
		}
		unitEnv = append(unitEnv, kv)
	}
	unitEnv = append(unitEnv, cronVars...)
	handOff = exec.Command(bhwBin, "thread", "new", "--work-folder", work, "--message", "Add a README.md that says hello", "demo/t2")
	handOff.Env = unitEnv
	if out, err := handOff.CombinedOutput(); err != nil {
		t.Fatalf("thread new demo/t2: %v\n%s", err, out)
	}
	argv := svc.execStart(t)
	unit := exec.Command(argv[0], argv[1:]...)
	unit.Env, unit.Dir = unitEnv, home
	out, err = unit.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo/t2: parked (exit 0)") {
		t.Errorf("the unit's ExecStart with make model's lines as Environment=: %v\n%s", err, out)
	}

	_ = syscall.Kill(-model.Process.Pid, syscall.SIGINT)
	for line := range lines {
		printed.WriteString(line + "\n")
	}
	err = model.Wait()
	stopped = true
	text := printed.String()
	// make itself ends by the SIGINT, silently, as a shell's job does at
	// Ctrl-C; what it must not do is report its recipe failed ("Error 1").
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT {
		err = nil
	}
	if err != nil || strings.Contains(text, "Error") || !strings.Contains(text, "stopped; the stand-in answered") {
		t.Errorf("make model at Ctrl-C: %v\n%s", err, text)
	}
	if !strings.Contains(text, " request 1: asks to write "+filepath.Join(work, "README.md")) {
		t.Errorf("make model printed no line for the request:\n%s", text)
	}
}
