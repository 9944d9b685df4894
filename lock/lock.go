// Package lock holds bhw-run's file locks (docs/state.md, the state tree): the per-thread lock
// thread.lock, the section lock section.lock around read-modify-write of section files, and the
// agent slots slots/N.lock of a state tree, with the queue of processes waiting for one
// (queue.go).
//
// Every lock is flock(2) on a descriptor this package opened itself, so the kernel drops it when
// the process dies, even by SIGKILL: there are no stale locks to break. Lock files (all but the
// queue's tickets, see queue.go) are never deleted, because deleting one while another process
// waits on its inode lets two processes hold "the" lock at once. The thread lock and the slots
// record their Holder in the file after locking, so a process that finds them held can say by
// whom. A lock file is opened as every state file is (statefile.Open): never through a link,
// never blocking on a named pipe, and only when it is a regular file, so a link at thread.lock
// cannot get another file truncated by the holder's write.
package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blobhub/bhw-run/statefile"
)

// pollInterval is how long a waiter sleeps between two TryLock calls. flock(2) can block in the
// kernel, but a blocked flock cannot be cancelled by a context, so waiters poll instead. Tests
// shrink it.
var pollInterval = 50 * time.Millisecond

// holderReadAttempts and holderReadDelay bound how long a process that found a lock held waits for
// the holder to finish writing its Holder: the holder writes it just after taking the lock, and
// Unlock empties the file, so an empty file usually means "being written right now".
var (
	holderReadAttempts = 3
	holderReadDelay    = 5 * time.Millisecond
)

// maxHolderSize caps what is read from a lock file; a Holder is well under 1 KiB.
const maxHolderSize = 4 << 10

// testHookWaiting, when set by a test, is called once when Acquire or WithLock found the lock
// held and starts to wait, so the test can release or cancel knowing the waiter is waiting.
var testHookWaiting func()

// Holder is who holds a lock, written into the lock file after locking (the file is never deleted).
type Holder struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

func (h Holder) isZero() bool { return h.PID == 0 && h.Host == "" && h.Since.IsZero() }

// HeldError reports a lock that another holder has. Holder is the zero Holder if the lock file
// could not be read or parsed.
type HeldError struct {
	Path   string
	Holder Holder
}

func (e *HeldError) Error() string {
	if e.Holder.isZero() {
		return "locked by another process (holder unknown)"
	}
	host := e.Holder.Host
	if host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("locked by pid %d on host %s since %s",
		e.Holder.PID, host, e.Holder.Since.Format(time.RFC3339))
}

// Lock is a held per-thread lock. Release it with Unlock.
type Lock struct {
	mu   sync.Mutex
	f    *lockFile // nil once unlocked
	path string
}

// lockFile is a lock file held open. flock(2) locks belong to the open file description, so the
// lock lasts exactly as long as f is open, and a second open of the same file (in this process or
// another) contends with it.
type lockFile struct {
	f    *os.File
	path string
}

// Path is the lock file's path.
func (l *lockFile) Path() string { return l.path }

