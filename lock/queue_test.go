package lock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// queuedSignal makes every waiter report on the returned channel once its ticket is in the queue.
func queuedSignal(t *testing.T) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 64)
	testHookQueued = func() { ch <- struct{}{} }
	t.Cleanup(func() { testHookQueued = nil })
	return ch
}

func waitSlotAsync(ctx context.Context, dir string, maxAgents int, wait time.Duration) <-chan taken[*Slot] {
	return takeAsync(func() (*Slot, error) { return WaitSlot(ctx, dir, maxAgents, wait) })
}

func waitResult(t *testing.T, ch <-chan taken[*Slot]) taken[*Slot] {
	t.Helper()
	return awaitTaken(t, ch, "WaitSlot", (*Slot).Release)
}

func mustTrySlot(t *testing.T, dir string, maxAgents int) *Slot {
	t.Helper()
	s, err := TrySlot(dir, maxAgents)
	if err != nil {
		t.Fatalf("TrySlot: %v", err)
	}
	t.Cleanup(func() { _ = s.Release() })
	return s
}

// queueLen is the number of tickets in the queue of dir.
func queueLen(t *testing.T, dir string) int {
	t.Helper()
	ts, err := slotQueue{dir: filepath.Join(dir, "queue")}.tickets()
	if err != nil {
		t.Fatal(err)
	}
	return len(ts)
}

func TestWaitSlotFreeAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	s, err := WaitSlot(context.Background(), dir, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if s.Index() != 0 || s.Waited() != 0 {
		t.Errorf("slot %d waited %v, want slot 0 taken at once", s.Index(), s.Waited())
	}
	if n := queueLen(t, dir); n != 0 {
		t.Errorf("%d tickets left in the queue", n)
	}
	if _, err := WaitSlot(context.Background(), dir, 0, time.Minute); err == nil || errors.Is(err, ErrNoSlot) {
		t.Fatalf("max_agents 0: err = %v, want a configuration error", err)
	}
}

// TestWaitSlotArrivalOrder: waiters that queued one after the other take the only slot in that
// order, each as the one before releases it.
func TestWaitSlotArrivalOrder(t *testing.T) {
	fastPolling(t)
	dir := filepath.Join(t.TempDir(), "slots")
	first := mustTrySlot(t, dir, 1)
	queued := queuedSignal(t)
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			s, err := WaitSlot(context.Background(), dir, 1, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if s.Waited() <= 0 {
				t.Errorf("waiter %d: Waited() = %v after queueing", i, s.Waited())
			}
			_ = s.Release()
		})
		<-queued // the next waiter arrives after this one is in the queue
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("the slot went to the waiters in the order %v, want their arrival order", order)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters got the slot", len(order), waiters)
	}
	if n := queueLen(t, dir); n != 0 {
		t.Errorf("%d tickets left in the queue", n)
	}
}

// TestWaitSlotNoWaitStaysBehindTheQueue: a run that does not wait never takes a freed slot from a
// waiter queued before it, even while that waiter sleeps.
func TestWaitSlotNoWaitStaysBehindTheQueue(t *testing.T) {
	fastPolling(t)
	headPollInterval, queuePollInterval = time.Hour, time.Hour // the waiter looks once, then sleeps
	dir := filepath.Join(t.TempDir(), "slots")
	first := mustTrySlot(t, dir, 1)
	looked := make(chan struct{}, 64)
	testHookLooked = func() { looked <- struct{}{} }
	t.Cleanup(func() { testHookLooked = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := waitSlotAsync(ctx, dir, 1, time.Hour)
	<-looked // queued, found the slot held, and now asleep for an hour
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if s, err := WaitSlot(context.Background(), dir, 1, 0); !errors.Is(err, ErrNoSlot) {
		if s != nil {
			_ = s.Release()
		}
		t.Fatalf("with a waiter ahead: WaitSlot(0) = %v, want ErrNoSlot", err)
	}
	// The slot is free all the same: only the queue kept it.
	free := mustTrySlot(t, dir, 1)
	_ = free.Release()

	cancel()
	if r := waitResult(t, done); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", r.err)
	}
	if n := queueLen(t, dir); n != 0 {
		t.Fatalf("the cancelled waiter left %d tickets", n)
	}
	s, err := WaitSlot(context.Background(), dir, 1, 0)
	if err != nil {
		t.Fatalf("with the queue empty again: %v", err)
	}
	_ = s.Release()
}

func TestWaitSlotWaitElapses(t *testing.T) {
	fastPolling(t)
	dir := filepath.Join(t.TempDir(), "slots")
	mustTrySlot(t, dir, 1)
	queued := queuedSignal(t)
	start := time.Now()
	if _, err := WaitSlot(context.Background(), dir, 1, 20*time.Millisecond); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("err = %v, want ErrNoSlot", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("gave up after %v, before the wait of 20ms", d)
	}
	select {
	case <-queued:
	default:
		t.Error("WaitSlot gave up without queueing")
	}
	if n := queueLen(t, dir); n != 0 {
		t.Errorf("%d tickets left in the queue", n)
	}
}

func TestWaitSlotCancelledContextTakesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := WaitSlot(ctx, dir, 1, time.Minute); !errors.Is(err, context.Canceled) || s != nil {
		t.Fatalf("WaitSlot = %v, %v; want context.Canceled", s, err)
	}
	mustTrySlot(t, dir, 1)
}

