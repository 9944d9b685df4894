package lock

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// ErrNoSlot is returned by TrySlot when every agent slot is held.
var ErrNoSlot = errors.New("no free agent slot")

// Slot is a held agent slot of the state tree (concurrency.max_agents). A run holds it for as long as its agent lives.
type Slot struct {
	lock   *Lock
	index  int
	waited time.Duration // how long WaitSlot queued for it; 0 when it was free at once
}

// TrySlot takes the first free slot among the files dir/0.lock … dir/(maxAgents-1).lock, without
// waiting, and records this process's Holder in it. All slots held → ErrNoSlot. Because each slot
// is an flock, any number of processes sharing dir never hold more than maxAgents slots together.
// TrySlot ignores the processes queued for a slot; runs use WaitSlot, which does not.
func TrySlot(dir string, maxAgents int) (*Slot, error) {
	if maxAgents < 1 {
		return nil, fmt.Errorf("agent slots: max_agents is %d, want at least 1", maxAgents)
	}
	for i := range maxAgents {
		path := filepath.Join(dir, strconv.Itoa(i)+".lock")
		f, err := open(path)
		if err != nil {
			return nil, err
		}
		ok, err := f.tryLock()
		if err != nil {
			f.close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !ok {
			f.close()
			continue
		}
		l, err := held(f, path)
		if err != nil {
			return nil, err
		}
		return &Slot{lock: l, index: i}, nil
	}
	return nil, ErrNoSlot
}

// Release frees the slot; a second call does nothing.
func (s *Slot) Release() error { return s.lock.Unlock() }

// Index is the slot's number N, as in slots/N.lock.
func (s *Slot) Index() int { return s.index }

// Waited is how long WaitSlot queued for the slot: 0 when a slot was free at once.
func (s *Slot) Waited() time.Duration { return s.waited }

// HeldSlots counts the slots of dir/0.lock … dir/(maxAgents-1).lock that a
// process holds right now (bhw-run doctor), taking none: each is probed
// as Held probes a lock. A slot file that does not exist yet is free.
func HeldSlots(dir string, maxAgents int) (int, error) {
	n := 0
	for i := range maxAgents {
		held, err := Held(filepath.Join(dir, strconv.Itoa(i)+".lock"))
		if err != nil {
			return n, err
		}
		if held {
			n++
		}
	}
	return n, nil
}
