package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// envHold makes the test binary a lock holder instead of running tests: "thread:<path>" takes the
// thread lock at path, "slot:<dir>" takes a slot of dir with max 1, "wait:<dir>" waits for one
// with WaitSlot, printing "queued" once its ticket is in the queue. It prints "locked" and holds
// until stdin closes or it is killed.
const envHold = "BHW_LOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envHold); spec != "" {
		os.Exit(hold(spec))
	}
	os.Exit(m.Run())
}

func hold(spec string) int {
	kind, arg, _ := strings.Cut(spec, ":")
	var err error
	switch kind {
	case "thread":
		_, err = Acquire(context.Background(), arg, 0)
	case "slot":
		_, err = TrySlot(arg, 1)
	case "wait":
		testHookQueued = func() { fmt.Println("queued") }
		_, err = WaitSlot(context.Background(), arg, 1, time.Hour)
	default:
		err = fmt.Errorf("unknown hold kind %q", kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// helper is the test binary re-executed as a holder or a waiter (see envHold).
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // what it prints, line by line; closed at its end
}

// startHelper re-executes the test binary with spec and returns once it has printed first.
func startHelper(t *testing.T, spec, first string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHold+"="+spec)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(h.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			h.lines <- strings.TrimSpace(line)
		}
	}()
	if line := <-h.lines; line != first {
		t.Fatalf("%s said %q, stderr: %s", spec, line, stderr.String())
	}
	return h
}

// startHolder re-executes the test binary as a holder and returns once it holds the lock.
func startHolder(t *testing.T, spec string) *exec.Cmd {
	t.Helper()
	return startHelper(t, spec, "locked").cmd
}

// killHolder kills the holder with SIGKILL, which gives it no chance to unlock, and reaps it.
func killHolder(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // "signal: killed"; once reaped, the kernel has closed its descriptors
}

// fastPolling shrinks the waits for the duration of the test.
func fastPolling(t *testing.T) {
	t.Helper()
	p, a, d, hp, qp := pollInterval, holderReadAttempts, holderReadDelay, headPollInterval, queuePollInterval
	pollInterval, holderReadAttempts, holderReadDelay = 100*time.Microsecond, 2, 100*time.Microsecond
	headPollInterval, queuePollInterval = 100*time.Microsecond, 100*time.Microsecond
	t.Cleanup(func() {
		pollInterval, holderReadAttempts, holderReadDelay, headPollInterval, queuePollInterval = p, a, d, hp, qp
	})
}

// onWaiting makes fn run once a waiter has found the lock held and started to wait.
func onWaiting(t *testing.T, fn func()) {
	t.Helper()
	var once sync.Once
	testHookWaiting = func() { once.Do(fn) }
	t.Cleanup(func() { testHookWaiting = nil })
}

// waitingSignal returns a channel closed once a waiter has found the lock held and started to wait.
func waitingSignal(t *testing.T) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	onWaiting(t, func() { close(ch) })
	return ch
}

// taken is what a call that takes a lock or a slot returned.
type taken[T comparable] struct {
	held T
	err  error
}

// takeAsync runs take in its own goroutine.
func takeAsync[T comparable](take func() (T, error)) <-chan taken[T] {
	ch := make(chan taken[T], 1)
	go func() {
		held, err := take()
		ch <- taken[T]{held, err}
	}()
	return ch
}

// awaitTaken waits for a takeAsync, failing the test if it takes far too
// long; what it took is given back by give when the test ends.
func awaitTaken[T comparable](t *testing.T, ch <-chan taken[T], what string, give func(T) error) taken[T] {
	t.Helper()
	r := await(t, ch, what)
	var none T
	if r.held != none {
		t.Cleanup(func() { _ = give(r.held) })
	}
	return r
}

// acquireAsync runs Acquire in its own goroutine.
func acquireAsync(ctx context.Context, path string, wait time.Duration) <-chan taken[*Lock] {
	return takeAsync(func() (*Lock, error) { return Acquire(ctx, path, wait) })
}

// result waits for an acquireAsync, failing the test if it takes far too long.
func result(t *testing.T, ch <-chan taken[*Lock]) taken[*Lock] {
	t.Helper()
	return awaitTaken(t, ch, "Acquire", (*Lock).Unlock)
}

// await is what ch carries, failing the test if what is waited for takes far too long.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waiting", what)
		var zero T
		return zero
	}
}

// heldLock polls fast and takes a lock file named name in a new folder:
// where the tests of a waiter start.
func heldLock(t *testing.T, name string) (string, *Lock) {
	t.Helper()
	fastPolling(t)
	path := filepath.Join(t.TempDir(), name)
	return path, mustAcquire(t, path)
}

func mustAcquire(t *testing.T, path string) *Lock {
	t.Helper()
	l, err := Acquire(context.Background(), path, 0)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = l.Unlock() })
	return l
}

