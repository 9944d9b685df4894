package e2e

// The reactive recipe (contrib/systemd/bhw-run-reactive.service): the
// README's pipeline with `ls --runnable --wait`, restarted by systemd after
// each pass. Checked as the other recipes are, and run: a thread handed
// off while the watch waits is run by the pass the watch starts.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/internal/sysdeps"
)

// reactivePipeline is the README's pipeline whose ls waits for work.
func reactivePipeline(t testing.TB) string {
	t.Helper()
	p := readmePipeline(t)
	r := strings.Replace(p, "bhw-run ls --runnable --print0", "bhw-run ls --runnable --wait --print0", 1)
	if r == p {
		t.Fatal("the README's pipeline has no `bhw-run ls --runnable --print0`")
	}
	return r
}

func TestContribReactiveUnit(t *testing.T) {
	const path = "contrib/systemd/bhw-run-reactive.service"
	svc := parseUnit(t, path)
	svc.want(t, "Service", "Type", "simple")
	svc.want(t, "Service", "Restart", "always")
	svc.want(t, "Service", "KillMode", "mixed")
	svc.want(t, "Unit", "StartLimitIntervalSec", "0")
	svc.want(t, "Install", "WantedBy", "default.target")
	args := svc.execStart(t)
	if want := []string{"/bin/bash", "-c", reactivePipeline(t)}; !slices.Equal(args, want) {
		t.Errorf("ExecStart runs %q\nwant the README's pipeline with ls --wait, under bash: %q", args, want)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil || !bytes.Contains(readme, []byte(path)) {
		t.Errorf("the README does not name %s", path)
	}
	out, err := exec.Command(sysdeps.Path(t, "systemd-analyze"), "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The unit's command, against a file:// store: the watch waits while
	// nothing is runnable, a hand-off ends it, the pass runs the thread.
	e := pipelineEnv(t)
	e.srv.Thread("react/notes") // a session with something in it has a feed to follow
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"))
	cmd.Dir = e.root
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, exited := make(chan error, 1), make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			// As systemctl stop does: the bash's trap stops the watch and
			// the runs; SIGKILL only if that does not end it.
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
	})
	// The watch's first pass lists every object and sets the section's
	// cursor; the hand-off comes after it.
	section := filepath.Join(e.jobDir(), "section.yaml")
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if b, err := os.ReadFile(section); err == nil && bytes.Contains(b, []byte("full_listing_at:")) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the watch ended before anything was runnable: %v\n%s", err, log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch set no cursor in 2 minutes\n%s", log.String())
		}
	}
	e.handOff("react/a", claudeType, "", "please do react/a")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the pass: %v\n%s", err, tail(log.String(), 4000))
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the watch did not start a pass within 3 minutes of the hand-off\n%s", tail(log.String(), 4000))
	}
	e.ranOnce("react/a")
	// Nothing is left runnable: the next watch would wait.
	code, printed := e.shell(nil, bhwBin, "ls", "--runnable", "--wait=1s")
	if code != 0 || strings.TrimSpace(stdoutOnly(printed)) != "" {
		t.Errorf("ls --runnable --wait=1s after the pass: exit %d, %q", code, printed)
	}
}

// stdoutOnly drops the JSON log records of a combined output.
func stdoutOnly(s string) string {
	var keep []string
	for line := range strings.SplitSeq(s, "\n") {
		if !strings.HasPrefix(line, "{") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
