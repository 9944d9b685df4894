package run

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// runWithSignals runs alias with a signal channel and sends sigs once the
// agent's first text item has been posted (the turn is running): the
// client tells, no polling.
func (h *harness) runWithSignals(alias string, sigs ...os.Signal) *Summary {
	h.t.Helper()
	ch := make(chan os.Signal, len(sigs))
	prev := h.tune
	h.tune = func(r *Runner) {
		if prev != nil {
			prev(r)
		}
		r.Signals = ch
		r.Client = &onText{Client: r.Client, do: func() {
			for _, s := range sigs {
				ch <- s
			}
		}}
	}
	return h.run(alias)
}

// TestSIGINTMidTurn: the first SIGINT interrupts the agent politely,
// saves turn.state interrupted and exits 130; the next run resumes it.
func TestSIGINTMidTurn(t *testing.T) {
	h := newHarness(t, false)
	const alias = "signal/int"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "working"}, {WaitInterrupt: true}}}})
	var pgids []int
	h.recordPgid(&pgids)
	sum := h.runWithSignals(alias, os.Interrupt)
	if sum.ExitCode != exit.Interrupted || sum.Outcome != OutcomeInterrupted {
		t.Fatalf("exit %d outcome %q, want 130 interrupted", sum.ExitCode, sum.Outcome)
	}
	th := h.thread(alias)
	if th.Turn.State != envelope.TurnStateInterrupted || th.Agent.Process != nil {
		t.Fatalf("turn %q process %v", th.Turn.State, th.Agent.Process)
	}
	if len(pgids) != 1 || proc.GroupAlive(pgids[0]) {
		t.Fatalf("agent groups %v alive", pgids)
	}
	h.runner, h.tune = nil, nil
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "resumed"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.noneTwice(alias)
}

// TestSecondSignalSkipsPoliteness: an agent that ignores SIGTERM and a
// grace of ten minutes: the second SIGTERM kills the group at once, and
// the run still saves its state and exits 143.
func TestSecondSignalSkipsPoliteness(t *testing.T) {
	h := newHarness(t, false)
	const alias = "signal/twice"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{IgnoreSIGTERM: true, Turns: [][]agenttest.Step{{{Text: "working"}, {Hang: true}}}})
	var pgids []int
	h.tune = func(r *Runner) { r.Grace = 10 * time.Minute }
	h.recordPgid(&pgids)
	done := make(chan *Summary, 1)
	go func() { done <- h.runWithSignals(alias, syscall.SIGTERM, syscall.SIGTERM) }()
	var sum *Summary
	select {
	case sum = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the second signal did not end the run (the ten-minute grace was waited)")
	}
	if sum.ExitCode != exit.Terminated {
		t.Fatalf("exit %d, want 143", sum.ExitCode)
	}
	if len(pgids) != 1 || proc.GroupAlive(pgids[0]) {
		t.Fatalf("agent groups %v alive", pgids)
	}
	if th := h.thread(alias); th.Turn.State != envelope.TurnStateInterrupted {
		t.Fatalf("turn %q", th.Turn.State)
	}
}
