package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// TestAgentThatStopsReading: an agent of each adapter that stops reading
// its stdin once its session is open, given a person's messages of 144 KB
// (more than the pipe holds), or that floods requests without reading
// their answers, used to hold bhw-run forever — the thread lock and an
// agent slot with it — because every way out (the first SIGTERM,
// --max-duration, --stall-timeout) first wrote to the agent. Now the
// run ends after one SIGTERM with 143, at --max-duration or
// --stall-timeout with 3 (turn_failed), within the bounds, and leaves the
// lock and the slot free.
func TestAgentThatStopsReading(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agents := []struct {
		typ    string
		script func(agenttest.Script) any
		env    string // the variable naming the fake's script
		perm   string
	}{
		{claudeType, func(s agenttest.Script) any { return claudetest.FromScript(s) }, claudetest.FakeAgentEnv, "approval"},
		// Autonomous: under approval the Codex sandbox check would run the
		// fake as codex itself.
		{codexType, func(s agenttest.Script) any { return s }, codextest.FakeEnv, "autonomous"},
		{"acp", func(s agenttest.Script) any { return s }, acptest.FakeAgentEnv, "approval"},
	}
	ends := []struct {
		name   string
		script agenttest.Script
		args   []string
		signal bool
		exit   int
		token  string // the status item that says why
	}{
		{"one SIGTERM", agenttest.Script{StopReading: true}, nil, true, exit.Terminated, ""},
		{"max-duration", agenttest.Script{StopReading: true}, []string{"--max-duration", "3s"}, false, exit.TurnFailed, "turn_timeout"},
		{"stall-timeout", agenttest.Script{Flood: 5000}, []string{"--stall-timeout", "3s"}, false, exit.TurnFailed, "agent_stalled"},
	}
	for _, a := range agents {
		for _, end := range ends {
			t.Run(a.typ+"/"+end.name, func(t *testing.T) {
				e := newE2E(t)
				e.useFileStore()
				e.Config.Concurrency.MaxAgents = 1
				e.Config.Policy.AllowAutonomous = true
				// In the work folder: the confined agent may write only there.
				deaf := filepath.Join(e.work, "deaf")
				if err := syscall.Mkfifo(deaf, 0o600); err != nil {
					t.Fatal(err)
				}
				s := end.script
				s.Deaf, s.Turns = deaf, [][]agenttest.Step{{{Text: "never read"}}}
				b, err := json.Marshal(a.script(s))
				if err != nil {
					t.Fatal(err)
				}
				script := filepath.Join(e.root, "script.json")
				if err := os.WriteFile(script, b, 0o600); err != nil {
					t.Fatal(err)
				}
				ac := e.agentConfig(a.typ)
				ac.Executable, ac.Env = self, map[string]string{a.env: script}
				e.writeConfig()
				alias := "deaf/" + strings.ReplaceAll(a.typ, "_", "-")
				// Three messages of 48 KB, each under BlobHub's item cap,
				// one turn's input of 144 KB together.
				long := strings.Repeat("a person's long message ", 2000)
				e.handOff(alias, a.typ, a.perm, long)
				e.post(alias, long)
				e.post(alias, long)

				cmd := e.start(bhtest.RunnerKey, nil, append(end.args, alias)...)
				// Opened for reading, the pipe wakes the test once the agent
				// reads nothing more.
				if err := agenttest.Told(deaf, time.Minute); err != nil {
					t.Fatalf("the agent never stopped reading (%v)\n%s", err, cmd.stderr)
				}
				if end.signal {
					if err := cmd.cmd.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
				}
				// The bound: the 3 s timeout, the 2 s interrupt write, the
				// 4 s stdin grace and the 5 s kill grace, with room to spare.
				code, killed := exitOf(t, cmd.cmd, 60*time.Second)
				if killed || code != end.exit {
					t.Fatalf("exit %d (killed by a signal: %v), want %d\n%s", code, killed, end.exit, tail(cmd.stderr.String(), 4000))
				}
				threadLock := filepath.Join(setup.ThreadDir(e.jobDir(), alias), "thread.lock")
				if held, err := lock.Held(threadLock); err != nil || held {
					t.Errorf("the thread lock is still held (%v)", err)
				}
				if n, err := lock.HeldSlots(filepath.Join(e.state, "slots"), 1); err != nil || n != 0 {
					t.Errorf("%d agent slots still held (%v)", n, err)
				}
				if end.token != "" && !slices.Contains(e.statusTokens(alias), end.token) {
					t.Errorf("status items %q, want %s", e.statusTokens(alias), end.token)
				}
			})
		}
	}
}
