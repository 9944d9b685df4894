package run

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// takeOnlySlot sets max_agents 1 and takes the slot, as another run's agent would.
func (h *harness) takeOnlySlot() *lock.Slot {
	h.t.Helper()
	h.cfg = "concurrency: {max_agents: 1}\n"
	h.writeConfig()
	s, err := lock.TrySlot(filepath.Join(h.state, "slots"), 1)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = s.Release() })
	return s
}

// runAsync runs alias in its own goroutine with SlotWait wait.
func (h *harness) runAsync(alias string, wait time.Duration, sigs chan os.Signal) <-chan *Summary {
	prev := h.tune
	h.tune = func(r *Runner) {
		if prev != nil {
			prev(r)
		}
		r.SlotWait, r.Signals = wait, sigs
	}
	done := make(chan *Summary, 1)
	go func() { done <- h.run(alias) }()
	return done
}

// waitQueued returns once a run's ticket is in the state tree's slot queue.
func (h *harness) waitQueued() {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if m, _ := filepath.Glob(filepath.Join(h.state, "slots", "queue", "*.ticket")); len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatal("no run queued for an agent slot")
		}
		<-tick.C
	}
}

// wroteNothing checks that a pending thread's run has written nothing of
// the thread: no thread.yaml, no journal entry, still pending with only the
// person's message.
func (h *harness) wroteNothing(alias string) {
	h.t.Helper()
	dir := setup.ThreadDir(h.setup().JobDir, alias)
	if _, err := os.Stat(filepath.Join(dir, "thread.yaml")); err == nil {
		h.t.Error("thread.yaml was written")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "emissions.jsonl")); len(b) > 0 {
		h.t.Errorf("the journal holds %q", b)
	}
	if got := h.wireState(alias); got != envelope.StatePending {
		h.t.Errorf("wire %q, want pending", got)
	}
	if got := h.items(alias); !slices.Equal(got, []string{"person"}) {
		h.t.Errorf("items %v, want only the person's", got)
	}
}

// noTicketsLeft checks that no run is left in the slot queue.
func (h *harness) noTicketsLeft() {
	h.t.Helper()
	if m, _ := filepath.Glob(filepath.Join(h.state, "slots", "queue", "*")); len(m) != 0 {
		h.t.Errorf("tickets left in the slot queue: %v", m)
	}
}

func result(t *testing.T, done <-chan *Summary) *Summary {
	t.Helper()
	select {
	case s := <-done:
		return s
	case <-time.After(60 * time.Second):
		t.Fatal("the run is still waiting")
		return nil
	}
}

// treeLog is the section log every run appends to, whatever it did.
var treeLog = filepath.Join("jobs", setup.JobType+"-"+bhtest.SessionID, "logs", "section.log")

// TestSlotWaitTakesTheFreedSlot: with every slot taken, a run with --slot-wait
// waits, writing nothing, and runs its turn once a slot is freed; what a
// person posted meanwhile is delivered in the same turn.
func TestSlotWaitTakesTheFreedSlot(t *testing.T) {
	h := newHarness(t, false)
	const alias = "wait/t"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	slot := h.takeOnlySlot()

	done := h.runAsync(alias, time.Minute, nil)
	h.waitQueued()
	h.wroteNothing(alias)
	h.srv.PersonPost(alias, "and one more thing")
	if err := slot.Release(); err != nil {
		t.Fatal(err)
	}
	want(t, result(t, done), OutcomeTurnCompleted, exit.OK)
	if ids := h.thread(alias).Turn.InboundIDs; len(ids) != 2 {
		t.Fatalf("the turn delivered %v, want both messages", ids)
	}
	h.noTicketsLeft()
}

// TestSlotWaitSeesAStop: a person who stops the thread while its run waits
// for a slot is obeyed: once it has a slot the run looks again and stops
// instead of running a turn.
func TestSlotWaitSeesAStop(t *testing.T) {
	h := newHarness(t, false)
	const alias = "wait/stop"
	h.firstTurn(alias, "start", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}, {{Text: "again"}}}})
	h.srv.PersonPost(alias, "more")
	slot := h.takeOnlySlot()

	done := h.runAsync(alias, time.Minute, nil)
	h.waitQueued()
	o, _ := h.srv.Get(alias)
	v, err := envelope.WithState(o.Value, envelope.StateCompleted)
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Put(alias, string(v))
	_ = slot.Release()
	want(t, result(t, done), OutcomeStopped, exit.OK)
	if n := count(h.items(alias), "turn_end"); n != 1 {
		t.Fatalf("%d turn_end items, want only the first turn's: a stopped thread ran a turn", n)
	}
}

// TestSlotWaitSignal: SIGTERM while waiting for a slot ends the run at once
// with 143, and nothing is written: thread.yaml, the journal and the wire
// are as they were, and the run's ticket is gone from the queue.
func TestSlotWaitSignal(t *testing.T) {
	for _, tc := range []struct {
		sig  os.Signal
		exit int
	}{{syscall.SIGTERM, exit.Terminated}, {syscall.SIGINT, exit.Interrupted}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "wait/sig"
			h.firstTurn(alias, "start", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}, {{Text: "again"}}}})
			h.srv.PersonPost(alias, "more")
			h.takeOnlySlot()
			before := tree(t, h.state)
			yamlBefore, err := os.ReadFile(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			items := len(h.srv.Items(alias))

			sigs := make(chan os.Signal, 1)
			done := h.runAsync(alias, time.Hour, sigs)
			h.waitQueued()
			start := time.Now()
			sigs <- tc.sig
			sum := result(t, done)
			if sum.ExitCode != tc.exit || sum.Outcome != OutcomeInterrupted {
				t.Fatalf("exit %d outcome %q (error %+v), want %d interrupted", sum.ExitCode, sum.Outcome, sum.Error, tc.exit)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the run took %v to end after the signal", d)
			}
			after, _ := os.ReadFile(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml"))
			if string(after) != string(yamlBefore) {
				t.Errorf("thread.yaml changed:\n%s\nwas:\n%s", after, yamlBefore)
			}
			sameTree(t, before, tree(t, h.state), treeLog, "slots/queue", "slots/queue.lock")
			if len(h.srv.Items(alias)) != items {
				t.Error("a run stopped while waiting posted")
			}
			if h.journalOpen(alias) != 0 {
				t.Error("a run stopped while waiting journaled")
			}
			h.noTicketsLeft()
		})
	}
}

// TestSlotWaitElapses: a wait that ends without a slot is 75 NO_AGENT_SLOT
// naming --slot-wait, with nothing written; the next run with a slot runs
// the turn.
func TestSlotWaitElapses(t *testing.T) {
	h := newHarness(t, false)
	const alias = "wait/elapsed"
	h.handOff(alias, "approval", "start")
	slot := h.takeOnlySlot()
	sum := result(t, h.runAsync(alias, 30*time.Millisecond, nil))
	wantCode(t, sum, exit.TempFail, exit.CodeNoSlot)
	if !strings.Contains(sum.Error.Message, "--slot-wait 30ms") {
		t.Errorf("message %q does not name the wait", sum.Error.Message)
	}
	h.wroteNothing(alias)
	_ = slot.Release()
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
}
