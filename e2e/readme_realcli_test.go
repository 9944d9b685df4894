//go:build realcli

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestREADMETryOutE2E follows the README's set-up and try-out command by
// command, exactly as written, as a newcomer would paste them: from an
// empty HOME, on a machine with the pinned Claude Code on PATH (what the
// set-up's npm line installs) and no model account. The set-up's `make
// model` block runs in the background, as in the second terminal it names,
// and the export line it prints is pasted where the block stood: the test
// gives the agent no model of its own. `make install` runs with a PREFIX
// of the test's; the installed bhw-run is the one on PATH. The set-up's
// doctor must pass, and the try-out must park the thread on its first
// write, run the write once approved, complete the turn and stop the
// thread.
func TestREADMETryOutE2E(t *testing.T) {
	blocks := readmeShellBlocks(t)
	for _, want := range []string{"make install", "export BLOBHUB_API_URL=file://", "bhw-run doctor", "make model", "bhw-run thread new", "bhw-run thread post demo/t1 yes"} {
		if !strings.Contains(strings.Join(blocks, "\n"), want) {
			t.Fatalf("the README's set-up and try-out have no %q:\n%s", want, strings.Join(blocks, "\n"))
		}
	}
	root := t.TempDir()
	home, prefix, npmBin := filepath.Join(root, "home"), filepath.Join(root, "prefix"), filepath.Join(root, "npm-global", "bin")
	for _, d := range []string{home, npmBin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(claudeBin(t), filepath.Join(npmBin, "claude")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(home, "demo-repo", "README.md")

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + home, "LANG=C.UTF-8", "PREFIX=" + prefix,
		"PATH=" + strings.Join([]string{filepath.Join(prefix, "bin"), npmBin, filepath.Dir(goBin), "/usr/bin", "/bin"}, ":"),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "GOTOOLCHAIN=local",
	}
	// make install and make model build with the machine's Go: its caches,
	// not the empty HOME's (which would download every module again).
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command(goBin, "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	var script strings.Builder
	script.WriteString("set -e -x\n")
	served := false
	for _, b := range blocks {
		if strings.TrimSpace(b) == "make model" {
			script.WriteString(startREADMEModel(t, env) + "\n")
			served = true
			continue
		}
		script.WriteString(b + "\n")
	}
	if !served {
		t.Fatal("the README has no block that is `make model` alone (the second terminal of the set-up)")
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("the README's commands:\n%s", out)
	if err != nil {
		t.Fatalf("a command of the README failed (the last + line above): %v", err)
	}
	text := string(out)
	if regexp.MustCompile(`(?m)^[✗–] `).MatchString(text) {
		t.Errorf("bhw-run doctor found a failure on the README's set-up")
	}
	last := 0
	for _, want := range []string{"demo/t1: parked (exit 0)", "demo/t1: turn_completed (exit 0)", "demo/t1: stopped (exit 0)"} {
		i := strings.Index(text[last:], want)
		if i < 0 {
			t.Fatalf("the try-out did not print %q after what came before", want)
		}
		last += i
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "hello\n" {
		t.Errorf("the approved write: %q, %v", b, err)
	}
	show := exec.Command(filepath.Join(prefix, "bin", "bhw-run"), "thread", "show", "--json", "demo/t1")
	show.Env = append(env, "BLOBHUB_API_URL=file://"+filepath.Join(home, "bhw-store"), "BHW_REVISION_ID=rev_local", "BHW_SESSION_ID=ses_local")
	items, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, line := range strings.Split(strings.TrimSpace(string(items)), "\n") {
		var it struct {
			Metadata struct {
				Type     string `json:"type"`
				Decision string `json:"decision"`
				Outcome  string `json:"outcome"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			t.Fatalf("thread show --json: %q: %v", line, err)
		}
		m := it.Metadata
		seen = append(seen, strings.TrimRight(m.Type+" "+m.Decision+m.Outcome, " "))
	}
	for _, want := range []string{"pending_prompt", "pending_prompt_resolved approved", "turn_end parked", "turn_end completed"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the thread's items %q lack %q", seen, want)
		}
	}
	// The approval resumed the parked session for real: one resolution,
	// and no new session started in place of a lost one (confined Claude
	// Code once could not make ~/.claude on the empty HOME).
	resolutions := 0
	for _, s := range seen {
		if strings.HasPrefix(s, "pending_prompt_resolved") {
			resolutions++
		}
	}
	if resolutions != 1 {
		t.Errorf("%d pending_prompt_resolved items, want 1: %q", resolutions, seen)
	}
	if strings.Contains(text, "could not be resumed") {
		t.Errorf("the try-out did not resume the parked session:\n%s", text)
	}
}

// startJob starts cmd in a process group of its own, as a terminal starts
// a foreground job: a signal to the group (Ctrl-C) reaches its children
// too, make's and go run's. It returns what cmd prints, its output and
// errors, line by line, in a channel closed at their end.
func startJob(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// startREADMEModel runs the README's `make model` in the background, as
// the second terminal the set-up names, until the test ends, and returns
// the export line it prints for the person to paste.
func startREADMEModel(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "make model")
	cmd.Env = env
	lines := startJob(t, cmd)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		_ = cmd.Wait()
	})
	var seen strings.Builder
	// Building scripts/demo with a cold cache takes a while on a busy
	// machine: a generous bound.
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("make model ended before it printed an export line:\n%s", seen.String())
			}
			seen.WriteString(line + "\n")
			if strings.HasPrefix(line, "export ") {
				go func() {
					for range lines {
					}
				}()
				t.Logf("make model printed:\n%s", seen.String())
				return strings.TrimSpace(line)
			}
		case <-timeout:
			t.Fatalf("make model printed no export line within 5 minutes:\n%s", seen.String())
		}
	}
}
