package run

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/exit"
)

// TestFailedResumeResolvesOnce: a thread parked on an ask is approved, and
// the resumed agent cannot find its session (a fresh HOME where the agent
// could not save it). run starts a new session with the same messages;
// the prompt's pending_prompt_resolved was posted by the first attempt and
// must not be posted again by the second: the journal decides.
func TestFailedResumeResolvesOnce(t *testing.T) {
	h := newHarness(t, false)
	const alias = "fresh/resume"
	h.handOff(alias, "approval", "write x")
	target := filepath.Join(h.work, "x")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: agenttest.Write(target)}}}})
	want(t, h.run(alias), OutcomeParked, exit.OK)

	h.srv.PersonPost(alias, "yes")
	h.play(agenttest.Script{ResumeFails: true, Turns: [][]agenttest.Step{{{Text: "done"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	items := h.items(alias)
	if n := count(items, "pending_prompt_resolved"); n != 1 {
		t.Fatalf("%d pending_prompt_resolved items, want 1: %v", n, items)
	}
	if !slices.Contains(items, "status") {
		t.Fatalf("items %v lack the resume_failed status", items)
	}
}

// TestConfinedAgentHomesMade: on a fresh HOME the agent's folders under it
// (~/.claude, ~/.codex, …) do not exist yet; the confinement grants a
// home only if it exists, so each is made, private, before the agent
// starts, and granted writable.
func TestConfinedAgentHomesMade(t *testing.T) {
	h := newHarness(t, false)
	r := &Runner{Setup: h.setup()}
	home := t.TempDir()
	res := &resolved{WorkFolder: h.work, Confined: true, adapter: &testAdapters()[0]}
	res.Home = home
	res.adapter.HomeDirs = []string{".agenttest", ".config/agenttest"}
	rules, _, done, err := r.confinement(res)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for _, d := range res.adapter.HomeDirs {
		p := filepath.Join(home, d)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("the agent's home %s was not made: %v", d, err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
		granted := false
		for _, g := range rules.Paths {
			granted = granted || (g.Write && g.Path == p)
		}
		if !granted {
			t.Errorf("%s is not granted writable: %+v", p, rules.Paths)
		}
	}
}
