package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/statefile"
)

// Waiting for an agent slot, in arrival order.
//
// flock(2) gives waiters no order: whichever process polls first after a slot is freed takes it,
// so under a steady stream of runs an early waiter can lose every round. Waiters therefore queue
// on the file system, next to the slots:
//
//	slots/queue.lock            a short lock around the queue's changes
//	slots/queue/<seq>.ticket    one per waiting process, flock-held by it while it waits
//
// A waiter takes the next sequence number and creates and locks its ticket under queue.lock; only
// the waiter whose ticket is the lowest live one (the head) tries the slots. A ticket whose lock is
// free belongs to a process that died (kill -9 included, since the kernel drops flock locks with
// the process): whoever finds it removes it, under queue.lock, so it never blocks the queue.
// Unlike the other lock files, tickets are deleted: each is locked only by the process that
// created it, which locked it before anyone could see it (under queue.lock), and a stale one is
// removed only under queue.lock after probing it again, so nobody ever waits on a deleted inode.

// Intervals of the slot queue; tests shrink them. The head polls the slots: a slot freed while it
// sleeps stays unused until it wakes. The others look whether they have become the head, as often:
// the next slot may be freed right after the head took one, and a waiter that learns late that it
// is the head leaves that slot unused as long (with 50 ms here instead of 10, the pass of 1,000
// threads of BenchmarkFanOut with two slots took nearly twice as long). A look costs a read of the
// queue folder and one probe of the ticket ahead.
var (
	headPollInterval  = 10 * time.Millisecond
	queuePollInterval = 10 * time.Millisecond
)

// testHookQueued, when set by a test, is called once a waiter's ticket is in the queue.
var testHookQueued func()

// testHookLooked, when set by a test, is called each time a queued waiter
// has looked for a slot and is about to sleep.
var testHookLooked func()

const ticketSuffix = ".ticket"

