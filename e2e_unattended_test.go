package main

// Unattended runs: a turn whose every tool call is refused, a provider's
// rate limit, a refused key and a spent budget each end the run with a
// code that says so, for Claude Code and for Codex.

import (
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/run"
)

// checkNoProgress: the turn's only tool call was refused by the worker's
// rule, so the run ends turn_failed NO_PROGRESS naming the rule, the
// counts say so, and the thread stays active.
func checkNoProgress(t *testing.T, e *e2eEnv, s *guardedScenario, alias string) {
	t.Helper()
	e.handOffGuarded(alias, s.agent, s.threadPolicy(), "write the file outside")
	sum := e.activate(alias, run.ExitTurnFailed, run.OutcomeTurnFailed)
	if sum.Error == nil || sum.Error.Code != run.CodeNoProgress || !strings.Contains(sum.Error.Message, "worker rule 1") {
		t.Fatalf("summary error %+v, want NO_PROGRESS naming worker rule 1", sum.Error)
	}
	want := agent.ToolCounts{Calls: 1, DeniedByRule: 1}
	if sum.Tools == nil || *sum.Tools != want {
		t.Errorf("summary tools %+v, want %+v", sum.Tools, want)
	}
	ends := e.itemsOfType(alias, agent.ItemTurnEnd)
	if len(ends) != 1 {
		t.Fatalf("%d turn_end items: %v", len(ends), e.itemTypes(alias))
	}
	if m := meta(t, ends[0]); m.Outcome != "no_progress" || m.Tools == nil || *m.Tools != want {
		t.Errorf("turn_end outcome %q tools %+v, want no_progress %+v", m.Outcome, m.Tools, want)
	}
	var found bool
	for _, it := range e.itemsOfType(alias, agent.ItemStatus) {
		if m := meta(t, it); m.Status["token"] == "no_progress" {
			found = strings.Contains(it.Content[0].Text, s.deniedPath) && strings.Contains(it.Content[0].Text, "worker rule 1")
		}
	}
	if !found {
		t.Errorf("no no_progress status naming the call and the rule: %v", e.itemTypes(alias))
	}
	if exists(s.deniedPath) {
		t.Errorf("%s was written", s.deniedPath)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
}

func TestE2EClaudeEveryCallDeniedNoProgress(t *testing.T) {
	e := newClaudeE2E(t)
	s := newGuardedScenario(e.e2eEnv, claudeType, func() int { return len(e.model.Requests()) })
	e.model.Push(claudetest.Tool("Write", map[string]any{"file_path": s.deniedPath, "content": "no\n"}),
		claudetest.Text("I could not write it"))
	checkNoProgress(t, e.e2eEnv, s, "projects/p1/claude-noprogress")
}

func TestE2ECodexEveryCallDeniedNoProgress(t *testing.T) {
	e := newCodexE2E(t)
	e.excludeTmpFromSandbox()
	s := newGuardedScenario(e.e2eEnv, codexType, func() int { return len(e.model.Requests()) })
	e.model.Push(codextest.Patch(codextest.AddFile(s.deniedPath, "no")), codextest.Say("I could not write it"))
	checkNoProgress(t, e.e2eEnv, s, "projects/p1/codex-noprogress")
}
