package acptest

import (
	"testing"
	"time"
)

// Slots bounds how many real agents a test binary runs at once. An agent
// takes 0.3–0.6 GB and seconds of CPU to start; with twenty started
// together on two cores, their start-up alone outlasted the tests' step
// bounds. Tests that hold a slot while they wait on a clock (Gemini CLI's
// minute rule) should give it back for the wait.
type Slots struct {
	c chan struct{}
}

// NewSlots makes room for n agents at once.
func NewSlots(n int) *Slots {
	return &Slots{c: make(chan struct{}, n)}
}

// Acquire takes a slot. It fails t when none is free within wait: the
// bound is for a test that never gives its slot back, so it should cover
// the whole queue in front (the slots' share of the package's timeout).
func (s *Slots) Acquire(t testing.TB, wait time.Duration) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case s.c <- struct{}{}:
	case <-timer.C:
		t.Fatalf("no agent slot came free within %s (%d agents running); a test keeps its slot, or raise the wait", wait, cap(s.c))
	}
}

// Release gives a slot back.
func (s *Slots) Release() { <-s.c }
