package confine

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes the files and folders named (a trailing / is a folder)
// under a fresh temp folder, its links resolved, and returns it.
func tree(t *testing.T, names ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			err = os.MkdirAll(p, 0o700)
		} else if err = os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
			err = os.WriteFile(p, []byte("x"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBuild(t *testing.T) {
	root := tree(t, "work/src/main.go", "work/private/key", "tmp/", "home/.bashrc", "home/.blobhub/credentials.yaml",
		"home/.blobhub/other", "state/config.yaml", "state/threads/me/agent-home/session", "state/threads/other/thread.yaml",
		"elsewhere/file")
	p := func(n string) string { return filepath.Join(root, n) }
	if err := os.Symlink(p("home/.blobhub/credentials.yaml"), p("home/cred-link")); err != nil {
		t.Fatal(err)
	}
	rules, err := Build(Spec{
		WorkFolder: p("work"), Temp: p("tmp"),
		Writable: []string{p("state/threads/me/agent-home"), p("missing")},
		// Named through a link: denied as the file it reaches.
		Deny: []string{p("home/cred-link"), p("state"), p("work/private"), p("gone/never")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path        string
		read, write bool
	}{
		{p("work/src/main.go"), true, true},
		{p("work/private/key"), false, false}, // denied inside the work folder
		{p("tmp/new"), true, true},
		{p("state/threads/me/agent-home/session"), true, true}, // its own home inside the state tree
		{p("home/.bashrc"), true, false},
		{p("home/.blobhub/other"), true, false},
		{p("home/.blobhub/credentials.yaml"), false, false},
		{p("home/.blobhub/created-later"), false, false}, // beside a denied path: only what existed is covered
		{p("home/cred-link"), false, false},              // a link is granted nothing of its own
		{p("state/config.yaml"), false, false},
		{p("state/threads/other/thread.yaml"), false, false},
		{p("elsewhere/file"), true, false},
		{"/usr/bin/env", true, false},
		{"/dev/null", true, true},
	} {
		if r, w := rules.Grants(c.path); r != c.read || w != c.write {
			t.Errorf("%s: read %v write %v, want read %v write %v", c.path, r, w, c.read, c.write)
		}
	}
	// The folders on the way to a denied path get no rule of their own.
	for _, r := range rules.Paths {
		if r.Path == p("home") || r.Path == p("home/.blobhub") || r.Path == "/" {
			t.Errorf("rule on the ancestor %s of a denied path", r.Path)
		}
	}
	if _, err := Build(Spec{WorkFolder: p("nope"), Temp: p("tmp")}); err == nil {
		t.Error("a missing work folder built a rule set")
	}
}

// confined runs sh -c script under rules, in dir, and returns its output.
func confined(t testing.TB, rules Rules, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	f, err := Wrap(cmd, rules)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func needLandlock(t testing.TB) {
	t.Helper()
	if ABI() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this kernel has no Landlock; the confinement tests need it")
		}
		t.Skip("this kernel has no Landlock")
	}
}

// TestTrampoline: the program started through Wrap, and what it starts,
// reads and writes only what the rules grant, and never sees the
// trampoline's variable.
func TestTrampoline(t *testing.T) {
	needLandlock(t)
	root := tree(t, "work/", "tmp/", "secret/key", "outside/")
	p := func(n string) string { return filepath.Join(root, n) }
	rules, err := Build(Spec{WorkFolder: p("work"), Temp: p("tmp"), Deny: []string{p("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := confined(t, rules, p("work"), "cat "+p("secret/key")+"; echo x > "+p("outside/x")+"; echo in > in.txt; sh -c 'echo y > "+p("outside/y")+"'; env")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Count(out, "Permission denied") != 3 {
		t.Errorf("output %q, want three refusals", out)
	}
	if strings.Contains(out, trampolineEnv) {
		t.Errorf("the agent sees %s: %q", trampolineEnv, out)
	}
	if b, err := os.ReadFile(p("work/in.txt")); err != nil || !bytes.Equal(b, []byte("in\n")) {
		t.Errorf("work/in.txt = %q, %v", b, err)
	}
	for _, n := range []string{"outside/x", "outside/y"} {
		if _, err := os.Stat(p(n)); err == nil {
			t.Errorf("%s was written", n)
		}
	}
}

// TestTrampolineFailure: a program the trampoline cannot start fails with
// ExitTrampoline and says why, rather than running unconfined.
func TestTrampolineFailure(t *testing.T) {
	needLandlock(t)
	cmd := exec.Command("/nonexistent/agent")
	f, err := Wrap(cmd, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitTrampoline || !strings.Contains(string(out), "the confinement failed") {
		t.Fatalf("err %v, output %q; want exit %d saying the confinement failed", err, out, ExitTrampoline)
	}
}

// BenchmarkStart is an agent start through the trampoline (Trampoline)
// and without it (Direct): /bin/true, with the rule set of a home folder
// and a state tree denied. The difference is the trampoline's cost.
func BenchmarkStart(b *testing.B) {
	needLandlock(b)
	home, err := os.UserHomeDir()
	if err != nil {
		b.Fatal(err)
	}
	work, tmp := b.TempDir(), b.TempDir()
	rules, err := Build(Spec{WorkFolder: work, Temp: tmp, Deny: []string{filepath.Join(home, ".blobhub"), filepath.Join(home, ".blobhub-worker")}})
	if err != nil {
		b.Fatal(err)
	}
	start := func(b *testing.B, wrap bool) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.Env = []string{}
			var f *os.File
			if wrap {
				if f, err = Wrap(cmd, rules); err != nil {
					b.Fatal(err)
				}
			}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			if f != nil {
				f.Close()
			}
		}
	}
	b.Run("Direct", func(b *testing.B) { start(b, false) })
	b.Run("Trampoline", func(b *testing.B) { start(b, true) })
	b.ReportMetric(float64(len(rules.Paths)), "rules")
}

// TestScopes: on a kernel of ScopeABI or later the agent can neither
// signal a process outside its domain (kill -STOP of its runner, which
// would hold the thread's lock with no watchdog left) nor connect to an
// abstract unix socket one listens on; inside its own domain both work.
func TestScopes(t *testing.T) {
	needLandlock(t)
	if ABI() < ScopeABI {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this kernel's Landlock (ABI %d) has no scopes", ABI())
		}
		t.Skipf("this kernel's Landlock (ABI %d) has no scopes", ABI())
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no python3 to connect to an abstract socket with")
		}
		t.Skip("no python3 to connect to an abstract socket with")
	}
	root := tree(t, "work/", "tmp/")
	rules, err := Build(Spec{WorkFolder: filepath.Join(root, "work"), Temp: filepath.Join(root, "tmp")})
	if err != nil {
		t.Fatal(err)
	}
	// An unconfined process beside the agent: the stop must not land.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	name := fmt.Sprintf("bhw-scope-test-%d", os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	connect := fmt.Sprintf(`%s -c 'import socket; socket.socket(socket.AF_UNIX).connect("\0%s")' 2>/dev/null && echo socket-reached`, py, name)
	out, err := confined(t, rules, filepath.Join(root, "work"), fmt.Sprintf(
		`kill -0 $PPID 2>/dev/null && echo runner-signalled; kill -STOP %d 2>/dev/null && echo stop-landed; %s; sleep 60 & kill $! && echo own-domain-ok`,
		other.Process.Pid, connect))
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, bad := range []string{"runner-signalled", "stop-landed", "socket-reached"} {
		if strings.Contains(out, bad) {
			t.Errorf("the confined agent did it: %s (output %q)", bad, out)
		}
	}
	if !strings.Contains(out, "own-domain-ok") {
		t.Errorf("the agent could not signal its own child: %q", out)
	}
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", other.Process.Pid)); strings.Contains(string(b), ") T ") {
		t.Errorf("the process outside was stopped: %s", b)
	}
	// Unconfined, the same script reaches all three: the test can fail.
	cmd := exec.Command("/bin/sh", "-c", connect)
	if b, _ := cmd.CombinedOutput(); !strings.Contains(string(b), "socket-reached") {
		t.Errorf("unconfined, the socket was not reached either: %q", b)
	}
}

// TestStrayTrampolineVariable: a BHW_CONFINE_FD left in the environment
// by someone else (naming no in-memory file: an inherited file, a closed
// descriptor, garbage) does not make a program the trampoline: it runs as
// itself instead of exiting 126, and its children do not inherit it.
func TestStrayTrampolineVariable(t *testing.T) {
	if os.Getenv("BHW_TEST_STRAY_CHILD") == "1" {
		// The child: it got here, past init, and dropped the variable.
		if v, ok := os.LookupEnv(trampolineEnv); ok {
			t.Fatalf("%s=%q is still set", trampolineEnv, v)
		}
		return
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, v := range []string{"3", "9", "x", ""} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStrayTrampolineVariable$", "-test.count=1")
		cmd.Env = append(os.Environ(), trampolineEnv+"="+v, "BHW_TEST_STRAY_CHILD=1")
		cmd.ExtraFiles = []*os.File{f} // fd 3: a file, not a rule set
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s=%q: %v: %s", trampolineEnv, v, err, out)
		}
	}
}

