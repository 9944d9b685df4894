package e2e

// What a person sees at a terminal, in a real one: tmux runs bash, the test
// types into it with send-keys and reads the screen with capture-pane -e
// (the escape sequences kept, so tint's colours can be told), waiting for
// each thing by polling the screen, within a bound.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/internal/sysdeps"
	"github.com/blobhub/bhw-run/lock"
)

// tmuxTerm is one tmux server with one window running bash.
type tmuxTerm struct {
	t    *testing.T
	bin  string
	sock string
}

// newTmux starts tmux on a socket of the test's, 160×50, running bash
// with env and nothing of the user's (no rc files, no tmux.conf).
func newTmux(t *testing.T, env []string) *tmuxTerm {
	t.Helper()
	tm := &tmuxTerm{t: t, bin: sysdeps.Path(t, "tmux"), sock: filepath.Join(t.TempDir(), "tmux.sock")}
	shell := append([]string{"env", "-i"}, env...)
	// HISTFILE empty: bash saves no history into the test's HOME when
	// the server hangs up on it, which would race the removal of the
	// test's folders.
	shell = append(shell, "TERM=screen", "PS1=$ ", "HISTFILE=", "bash", "--norc", "--noprofile", "-i")
	tm.cmd(append([]string{"-f", "/dev/null", "new-session", "-d", "-s", "bhw", "-x", "160", "-y", "50"}, shell...)...)
	pid, err := strconv.Atoi(strings.TrimSpace(tm.cmd("display-message", "-p", "-t", "bhw", "#{pane_pid}")))
	if err != nil {
		t.Fatalf("tmux's shell has no pid: %v", err)
	}
	t.Cleanup(func() {
		_ = exec.Command(tm.bin, "-S", tm.sock, "kill-server").Run()
		// kill-server returns before the shell has gone: wait for it, so
		// nothing of the window's outlives the test.
		for deadline := time.Now().Add(30 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("tmux's shell (pid %d) still runs 30s after the server was killed", pid)
				return
			}
		}
	})
	tm.waitFor("the shell's prompt", func(s string) bool { return strings.Contains(s, "$ ") })
	return tm
}

