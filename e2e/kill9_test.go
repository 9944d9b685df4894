//go:build realcli

package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/run"
)

// The kill -9 tests of Claude Code, Codex and Antigravity (the ACP
// agents' are TestE2EACP's kill9): bhw-run is killed while the agent's command runs
// escapingCommand, whose tools leave the agent's group (a process group
// of their own, a double-forked daemon); none of them outlives the next
// run, which resumes and completes the turn with every item posted once.

// kill9MidEscapingCommand starts a run of alias, waits until the command
// and the tools that leave the agent's group run, kills bhw-run with
// SIGKILL, and returns the agent's group.
func kill9MidEscapingCommand(t *testing.T, e *e2eEnv, alias string) int {
	t.Helper()
	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	waitFor(t, 2*time.Minute, "the command and the tools that leave the agent's group", func() bool {
		live := liveProcesses(nil, e.work)
		for _, want := range []string{"sleep 90", "sleep 91", "sleep 92"} {
			if !slices.ContainsFunc(live, func(pi procInfo) bool { return strings.Contains(pi.cmd, want) }) {
				return false
			}
		}
		return true
	})
	waitFor(t, time.Minute, "the tool_call item", func() bool { return count(e.itemTypes(alias), "tool_call") == 1 })
	th := e.threadYAML(alias)
	if th.Agent.Process == nil || th.Agent.Process.Pgid <= 0 {
		t.Fatalf("no agent group recorded while the agent runs: %+v", th.Agent.Process)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d after kill -9", code)
	}
	return th.Agent.Process.Pgid
}

// resumeLeavesNothing runs alias again after kill9MidEscapingCommand
// killed the run whose agent led group pgid: the turn completes with every
// emission posted once, and nothing of the killed run is left.
func resumeLeavesNothing(t *testing.T, e *e2eEnv, alias string, pgid int) {
	t.Helper()
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	wantOnceEach(t, e, alias)
	noProcessesLeft(t, []int{pgid}, e.work)
}

// wantOnceEach fails when an emission was posted twice or the turn did not
// end once, completed.
func wantOnceEach(t *testing.T, e *e2eEnv, alias string) {
	t.Helper()
	wantEachEmissionOnce(t, e, alias)
	types := e.itemTypes(alias)
	if count(types, "turn_end") != 1 || types[len(types)-1] != "turn_end" {
		t.Errorf("items %v: want one final turn_end", types)
	}
	if exists(filepath.Join(e.work, "late.txt")) {
		t.Error("the killed run's command finished")
	}
}

func TestE2EClaudeKill9LeavesNothing(t *testing.T) {
	e := newClaudeE2E(t)
	e.model.Push(claudetest.Tool("Bash", map[string]any{"command": escapingCommand, "description": "wait a long time"}))
	e.allowAutonomous()
	const alias = "projects/p1/claude-kill9"
	e.handOff(alias, claudeType, "autonomous", "run the long command")
	pgid := kill9MidEscapingCommand(t, e.e2eEnv, alias)
	resumeLeavesNothing(t, e.e2eEnv, alias, pgid)
}

func TestE2ECodexKill9LeavesNothing(t *testing.T) {
	e := newCodexE2E(t, codextest.Run(escapingCommand))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	const alias = "projects/p1/codex-kill9"
	e.handOff(alias, codexType, "autonomous", "sleep a while")
	pgid := kill9MidEscapingCommand(t, e.e2eEnv, alias)
	e.model.Push(codextest.Say("picked up where I left off"))
	resumeLeavesNothing(t, e.e2eEnv, alias, pgid)
}

// TestE2EAntigravityKill9LeavesNothing: agy runs its commands itself (the
// stand-in as sh -c in the work folder), so the escaping tools are agy's
// children, below the supervisor as the other agents' are.
func TestE2EAntigravityKill9LeavesNothing(t *testing.T) {
	e := newAgyE2E(t, agenttest.Script{Turns: [][]agenttest.Step{
		{{Tool: agenttest.Exec(escapingCommand)}, {Hang: true}},
		{{Text: "picked up where I left off"}},
	}})
	const alias = "projects/p1/agy-kill9"
	e.handOff(alias, agyType, "autonomous", "run the long command")
	pgid := kill9MidEscapingCommand(t, e.e2eEnv, alias)
	resumeLeavesNothing(t, e.e2eEnv, alias, pgid)
	e.wantHooksRestored()
}

// wantEachEmissionOnce fails when the thread holds an emission twice.
func wantEachEmissionOnce(t testing.TB, e *e2eEnv, alias string) {
	t.Helper()
	seen := map[string]bool{}
	for _, it := range e.items(alias) {
		if id := meta(t, it).EmissionID; id != "" {
			if seen[id] {
				t.Errorf("emission %s posted twice", id)
			}
			seen[id] = true
		}
	}
}