// TestWhatLandlockLeaves pins what docs/security.md says an agent can
// still do: change the mode and times of a denied file (Landlock has no
// right for chmod or utime), and read a denied file through a hard link
// a person made beforehand in a folder it may read; it cannot make such
// a link itself, nor read or write the file by its own path.
func TestWhatLandlockLeaves(t *testing.T) {
	needLandlock(t)
	root := tree(t, "work/", "tmp/", "secret/key", "home/")
	p := func(n string) string { return filepath.Join(root, n) }
	if err := os.Link(p("secret/key"), p("home/person-link")); err != nil {
		t.Fatal(err)
	}
	rules, err := Build(Spec{WorkFolder: p("work"), Temp: p("tmp"), Deny: []string{p("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := confined(t, rules, p("work"), "chmod 644 "+p("secret/key")+" && echo chmod-ok; touch -d 2001-01-01 "+p("secret/key")+" && echo utime-ok; "+
		"cat "+p("home/person-link")+" && echo link-read; ln "+p("secret/key")+" own-link || echo link-refused; cat "+p("secret/key")+" || echo read-refused")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"chmod-ok", "utime-ok", "link-read", "link-refused", "read-refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %s", out, want)
		}
	}
	if fi, err := os.Stat(p("secret/key")); err != nil || fi.Mode().Perm() != 0o644 || fi.ModTime().Year() != 2001 {
		t.Errorf("the denied file: %v %v", fi, err)
	}
}