// tryLock takes the exclusive lock without waiting; false when another open file holds it.
func (l *lockFile) tryLock() (bool, error) {
	for {
		err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}

// lock takes the exclusive lock, waiting in the kernel.
func (l *lockFile) lock() error {
	for {
		err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// close releases the lock (if held) with the descriptor.
func (l *lockFile) close() error { return l.f.Close() }

// Acquire takes the per-thread lock at path, creating its parent folders (0700) and the file
// (0600). It tries at once and then every pollInterval until wait has elapsed; wait 0 fails fast.
// On success it writes this process's Holder into the file. If the lock stays held, the error is a
// *HeldError naming the holder; if ctx is done first, the error wraps ctx.Err().
func Acquire(ctx context.Context, path string, wait time.Duration) (*Lock, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	ok, err := tryUntil(ctx, f, wait)
	if err != nil {
		f.close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		f.close()
		return nil, &HeldError{Path: path, Holder: readHolder(path)}
	}
	return held(f, path)
}

// held records this process as the holder of f, which is locked, and wraps it in a Lock. If the
// holder cannot be recorded, the lock is released: a lock whose holder nobody can name is worse
// than an early, clear error (a full disk will break the run's state writes anyway).
func held(f *lockFile, path string) (*Lock, error) {
	if err := writeHolder(f.f); err != nil {
		return nil, errors.Join(fmt.Errorf("lock %s: record holder: %w", path, err), f.close())
	}
	return &Lock{f: f, path: path}, nil
}

// Unlock empties the lock file and releases the lock. The lock is released even when an error is
// returned; a second call does nothing.
func (l *Lock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	// Empty the file while still holding the lock, so the next process that finds the lock held
	// never reads a holder that has left; after a crash the dead holder's record stays until the
	// next holder overwrites it.
	errTrunc := l.f.f.Truncate(0)
	if errTrunc != nil {
		errTrunc = fmt.Errorf("unlock %s: clear holder: %w", l.path, errTrunc)
	}
	errUnlock := l.f.close() // closing the descriptor releases the lock
	if errUnlock != nil {
		errUnlock = fmt.Errorf("unlock %s: %w", l.path, errUnlock)
	}
	l.f = nil
	return errors.Join(errTrunc, errUnlock)
}

// WithLock runs fn under an exclusive lock on path (section.lock), for read-modify-write of
// section files. It waits as long as the lock is held, until ctx is done. No Holder is recorded:
// the lock is held for milliseconds and nobody reports who holds it.
func WithLock(ctx context.Context, path string, fn func() error) error {
	return withLockEvery(ctx, path, pollInterval, fn)
}

// open opens (and creates, 0600) the lock file at path, creating its parent folders (0700). The
// descriptor stays open while the caller tries the lock; closing it releases the lock.
func open(path string) (*lockFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := statefile.Open(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &lockFile{f: f, path: path}, nil
}

// tryUntil calls TryLock until it succeeds, wait has elapsed (wait < 0: never) or ctx is done,
// every pollInterval. It reports whether the lock was taken.
func tryUntil(ctx context.Context, f *lockFile, wait time.Duration) (bool, error) {
	return tryEvery(ctx, f, wait, pollInterval)
}

// tryEvery is tryUntil polling every interval.
func tryEvery(ctx context.Context, f *lockFile, wait, interval time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	deadline := time.Now().Add(wait)
	for first := true; ; first = false {
		ok, err := f.tryLock()
		if ok || err != nil {
			return ok, err
		}
		sleep := interval
		if wait >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return false, nil
			}
			sleep = min(sleep, left)
		}
		if first && testHookWaiting != nil {
			testHookWaiting()
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// writeHolder records this process as the holder in the lock file fh, which the caller has just
// locked. It writes through the locked descriptor itself, truncated and rewritten in place, never
// renamed over: the inode is the lock, and a second open by path could meet another file. No fsync:
// the record only names the holder in a waiter's message, and a crash that could lose it frees the
// lock too.
func writeHolder(fh *os.File) error {
	host, _ := os.Hostname() // an unknown host only makes the message vaguer
	b, err := json.Marshal(Holder{PID: os.Getpid(), Host: host, Since: time.Now().Round(0)})
	if err != nil {
		return err
	}
	if err := fh.Truncate(0); err != nil {
		return err
	}
	_, err = fh.WriteAt(append(b, '\n'), 0)
	return err
}

// readHolder reads the Holder recorded in the lock file at path, or the zero Holder. A file that is
// empty or half-written is read again a few times: the holder may have just taken the lock.
func readHolder(path string) Holder {
	for i := 0; ; i++ {
		if h, ok := readHolderOnce(path); ok || i+1 >= holderReadAttempts {
			return h
		}
		time.Sleep(holderReadDelay)
	}
}

func readHolderOnce(path string) (Holder, bool) {
	fh, err := statefile.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return Holder{}, false
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxHolderSize))
	if err != nil {
		return Holder{}, false
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil || h.isZero() {
		return Holder{}, false
	}
	return h, true
}