// WaitSlot takes a free agent slot as TrySlot does, but waits up to wait for one, behind the
// processes of the same dir that started waiting earlier; wait <= 0 tries once. Either way a
// slot is taken only when no live waiter is ahead, so a process that does not wait never takes a
// slot from one that does. No slot within wait → ErrNoSlot; ctx done first → ctx.Err(), wrapped.
// The waiter's ticket is removed in every case.
func WaitSlot(ctx context.Context, dir string, maxAgents int, wait time.Duration) (*Slot, error) {
	if maxAgents < 1 {
		return nil, fmt.Errorf("agent slots: max_agents is %d, want at least 1", maxAgents)
	}
	start := time.Now()
	q := slotQueue{dir: filepath.Join(dir, "queue"), lock: filepath.Join(dir, "queue.lock")}
	var s *Slot
	var tk *lockFile
	err := withLockEvery(ctx, q.lock, headPollInterval, func() error {
		ahead, next, err := q.scan(nil)
		if err != nil {
			return err
		}
		if !ahead {
			if s, err = TrySlot(dir, maxAgents); !errors.Is(err, ErrNoSlot) {
				return err
			}
		}
		if wait <= 0 {
			return nil
		}
		tk, err = q.enqueue(next)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case s != nil:
		return s, nil
	case tk == nil:
		return nil, ErrNoSlot
	}
	defer q.leave(tk)
	if testHookQueued != nil {
		testHookQueued()
	}
	deadline := start.Add(wait)
	for {
		head, err := q.isHead(ctx, tk)
		if err != nil {
			return nil, err
		}
		sleep := queuePollInterval
		if head {
			s, err := TrySlot(dir, maxAgents)
			if s != nil {
				s.waited = max(time.Since(start), time.Nanosecond) // > 0: it queued
				return s, nil
			}
			if !errors.Is(err, ErrNoSlot) {
				return nil, err
			}
			sleep = headPollInterval
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, ErrNoSlot
		}
		if testHookLooked != nil {
			testHookLooked()
		}
		t := time.NewTimer(min(sleep, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for an agent slot: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// slotQueue is the queue of waiters for the slots of one dir.
type slotQueue struct {
	dir  string // the tickets
	lock string // queue.lock
}

type ticket struct {
	seq  uint64
	path string
}

// tickets lists the queue's tickets in arrival order; a missing queue is empty.
func (q slotQueue) tickets() ([]ticket, error) {
	ents, err := os.ReadDir(q.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent slot queue %s: %w", q.dir, err)
	}
	var out []ticket
	for _, e := range ents {
		num, ok := strings.CutSuffix(e.Name(), ticketSuffix)
		seq, err := strconv.ParseUint(num, 10, 64)
		if !ok || err != nil {
			continue // not ours; never in the way
		}
		out = append(out, ticket{seq: seq, path: filepath.Join(q.dir, e.Name())})
	}
	slices.SortFunc(out, func(a, b ticket) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// scan, under queue.lock, removes the dead tickets ahead of mine (from the front when mine is nil)
// until it meets a live one, and says whether a live one is ahead; next is the sequence number a
// new ticket takes, after every ticket present. A ticket of mine that is gone (removed by hand)
// counts as behind everyone: such a waiter takes no slot and gives up when its wait ends.
func (q slotQueue) scan(mine *lockFile) (ahead bool, next uint64, err error) {
	ts, err := q.tickets()
	if err != nil {
		return false, 0, err
	}
	if len(ts) > 0 {
		next = ts[len(ts)-1].seq + 1
	}
	for _, t := range ts {
		if mine != nil && t.path == mine.Path() {
			return false, next, nil
		}
		held, err := Held(t.path)
		if err != nil {
			return false, 0, err
		}
		if held {
			return true, next, nil
		}
		if err := os.Remove(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, 0, fmt.Errorf("agent slot queue: remove the ticket of a waiter that died: %w", err)
		}
	}
	return mine != nil, next, nil
}

// enqueue creates and locks ticket seq, under queue.lock: nobody can find it unlocked and take it
// for a dead waiter's.
func (q slotQueue) enqueue(seq uint64) (*lockFile, error) {
	if err := os.MkdirAll(q.dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent slot queue: %w", err)
	}
	path := filepath.Join(q.dir, fmt.Sprintf("%020d%s", seq, ticketSuffix))
	fh, err := statefile.Open(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent slot queue: %w", err)
	}
	tk := &lockFile{f: fh, path: path}
	// lock, not tryLock: a waiter probing the new file outside queue.lock may hold it for an
	// instant (Held locks and unlocks at once), and must not make the enqueue fail.
	if err := tk.lock(); err != nil {
		_ = os.Remove(path)
		tk.close()
		return nil, fmt.Errorf("agent slot queue: lock %s: %w", path, err)
	}
	return tk, nil
}

// isHead reports whether no live ticket is ahead of mine. It reads the queue without queue.lock
// (a waiter looks every poll interval, and most of the time the first ticket is alive, which
// needs no lock to see); only a first ticket that looks dead is looked at again, and removed with
// the other dead ones ahead of mine, under it.
func (q slotQueue) isHead(ctx context.Context, mine *lockFile) (bool, error) {
	ts, err := q.tickets()
	if err != nil || len(ts) == 0 {
		// No ticket at all: mine was removed by hand. Nowhere in the queue, take no slot ahead
		// of anyone.
		return false, err
	}
	if ts[0].path == mine.Path() {
		return true, nil
	}
	held, err := Held(ts[0].path)
	if err != nil || held {
		return false, err
	}
	// Dead, or just created and not locked yet: scan decides under the lock.
	var ahead bool
	err = withLockEvery(ctx, q.lock, headPollInterval, func() error {
		ahead, _, err = q.scan(mine)
		return err
	})
	return err == nil && !ahead, err
}

// leave removes my ticket and unlocks it. No queue.lock is needed: nobody else removes a locked
// ticket, and its name is reused only after it is gone.
func (q slotQueue) leave(mine *lockFile) {
	_ = os.Remove(mine.Path())
	_ = mine.close()
}

// withLockEvery is WithLock polling at interval: the queue's lock is held for microseconds, and a
// waiter should not sleep a whole pollInterval behind it.
func withLockEvery(ctx context.Context, path string, interval time.Duration, fn func() error) (err error) {
	f, err := open(path)
	if err != nil {
		return err
	}
	if _, err := tryEvery(ctx, f, -1, interval); err != nil {
		f.close()
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer func() {
		if errUnlock := f.close(); errUnlock != nil {
			err = errors.Join(err, fmt.Errorf("unlock %s: %w", path, errUnlock))
		}
	}()
	return fn()
}