func (tm *tmuxTerm) cmd(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command(tm.bin, append([]string{"-S", tm.sock}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// typeLine types line and Enter.
func (tm *tmuxTerm) typeLine(line string) {
	tm.t.Helper()
	tm.cmd("send-keys", "-t", "bhw", "-l", line)
	tm.cmd("send-keys", "-t", "bhw", "Enter")
}

// screen is the window's text with its colours (SGR sequences), the
// scrollback included.
func (tm *tmuxTerm) screen() string {
	tm.t.Helper()
	return tm.cmd("capture-pane", "-p", "-e", "-J", "-S", "-200", "-t", "bhw")
}

// waitFor polls the screen until ok holds, for at most a minute, and
// returns the screen it held on.
func (tm *tmuxTerm) waitFor(what string, ok func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := tm.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("waited a minute for %s; the screen:\n%s", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// plain is s without its escape sequences.
func plain(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestTerminalE2E: `bhw-run -v <alias>` in a real terminal. Its log lines
// come through tint in colour (the level's, the faint time); while the turn
// runs one status line shows the elapsed time, the open tool call and the
// items posted, with each item printed above it as it is posted; at the end
// the line is gone and the summary stands where it was. Then `thread show
// --follow` prints the thread, says Ctrl-C stops it, and Ctrl-C ends it
// cleanly with 130, its exit status shown by the shell.
func TestTerminalE2E(t *testing.T) {
	e := pipelineEnv(t)
	fifo := filepath.Join(e.root, "tool.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(e.root, "fake-claude.json")
	b, _ := json.Marshal(claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{
		{Text: "looking at the tests"},
		{Tool: &claudetest.FakeTool{Name: "Bash", Input: map[string]any{"command": "go test ./..."}, Result: "ok", Block: fifo}},
		{Text: "all green"},
	}}})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Config.Concurrency.MaxAgents = 1
	e.writeConfig()
	const alias = "tty/t1"
	e.handOff(alias, claudeType, "", "run the tests")

	// The only agent slot is taken: the run says so (INF) and waits.
	slot, err := lock.TrySlot(filepath.Join(e.state, "slots"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()

	env := append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"), "BHW_LOG_FORMAT=auto")
	tm := newTmux(t, env)
	tm.typeLine(fmt.Sprintf("bhw-run -v --slot-wait 1m %s; echo \"run-exit=$?\"", alias))

	s := tm.waitFor("the log line about the taken slot", func(s string) bool { return strings.Contains(s, "every agent slot is taken") })
	line := lineWith(s, "every agent slot is taken")
	if !strings.Contains(line, "\x1b[92mINF") && !strings.Contains(line, "\x1b[38;5;10mINF") {
		t.Errorf("the INF log line is not green: %q", line)
	}
	if !strings.Contains(line, "\x1b[2m") {
		t.Errorf("the log line's time is not faint: %q", line)
	}
	if strings.Contains(plain(s), "⋯ "+alias) {
		t.Errorf("a status line while no agent runs yet:\n%s", plain(s))
	}
	if err := slot.Release(); err != nil {
		t.Fatal(err)
	}

	// The tool runs until the test writes to its pipe: the line names it.
	s = tm.waitFor("the status line naming the open tool call", func(s string) bool {
		return strings.Contains(plain(s), "waiting on a tool: Bash → go test ./...")
	})
	status := lineWith(plain(s), "⋯ "+alias)
	if !strings.HasPrefix(strings.TrimSpace(status), "⋯ "+alias+" 0:") || !strings.Contains(status, "items posted") {
		t.Errorf("status line %q, want ⋯ <alias> <elapsed> · waiting on a tool: … · N items posted", status)
	}
	if n := strings.Count(plain(s), "⋯ "+alias); n != 1 {
		t.Errorf("%d status lines on the screen, want one redrawn in place:\n%s", n, plain(s))
	}
	for _, item := range []string{"[text] looking at the tests", "[tool_call] Bash → go test ./..."} {
		if !strings.Contains(plain(s), item) {
			t.Errorf("-v did not print %q above the status line:\n%s", item, plain(s))
		}
	}
	if !strings.Contains(plain(s), "took an agent slot after waiting") {
		t.Errorf("no log line for the slot taken:\n%s", plain(s))
	}
	release := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			f.Close()
		}
		release <- err
	}()
	s = tm.waitFor("the end of the run", func(s string) bool { return exited("run", s) })
	if err := <-release; err != nil {
		t.Fatal(err)
	}
	text := plain(s)
	if !strings.Contains(text, "run-exit=0") || !strings.Contains(text, alias+": turn_completed (exit 0)") {
		t.Fatalf("the run did not end turn_completed, exit 0:\n%s", text)
	}
	if strings.Contains(text, "⋯ "+alias) {
		t.Errorf("the status line is still on the screen after the run:\n%s", text)
	}
	for _, item := range []string{"[tool_result]", "[text] all green", "[turn_end]"} {
		if !strings.Contains(text, item) {
			t.Errorf("-v did not print %q:\n%s", item, text)
		}
	}
	// The summary stands on a line of its own, right below the last item.
	if summary := lineWith(text, alias+": turn_completed"); strings.TrimSpace(summary) != alias+": turn_completed (exit 0)" {
		t.Errorf("the summary shares its line: %q", summary)
	}

	// thread show --follow until Ctrl-C.
	tm.typeLine(fmt.Sprintf("bhw-run thread show --follow %s; echo \"show-exit=$?\"", alias))
	tm.waitFor("thread show printing the thread", func(s string) bool {
		return strings.Count(plain(s), "[turn_end]") >= 2
	})
	tm.cmd("send-keys", "-t", "bhw", "C-c")
	s = tm.waitFor("thread show ending on Ctrl-C", func(s string) bool { return exited("show", s) })
	text = plain(s)
	t.Logf("the screen at the end:\n%s", text)
	if !strings.Contains(text, "show-exit=130") {
		t.Errorf("thread show --follow did not exit 130 on Ctrl-C:\n%s", text)
	}
	if !strings.Contains(text, "Ctrl-C stops") {
		t.Errorf("thread show --follow did not say how to stop it:\n%s", text)
	}
	if strings.Contains(text, "bhw-run: ") || strings.Contains(text, "panic") {
		t.Errorf("thread show --follow printed an error on Ctrl-C:\n%s", text)
	}
}

// exited reports whether the shell printed name's exit status (the
// command line typed holds the echo, not a status).
func exited(name, screen string) bool {
	return regexp.MustCompile(name + `-exit=[0-9]`).MatchString(screen)
}

// lineWith is the first line of s holding sub.
func lineWith(s, sub string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// alive says pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	_, f, ok := procStat(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}