func heldError(t *testing.T, err error) *HeldError {
	t.Helper()
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("err = %v (%T), want *HeldError", err, err)
	}
	return held
}

func TestAcquireCreatesPrivateFileAndRecordsHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "threads", "a", "b")
	path := filepath.Join(dir, "thread.lock")
	before := time.Now()
	mustAcquire(t, path)
	after := time.Now()

	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	h, ok := readHolderOnce(path)
	if !ok {
		t.Fatal("no holder recorded in the lock file")
	}
	host, _ := os.Hostname()
	if h.PID != os.Getpid() || h.Host != host || h.Since.Before(before.Round(0)) || h.Since.After(after) {
		t.Errorf("holder = %+v, want pid %d host %q since in [%v, %v]", h, os.Getpid(), host, before, after)
	}
}

func TestAcquireHeldInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thread.lock")
	mustAcquire(t, path)

	// A second Acquire opens its own descriptor, and flock locks belong to open file descriptions,
	// so it conflicts with the first even in the same process.
	l, err := Acquire(context.Background(), path, 0)
	if l != nil {
		t.Fatal("second Acquire returned a lock")
	}
	held := heldError(t, err)
	host, _ := os.Hostname()
	if held.Path != path || held.Holder.PID != os.Getpid() || held.Holder.Host != host || held.Holder.Since.IsZero() {
		t.Errorf("HeldError = %+v, want path %s, pid %d, host %q, a since", held, path, os.Getpid(), host)
	}
	want := fmt.Sprintf("locked by pid %d on host %s since %s", os.Getpid(), host, held.Holder.Since.Format(time.RFC3339))
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestAcquireWaitElapses(t *testing.T) {
	path, _ := heldLock(t, "thread.lock")
	waited := false
	onWaiting(t, func() { waited = true })

	_, err := Acquire(context.Background(), path, 5*time.Millisecond)
	heldError(t, err)
	if !waited {
		t.Error("Acquire with a wait gave up without waiting")
	}
}

func TestAcquireWaitsUntilUnlocked(t *testing.T) {
	path, first := heldLock(t, "thread.lock")
	waiting := waitingSignal(t)

	done := acquireAsync(context.Background(), path, time.Minute)
	<-waiting
	if err := first.Unlock(); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if r := result(t, done); r.err != nil {
		t.Fatalf("waiting Acquire: %v", r.err)
	}
	if h, _ := readHolderOnce(path); h.PID != os.Getpid() {
		t.Errorf("holder after the wait = %+v", h)
	}
}

func TestAcquireCancelStopsWaiting(t *testing.T) {
	path, _ := heldLock(t, "thread.lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := waitingSignal(t)

	done := acquireAsync(ctx, path, time.Hour)
	<-waiting
	cancel()
	r := result(t, done)
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", r.err)
	}
	var held *HeldError
	if errors.As(r.err, &held) {
		t.Errorf("a cancelled wait reported %v", held)
	}
}

func TestAcquireCancelledContextTakesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thread.lock")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, path, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	mustAcquire(t, path)
}

func TestAcquireHeldByAnotherProcessUntilKilled(t *testing.T) {
	fastPolling(t)
	path := filepath.Join(t.TempDir(), "threads", "x", "thread.lock")
	cmd := startHolder(t, "thread:"+path)

	_, err := Acquire(context.Background(), path, 0)
	held := heldError(t, err)
	host, _ := os.Hostname()
	if held.Holder.PID != cmd.Process.Pid || held.Holder.Host != host {
		t.Errorf("holder = %+v, want pid %d on %q", held.Holder, cmd.Process.Pid, host)
	}

	// SIGKILL gives the holder no chance to unlock: the kernel releases the lock with its
	// descriptors, and a waiter gets it without anyone breaking a stale lock.
	waiting := waitingSignal(t)
	done := acquireAsync(context.Background(), path, time.Minute)
	<-waiting
	killHolder(t, cmd)
	if r := result(t, done); r.err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", r.err)
	}
	if h, _ := readHolderOnce(path); h.PID != os.Getpid() {
		t.Errorf("holder after takeover = %+v, want pid %d", h, os.Getpid())
	}
}