// TestWaitSlotsNeverExceedMax: many waiters, each holding its slot a moment, never hold more than
// maxAgents at once, and every one of them gets a slot.
func TestWaitSlotsNeverExceedMax(t *testing.T) {
	fastPolling(t)
	dir := t.TempDir()
	const maxAgents, workers = 3, 24
	var mu sync.Mutex
	holding, peak, got := 0, 0, 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			s, err := WaitSlot(context.Background(), dir, maxAgents, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			holding++
			got++
			peak = max(peak, holding)
			mu.Unlock()
			// Hold it across a few of the others' polls.
			for range 3 {
				_, _ = os.ReadDir(dir)
			}
			mu.Lock()
			holding--
			mu.Unlock()
			_ = s.Release()
		})
	}
	wg.Wait()
	if got != workers || peak > maxAgents {
		t.Fatalf("%d of %d waiters got a slot, at most %d at once; want all, at most %d", got, workers, peak, maxAgents)
	}
	if n := queueLen(t, dir); n != 0 {
		t.Errorf("%d tickets left in the queue", n)
	}
}

// startWaiter re-executes the test binary to wait for the only slot of dir, and returns once
// its ticket is in the queue.
func startWaiter(t *testing.T, dir string) *helper {
	t.Helper()
	return startHelper(t, "wait:"+dir, "queued")
}

// TestWaitSlotAcrossProcesses: two processes queue for the only slot; the first to arrive takes
// it when it is freed, the second when the first lets go.
func TestWaitSlotAcrossProcesses(t *testing.T) {
	fastPolling(t)
	dir := filepath.Join(t.TempDir(), "slots")
	first := mustTrySlot(t, dir, 1)
	a := startWaiter(t, dir)
	b := startWaiter(t, dir)
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-a.lines:
		if line != "locked" {
			t.Fatalf("the first waiter said %q", line)
		}
	case line := <-b.lines:
		t.Fatalf("the second waiter took the slot first (%q)", line)
	case <-time.After(30 * time.Second):
		t.Fatal("no waiter took the freed slot")
	}
	_ = a.stdin.Close()
	select {
	case line := <-b.lines:
		if line != "locked" {
			t.Fatalf("the second waiter said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second waiter did not take the slot the first let go of")
	}
}

// TestWaitSlotWaiterKilled: a waiter killed with SIGKILL leaves its ticket behind, unlocked; the
// waiters behind it are not blocked by it, and it is cleared from the queue.
func TestWaitSlotWaiterKilled(t *testing.T) {
	fastPolling(t)
	dir := filepath.Join(t.TempDir(), "slots")
	first := mustTrySlot(t, dir, 1)
	dead := startWaiter(t, dir)
	queued := queuedSignal(t)
	done := waitSlotAsync(context.Background(), dir, 1, time.Minute)
	<-queued
	if n := queueLen(t, dir); n != 2 {
		t.Fatalf("%d tickets in the queue, want the two waiters'", n)
	}
	killHolder(t, dead.cmd)
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, done); r.err != nil {
		t.Fatalf("the waiter behind a killed one: %v", r.err)
	}
	if n := queueLen(t, dir); n != 0 {
		t.Errorf("%d tickets left in the queue, want the dead one cleared", n)
	}
}
