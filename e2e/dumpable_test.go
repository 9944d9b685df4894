package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEnvironNotReadableBySameUser: a process of bhw-run's own user (an
// agent's tool, say) cannot read bhw-run's /proc/<pid>/environ, where
// BLOBHUB_API_KEY is, while the same reader can read a process of that
// user that did not protect itself. Root's readers (CAP_SYS_PTRACE) are not
// held back by this, so as root the test runs bhw-run and the reader as an
// unprivileged user, uid 65534, as the recipe of docs/security.md runs the
// agent side.
func TestEnvironNotReadableBySameUser(t *testing.T) {
	const key = "bhk_in_the_environment_4410"
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release // bhw-run waits here while the test reads its /proc
	}))
	defer srv.Close()
	defer close(release)

	// Everything the user runs lies in a folder it can read: the binary,
	// HOME and the state tree.
	base := os.TempDir()
	if os.Geteuid() == 0 && !traversable(base) {
		base = "/tmp" // sticky and open to every user
	}
	root, err := os.MkdirTemp(base, "bhw-dumpable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "bhw-run")
	copyFile(t, bhwBin, bin, 0o755)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(home, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "BLOBHUB_API_KEY=" + key, "BLOBHUB_API_URL=" + srv.URL + "/v1",
		"BHW_STATE_DIR=" + filepath.Join(home, "state"), "BHW_REVISION_ID=rev_x", "BHW_SESSION_ID=ses_x"}
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		return cmd
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	// read is `cat /proc/<pid>/environ` as the same user.
	read := func(pid int) (string, error) {
		t.Helper()
		cmd := exec.Command(cat, fmt.Sprintf("/proc/%d/environ", pid))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// The reader works: a process of the user that did not protect itself.
	plain := start(sleep, "300")
	if out, err := read(plain.Process.Pid); err != nil || !strings.Contains(out, key) {
		t.Fatalf("the reader cannot read an unprotected process of the same user (%v: %q); the test proves nothing", err, out)
	}

	bhw := start(bin, "ls")
	<-asked // bhw-run is up and waiting for BlobHub
	out, err := read(bhw.Process.Pid)
	if err == nil || strings.Contains(out, key) {
		t.Fatalf("a process of the same user read bhw-run's environment (%v): %q", err, out)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", bhw.Process.Pid)); err != nil {
		t.Fatalf("bhw-run exited before the read: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// traversable reports whether every user may walk down to dir.
func traversable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}