func TestHeldErrorUnknownHolder(t *testing.T) {
	fastPolling(t)
	path := filepath.Join(t.TempDir(), "thread.lock")
	// A holder that has not written itself down yet (or a file with garbage in it).
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := flock.New(path)
	if ok, err := raw.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock: %v %v", ok, err)
	}
	defer raw.Unlock()

	_, err := Acquire(context.Background(), path, 0)
	held := heldError(t, err)
	if held.Holder != (Holder{}) {
		t.Errorf("holder = %+v, want zero", held.Holder)
	}
	if got, want := err.Error(), "locked by another process (holder unknown)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestUnlockKeepsEmptiedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thread.lock")
	l, err := Acquire(context.Background(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("second Unlock: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("lock file gone after Unlock: %v", err)
	}
	if fi.Size() != 0 {
		t.Errorf("lock file keeps %d bytes of a holder that left", fi.Size())
	}
	mustAcquire(t, path)
}

func TestWithLockSerialisesReadModifyWrite(t *testing.T) {
	fastPolling(t)
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "section.lock")
	counter := filepath.Join(dir, "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				err := WithLock(context.Background(), lockPath, func() error {
					b, err := os.ReadFile(counter)
					if err != nil {
						return err
					}
					n, err := strconv.Atoi(string(b))
					if err != nil {
						return err
					}
					return os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o600)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(counter)
	if got := string(b); got != strconv.Itoa(workers*rounds) {
		t.Errorf("counter = %s, want %d: updates were lost", got, workers*rounds)
	}
}

func TestWithLockReturnsFnErrorAndUnlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "section.lock")
	boom := errors.New("boom")
	if err := WithLock(context.Background(), path, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	mustAcquire(t, path) // free again
}

func TestWithLockCancelWhileHeld(t *testing.T) {
	path, _ := heldLock(t, "section.lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onWaiting(t, cancel)

	ran := false
	err := WithLock(ctx, path, func() error { ran = true; return nil })
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("err = %v, fn ran = %v; want context.Canceled and fn not run", err, ran)
	}
}

func TestSlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	s0, err := TrySlot(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := TrySlot(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Release()
	if s0.Index() != 0 || s1.Index() != 1 {
		t.Errorf("indexes %d, %d; want 0, 1", s0.Index(), s1.Index())
	}
	if h, _ := readHolderOnce(filepath.Join(dir, "1.lock")); h.PID != os.Getpid() {
		t.Errorf("slot holder = %+v, want pid %d", h, os.Getpid())
	}
	if s, err := TrySlot(dir, 2); !errors.Is(err, ErrNoSlot) || s != nil {
		t.Fatalf("third TrySlot = %v, %v; want ErrNoSlot", s, err)
	}
	if err := s0.Release(); err != nil {
		t.Fatal(err)
	}
	s, err := TrySlot(dir, 2)
	if err != nil {
		t.Fatalf("TrySlot after a release: %v", err)
	}
	defer s.Release()
	if s.Index() != 0 {
		t.Errorf("index = %d, want the freed 0", s.Index())
	}
}

func TestTrySlotRejectsNoSlots(t *testing.T) {
	if _, err := TrySlot(t.TempDir(), 0); err == nil || errors.Is(err, ErrNoSlot) {
		t.Fatalf("err = %v, want a configuration error", err)
	}
}

// TestSlotsRaceNeverExceedMax: in each round every worker tries for a slot
// at once, and no one releases until all have tried, so exactly maxAgents of
// them may hold one.
func TestSlotsRaceNeverExceedMax(t *testing.T) {
	dir := t.TempDir()
	const maxAgents, workers, rounds = 3, 16, 40
	for round := range rounds {
		var tried sync.WaitGroup
		tried.Add(workers)
		release := make(chan struct{})
		var got atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				s, err := TrySlot(dir, maxAgents)
				if s != nil {
					got.Add(1)
				}
				tried.Done()
				if err != nil && !errors.Is(err, ErrNoSlot) {
					t.Error(err)
				}
				if s == nil {
					return
				}
				<-release
				if err := s.Release(); err != nil {
					t.Error(err)
				}
			})
		}
		tried.Wait()
		n := got.Load()
		close(release)
		wg.Wait()
		if n != maxAgents {
			t.Fatalf("round %d: %d of %d workers held a slot at once, want exactly %d", round, n, workers, maxAgents)
		}
	}
}

func TestSlotHeldByAnotherProcessUntilKilled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slots")
	cmd := startHolder(t, "slot:"+dir)
	if _, err := TrySlot(dir, 1); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("err = %v, want ErrNoSlot while another process holds the only slot", err)
	}
	killHolder(t, cmd)
	s, err := TrySlot(dir, 1)
	if err != nil {
		t.Fatalf("TrySlot after the holder was killed: %v", err)
	}
	defer s.Release()
}

func TestHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t", "thread.lock")
	if held, err := Held(path); err != nil || held {
		t.Fatalf("missing file: held %v, err %v", held, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the probe created %s: %v", path, err)
	}
	l := mustAcquire(t, path)
	if held, err := Held(path); err != nil || !held {
		t.Fatalf("while locked: held %v, err %v", held, err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if held, err := Held(path); err != nil || held {
		t.Fatalf("after unlock: held %v, err %v", held, err)
	}
	// The probe released what it took: a run can take the lock.
	l = mustAcquire(t, path)
	_ = l.Unlock()
}
