package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// exitOf waits for cmd at most d and returns its exit status; killed says
// a signal ended it (its handler never ran). A process still running after
// d gets SIGTERM, then after five seconds SIGKILL, and the test fails.
func exitOf(t *testing.T, cmd *exec.Cmd, d time.Duration) (code int, killed bool) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			t.Fatalf("bhw-run was still running after %v; it ended on SIGTERM", d)
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("bhw-run was still running after %v, and SIGTERM did not end it", d)
		}
	}
	st := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return st.ExitStatus(), st.Signaled()
}

// TestFIFOAtThreadLock: a named pipe where thread.lock belongs used to
// block the run in open(2), past SIGTERM (the signal watcher started only
// after the lock). Now the open does not block and the pipe is refused:
// STATE_INVALID (78) at once, naming the file.
func TestFIFOAtThreadLock(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	const alias = "hostile/fifo"
	e.srv.Put(alias, string(envelope.NewThread(e.work, claudeType, "", alias)))
	dir := setup.ThreadDir(e.jobDir(), alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "thread.lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.start("", nil, alias)
	code, killed := exitOf(t, p.cmd, 20*time.Second)
	if killed || code != exit.Config {
		t.Fatalf("exit %d (killed %v), want 78\n%s", code, killed, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "STATE_INVALID") || !strings.Contains(p.stderr.String(), fifo+" is a named pipe") {
		t.Fatalf("stderr does not name the pipe:\n%s", p.stderr)
	}
}

// TestSignalBeforeTheLock: SIGTERM (and SIGINT) while a run waits for the
// thread lock (--lock-wait) used to be caught and ignored until the lock
// was free. Now signals are honoured from main's first instruction: the
// run ends at once with 143 (130), by its own exit, having written nothing
// — no thread.yaml, no journal, no section.log record.
func TestSignalBeforeTheLock(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		exit int
	}{{syscall.SIGTERM, exit.Terminated}, {syscall.SIGINT, exit.Interrupted}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			e := newE2E(t)
			e.useFileStore()
			const alias = "hostile/wait"
			e.srv.Put(alias, string(envelope.NewThread(e.work, claudeType, "", alias)))
			dir := setup.ThreadDir(e.jobDir(), alias)
			held, err := lock.Acquire(context.Background(), filepath.Join(dir, "thread.lock"), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Unlock()

			cmd := exec.Command(bhwBin, "--lock-wait", "1h", alias)
			cmd.Env = e.environ("")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waiting := make(chan struct{})
			var log strings.Builder
			go func() {
				sc := bufio.NewScanner(stderr)
				once := false
				for sc.Scan() {
					log.WriteString(sc.Text() + "\n")
					if !once && strings.Contains(sc.Text(), "waiting for it") {
						once = true
						close(waiting)
					}
				}
			}()
			select {
			case <-waiting:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("the run never said it waits for the lock")
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, killed := exitOf(t, cmd, 10*time.Second)
			if killed || code != tc.exit {
				t.Fatalf("exit %d (killed by a signal: %v), want %d by its own exit\n%s", code, killed, tc.exit, log.String())
			}
			for _, f := range []string{filepath.Join(dir, "thread.yaml"), filepath.Join(dir, "emissions.jsonl"), filepath.Join(e.jobDir(), "logs", "section.log")} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("%s was written (%v)", f, err)
				}
			}
		})
	}
}

// asUnprivileged makes cmd run as a user file modes bind: as root (which
// reads and writes past any mode) it runs as nobody (65534), on a copy of
// bhw-run nobody can execute, and every folder of roots (and the folders
// above them up to /tmp) is given to nobody or opened for it to pass; as
// any other user cmd is left as it is.
func asUnprivileged(t *testing.T, cmd *exec.Cmd, roots ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	const nobody = 65534
	bin := filepath.Join(roots[0], "bhw-run")
	b, err := os.ReadFile(bhwBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Path, cmd.Args[0] = bin, bin
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(root); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
}

// TestReadOnlyThreadFolder: a thread folder bhw-run cannot write to (a
// read-only mount, a chmod) is STATE_INVALID (78) naming the file it could
// not write, not "try later" (75), which every recipe maps to success.
func TestReadOnlyThreadFolder(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	e.agentConfig(claudeType).Executable = "/bin/true" // resolved by the checklist; never started here
	e.writeConfig()
	const alias = "hostile/readonly"
	e.srv.Put(alias, string(envelope.NewThread(e.work, claudeType, "", alias)))
	runAs := func() (int, string) {
		cmd := exec.Command(bhwBin, alias)
		cmd.Env = e.environ("")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		asUnprivileged(t, cmd, e.root, e.srv.Dir())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		code, killed := exitOf(t, cmd, time.Minute)
		if killed {
			t.Fatalf("killed by a signal:\n%s", out.String())
		}
		return code, out.String()
	}
	if code, out := runAs(); code != 0 {
		t.Fatalf("activation: exit %d\n%s", code, out)
	}
	dir := setup.ThreadDir(e.jobDir(), alias)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	e.srv.PersonPost(alias, "write something")
	code, out := runAs()
	if code != exit.Config || !strings.Contains(out, "STATE_INVALID") || !strings.Contains(out, filepath.Join(dir, "thread.yaml")) || !strings.Contains(out, "permission denied") {
		t.Fatalf("exit %d, want 78 STATE_INVALID naming thread.yaml\n%s", code, out)
	}
}
