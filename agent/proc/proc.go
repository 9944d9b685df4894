// Package proc runs an agent CLI as a child in its own process group with
// its stdio on pipes, the one way every adapter does it: stdout read in
// bounded lines (an over-long line is skipped but its head handed back, so a
// request in it can still be answered), stderr drained with its tail kept
// for error messages, stdin written by a writer of its own that nothing
// waits on (see WriteLine), every line copied to thread.log, and Close =
// stdin closed → SIGTERM to the group → SIGKILL to the group after a
// grace. It also
// holds what run does around an agent: stopping a group left behind, and
// sweeping the descendants a finished agent leaves.
//
// It is a room of its own under agent/ because every adapter and run need
// the same process handling, and the contract in agent stays free of system
// calls. The logic is shared; what differs per system (the subreaper,
// the process table, not being dumpable) is in sys_linux.go and
// sys_darwin.go (docs/design.md lists them).
package proc

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/confine"
)

// Defaults of a Process.
const (
	DefaultMaxLine    = 64 << 20        // one stdout line
	DefaultStdinGrace = 2 * time.Second // Close: after stdin closes, before SIGTERM
	DefaultKillGrace  = 5 * time.Second // Close: after SIGTERM, before SIGKILL
	// drainGrace is how long, once the leader is reaped, the readers get to
	// see the end of stdout and stderr: a grandchild that kept a copy of the
	// pipe would hold them open forever.
	drainGrace = time.Second
	// DefaultWriteTimeout bounds one line's write to stdin: an agent that
	// takes nothing of it for that long has stopped reading, and is
	// stopped. Generous: a node CLI still loading its code under load does
	// not read yet, and a prompt is larger than the pipe holds.
	DefaultWriteTimeout = 2 * time.Minute
	// DefaultInterruptWrite bounds a write once an interrupt has begun: the
	// interrupt itself, or a line it waits behind, that the agent does not
	// take within it is abandoned and the process stopped.
	DefaultInterruptWrite = 2 * time.Second
	// ExitDrain is how long a turn still reads stdout once Done is closed:
	// lines already in the pipe still count, and a grandchild may hold the
	// pipe open, so the turn ends after this short drain.
	ExitDrain = 500 * time.Millisecond
	// maxQueued bounds the bytes of lines waiting for the writer; a single
	// line is always taken. More than this unread is an agent that stopped
	// reading (one flooding requests without reading their answers).
	maxQueued = 16 << 20
	// headKeep is how much of an over-long line is kept.
	headKeep = 4 << 10
	// stderrMaxLine bounds one stderr line; stderrTail lines are kept.
	stderrMaxLine = 1 << 20
	stderrTail    = 5
)

// Config is how to start a process.
type Config struct {
	Path string   // absolute path of the executable
	Args []string // arguments after argv[0]
	Dir  string   // working folder
	Env  []string // complete environment
	Log  *agent.Log
	// MaxLine bounds one stdout line (0: DefaultMaxLine).
	MaxLine int
	// StdinGrace and KillGrace are Close's waits (0: the defaults).
	StdinGrace, KillGrace time.Duration
	// WriteTimeout and InterruptWrite bound the writes to stdin (0: the
	// defaults DefaultWriteTimeout, DefaultInterruptWrite).
	WriteTimeout, InterruptWrite time.Duration
	// Confine, when set, is the Landlock rule set the process and all it
	// starts are held to: it is started through bhw-run's trampoline
	// (confine.Wrap), which confines itself and then execs Path.
	Confine *confine.Rules
}

// ErrNotReading is why the writer gave up: the agent stopped reading its
// stdin. The process is being stopped.
var ErrNotReading = errors.New("the agent stopped reading its input")

// Line is one stdout line without its newline. When the line was longer
// than MaxLine, Over is its length and Data only its first bytes.
type Line struct {
	Data []byte
	Over int
}

// Process is one running agent process and its pipes.
type Process struct {
	// StdinGrace and KillGrace are Close's waits as Start set them; change
	// them with SetGraces (the writer may start a Close of its own).
	StdinGrace, KillGrace time.Duration
	gmu                   sync.Mutex

	log     *agent.Log
	maxLine int
	cmd     *exec.Cmd
	pid     int
	cancel  context.CancelFunc // fires cmd.Cancel: SIGTERM to the group

	stdin  *os.File
	stdout *os.File
	stderr *os.File

	// The writer (writeStdin) owns the writes to stdin; WriteLine queues.
	writeTimeout, interruptWrite time.Duration
	wmu                          sync.Mutex
	queue                        [][]byte  // lines with their newline, oldest first
	queued                       int       // bytes in queue
	writeStart                   time.Time // of the write under way; zero when none is
	interruptAt                  time.Time // when Interrupting was first called
	writeErr                     error     // why writing stopped; nil while it goes on
	wake                         chan struct{}
	stdinShut                    atomic.Bool
	shut                         chan struct{} // closed by CloseStdin
	closeStdin                   sync.Once

	lines    chan Line
	lastLine atomic.Int64  // UnixNano of the last stdout line read; 0 before the first
	quit     chan struct{} // closed by Close: nobody reads lines any more
	readDone chan struct{} // closed when the stdout reader has returned
	errDone  chan struct{} // closed when the stderr drain has returned
	done     chan struct{} // closed once the leader is reaped and stderr drained
	waitErr  error         // set before done is closed

	emu  sync.Mutex
	tail []string // last non-empty stderr lines

	closeOnce sync.Once
	closeErr  error
}

// positiveOr is v, or d where v is zero or negative: a Config field left
// unset takes its default.
func positiveOr[T ~int | ~int64](v, d T) T { return cmp.Or(max(v, 0), d) }

// Start spawns the process in its own group. Its context is not the
// caller's: a cancelled activation must first stop the agent politely, so
// only Close signals it.
func Start(c Config) (*Process, error) {
	if c.Path == "" {
		return nil, errors.New("no executable given")
	}
	p := &Process{
		StdinGrace: positiveOr(c.StdinGrace, DefaultStdinGrace), KillGrace: positiveOr(c.KillGrace, DefaultKillGrace),
		log: c.Log, maxLine: positiveOr(c.MaxLine, DefaultMaxLine),
		writeTimeout: positiveOr(c.WriteTimeout, DefaultWriteTimeout), interruptWrite: positiveOr(c.InterruptWrite, DefaultInterruptWrite),
		wake: make(chan struct{}, 1), shut: make(chan struct{}),
		lines: make(chan Line), quit: make(chan struct{}),
		readDone: make(chan struct{}), errDone: make(chan struct{}), done: make(chan struct{}),
	}
	// Our own pipes, not cmd.StdoutPipe: Wait then never closes our read
	// ends under the readers, and the leader can be waited for while a
	// grandchild holding a copy of stdout keeps the pipe open.
	var files [6]*os.File
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		files[i], files[i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := files[0], files[1], files[2], files[3], files[4], files[5]

	pctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(pctx, c.Path, c.Args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// Its own group, so the agent and the tools it starts are signalled
	// together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// SIGTERM to the whole group, never SIGKILL first: Claude Code stops
	// its Bash children (each in its own session) on SIGTERM, while SIGKILL
	// would orphan them.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	// Bounds Wait after the cancel: the leader is SIGKILLed if it outlives
	// the grace.
	cmd.WaitDelay = p.KillGrace
	p.log.Printf(agent.StreamAdapter, "start: %s", strings.Join(append([]string{c.Path}, c.Args...), " "))
	// Below a supervisor that outlives a kill -9 of bhw-run, confined
	// there when c.Confine is set (supervise_linux.go).
	rules, err := supervised(cmd, c.Confine, p.KillGrace)
	if err != nil {
		cancel()
		closeAll()
		p.log.Printf(agent.StreamAdapter, "start failed: %v", err)
		return nil, err
	}
	if rules != nil {
		defer rules.Close() // the child holds its own copy once started
	}
	if c.Confine != nil {
		p.log.Printf(agent.StreamAdapter, "confined: %d paths granted, the rest refused (docs/security.md)", len(c.Confine.Paths))
	}
	ownMu.Lock() // the reaper must not take this child before cmd.Wait does
	err = cmd.Start()
	if err == nil {
		owned[cmd.Process.Pid] = true
	}
	ownMu.Unlock()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		cancel()
		inW.Close()
		outR.Close()
		errR.Close()
		p.log.Printf(agent.StreamAdapter, "start failed: %v", err)
		return nil, err
	}
	p.cmd, p.pid, p.cancel = cmd, cmd.Process.Pid, cancel
	p.stdin, p.stdout, p.stderr = inW, outR, errR
	go p.readStdout()
	go p.drainStderr()
	go p.writeStdin()
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	ownMu.Lock()
	delete(owned, p.pid)
	ownMu.Unlock()
	deadline := time.Now().Add(drainGrace)
	// The leader is the supervisor, which outlives the agent unless it
	// was killed with it: then the agent may take a moment longer to die.
	for GroupAlive(p.pid) && time.Now().Before(deadline) {
		reapOrphans()
		time.Sleep(5 * time.Millisecond)
	}
	if !within(p.errDone, deadline) {
		p.stderr.Close()
		<-p.errDone
	}
	p.waitErr = err
	p.log.Printf(agent.StreamAdapter, "exit: %s", exitText(err))
	close(p.done)
	if !within(p.readDone, deadline) {
		p.stdout.Close()
	}
}

// within waits for ch until deadline; false when the deadline came first.
func within(ch <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// Pid is the leader's pid, which is also the process group id.
func (p *Process) Pid() int { return p.pid }

// Lines are the stdout lines, in order; the channel is closed at the end
// of stdout (or once Close has run). Lines that nobody reads hold the
// reader back: the agent then blocks on its own writes.
func (p *Process) Lines() <-chan Line { return p.lines }

// LastLine is when the last line of stdout was read (a line over the limit
// too), the zero time before the first.
func (p *Process) LastLine() time.Time {
	if n := p.lastLine.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Done is closed once the process has exited and its stderr is drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitStatus describes how the process ended ("exit status 0", "signal:
// killed"), waiting up to d for it to end; "still running" after that.
func (p *Process) ExitStatus(d time.Duration) string {
	select {
	case <-p.done:
		return exitText(p.waitErr)
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return exitText(p.waitErr)
	case <-t.C:
		return "still running"
	}
}

// Stderr is the last non-empty lines of stderr, oldest first.
func (p *Process) Stderr() []string {
	p.emu.Lock()
	defer p.emu.Unlock()
	return append([]string(nil), p.tail...)
}

// StderrTail is the last lines of the agent's stderr as the end of an
// error message ("; stderr: a | b"), "" when it wrote none.
func (p *Process) StderrTail() string {
	tail := p.Stderr()
	if len(tail) == 0 {
		return ""
	}
	return "; stderr: " + strings.Join(tail, " | ")
}

// Logf writes an adapter note to thread.log.
func (p *Process) Logf(format string, args ...any) {
	p.log.Printf(agent.StreamAdapter, format, args...)
}

// WriteLine queues one line (a newline is added) for stdin and copies it
// to thread.log; it never waits on the agent. A writer of the process's
// own writes the lines in order, each within WriteTimeout (InterruptWrite
// once Interrupting was called): an agent that takes nothing for that
// long, or leaves more than maxQueued bytes unread, has stopped reading,
// and the process is stopped as Close stops it (the lines still queued are
// dropped). It fails once stdin is closed or writing has stopped.
func (p *Process) WriteLine(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	switch {
	case p.writeErr != nil:
		return p.writeErr
	case p.stdinShut.Load():
		return errors.New("stdin already closed")
	case len(p.queue) > 0 && p.queued+len(b) >= maxQueued:
		p.abandonLocked(fmt.Errorf("%w: it left %d bytes unread", ErrNotReading, p.queued))
		return p.writeErr
	}
	p.log.Line(agent.StreamStdin, b)
	line := append(b[:len(b):len(b)], '\n') // a copy: b may be reused
	p.queue = append(p.queue, line)
	p.queued += len(line)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

// Interrupting says an interrupt has begun: from now on each write, the
// one under way included, gets InterruptWrite from now (or from its start)
// to be taken, so an interrupt never waits on an agent that stopped
// reading: it escalates to stopping the process.
func (p *Process) Interrupting() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if !p.interruptAt.IsZero() {
		return
	}
	p.interruptAt = time.Now()
	if !p.writeStart.IsZero() {
		// A deadline set now applies to the write already blocked.
		_ = p.stdin.SetWriteDeadline(p.deadlineLocked(p.writeStart))
	}
}

// NotReading is the error that stopped the writer when the agent stopped
// reading (it wraps ErrNotReading), nil otherwise.
func (p *Process) NotReading() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if errors.Is(p.writeErr, ErrNotReading) {
		return p.writeErr
	}
	return nil
}

// deadlineLocked is the deadline of a write that started at start.
func (p *Process) deadlineLocked(start time.Time) time.Time {
	d := start.Add(p.writeTimeout)
	if !p.interruptAt.IsZero() {
		from := start
		if p.interruptAt.After(from) {
			from = p.interruptAt
		}
		d = minTime(d, from.Add(p.interruptWrite))
	}
	return d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// writeStdin writes the queued lines until stdin is closed or a write
// fails. The pipe is in Go's poller, so a write deadline applies to it and
// closing the file ends a blocked write.
func (p *Process) writeStdin() {
	for {
		p.wmu.Lock()
		for len(p.queue) == 0 && p.writeErr == nil && !p.stdinShut.Load() {
			p.wmu.Unlock()
			select {
			case <-p.wake:
			case <-p.shut:
			}
			p.wmu.Lock()
		}
		if p.writeErr != nil || p.stdinShut.Load() {
			p.queue, p.queued = nil, 0
			p.wmu.Unlock()
			return
		}
		line := p.queue[0]
		p.writeStart = time.Now()
		_ = p.stdin.SetWriteDeadline(p.deadlineLocked(p.writeStart))
		p.wmu.Unlock()

		_, err := p.stdin.Write(line)

		p.wmu.Lock()
		took := time.Since(p.writeStart)
		p.writeStart = time.Time{}
		if len(p.queue) > 0 {
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.queued -= len(line)
		}
		switch {
		case err == nil, p.stdinShut.Load():
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.abandonLocked(fmt.Errorf("%w: a line of %d bytes was not taken within %s", ErrNotReading, len(line), took.Round(time.Millisecond)))
		default:
			// The agent closed its stdin or exited: nothing more reaches it.
			p.writeErr = fmt.Errorf("writing to the agent: %w", err)
			p.queue, p.queued = nil, 0
		}
		p.wmu.Unlock()
	}
}

// abandonLocked stops writing for good with err and stops the process in
// the background, as Close does (stdin closed, SIGTERM to the group,
// SIGKILL after the grace): an agent that does not read cannot be asked
// anything, and whoever waits on it learns of its end from Lines and Done.
func (p *Process) abandonLocked(err error) {
	if p.writeErr != nil {
		return
	}
	p.writeErr = err
	p.log.Printf(agent.StreamAdapter, "%v; %d lines not sent; stopping the agent", err, len(p.queue))
	p.queue, p.queued = nil, 0
	stdinGrace, killGrace := p.graces()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stdinGrace+2*killGrace+drainGrace)
		defer cancel()
		_ = p.Close(ctx)
	}()
}

// CloseStdin closes the agent's stdin. It does not take the write lock: a
// write blocked on an agent that stopped reading holds the writer, and
// closing the file is what unblocks that write.
func (p *Process) CloseStdin() {
	p.closeStdin.Do(func() {
		p.stdinShut.Store(true)
		close(p.shut)
		p.stdin.Close()
		p.log.Printf(agent.StreamAdapter, "stdin closed")
	})
}

// StdinClosed reports whether CloseStdin has run.
func (p *Process) StdinClosed() bool { return p.stdinShut.Load() }

// Kill sends SIGKILL to the whole group at once.
func (p *Process) Kill() { _ = syscall.Kill(-p.pid, syscall.SIGKILL) }

// Close ends the process: stdin is closed and the process gets StdinGrace
// to exit, then the group gets SIGTERM, and SIGKILL after KillGrace. It
// returns once the leader is reaped, having killed what was left of its
// group. A ctx that ends cuts each wait short (the next step follows at
// once); pass a cleanup context, not a cancelled run context.
func (p *Process) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

// SetGraces sets Close's waits.
func (p *Process) SetGraces(stdin, kill time.Duration) {
	p.gmu.Lock()
	defer p.gmu.Unlock()
	p.StdinGrace, p.KillGrace = stdin, kill
}

func (p *Process) graces() (stdin, kill time.Duration) {
	p.gmu.Lock()
	defer p.gmu.Unlock()
	return p.StdinGrace, p.KillGrace
}

func (p *Process) close(ctx context.Context) error {
	// Without a subreaper, what the agent leaves below itself goes to
	// init once it exits, out of SweepDescendants' reach: look now, while
	// it is still below the agent, and stop it once the agent is gone.
	var below []procStat
	if sweepAtClose() {
		below = descendants(procTable(), p.pid)
	}
	stdinGrace, killGrace := p.graces()
	p.CloseStdin()
	if !p.waitDone(ctx, stdinGrace) {
		p.Logf("still running %v after stdin closed: SIGTERM to group %d", stdinGrace, p.pid)
		p.cancel() // cmd.Cancel: SIGTERM to -pid
		if !p.waitDone(ctx, killGrace) {
			p.Logf("still running %v after SIGTERM: SIGKILL to group %d", killGrace, p.pid)
			p.Kill()
			select {
			case <-p.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	// The leader is reaped; what is left of its group (tools it started
	// there) is killed. A group id stays allocated while any member lives,
	// so this cannot hit a stranger.
	p.Kill()
	// The leader is the supervisor: an agent killed with it is an orphan
	// for a moment, a member of the group until its new parent (bhw-run,
	// the subreaper, or init) reaps it.
	for deadline := time.Now().Add(killGrace); GroupAlive(p.pid) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		reapOrphans()
	}
	if len(below) > 0 {
		stopStrays(below, killGrace)
	}
	p.cancel()
	close(p.quit)
	p.stdout.Close()
	return nil
}

func (p *Process) waitDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// readStdout feeds Lines until the end of stdout or Close.
func (p *Process) readStdout() {
	defer close(p.readDone)
	defer close(p.lines)
	br := bufio.NewReaderSize(p.stdout, 64<<10)
	for {
		l, err := ReadLine(br, p.maxLine)
		switch {
		case l.Over > 0:
			p.log.Line(agent.StreamStdout, append(l.Data[:len(l.Data):len(l.Data)], fmt.Sprintf(" …[a line of %d bytes, over the limit of %d, skipped]", l.Over, p.maxLine)...))
		case len(l.Data) > 0:
			p.log.Line(agent.StreamStdout, l.Data)
		}
		if l.Over > 0 || len(l.Data) > 0 {
			p.lastLine.Store(time.Now().UnixNano())
			select {
			case p.lines <- l:
			case <-p.quit:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.Logf("reading stdout: %v", err)
			}
			return
		}
	}
}

func (p *Process) drainStderr() {
	defer close(p.errDone)
	defer p.stderr.Close()
	br := bufio.NewReaderSize(p.stderr, 64<<10)
	for {
		l, err := ReadLine(br, stderrMaxLine)
		if text := strings.TrimRight(string(l.Data), "\r"); len(l.Data) > 0 {
			p.log.Line(agent.StreamStderr, []byte(text))
			if strings.TrimSpace(text) != "" {
				p.emu.Lock()
				p.tail = append(p.tail, text)
				if len(p.tail) > stderrTail {
					p.tail = p.tail[len(p.tail)-stderrTail:]
				}
				p.emu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// ReadLine reads one '\n'-terminated line of at most max bytes (without
// the newline; a trailing '\r' is kept). A longer line is consumed to its
// end but only its first 4 KiB are kept, in Data, with Over set to its
// length. At the end of the stream the last, unterminated line comes back
// with the error.
func ReadLine(br *bufio.Reader, max int) (Line, error) {
	var buf []byte
	total := 0
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if total <= max+1 {
			buf = append(buf, chunk...)
		} else if len(buf) < headKeep {
			buf = append(buf, chunk[:min(len(chunk), headKeep-len(buf))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		end := total
		if err == nil {
			end-- // the '\n'
			if len(buf) > 0 && buf[len(buf)-1] == '\n' {
				buf = buf[:len(buf)-1]
			}
		}
		if end > max {
			if len(buf) > headKeep {
				buf = buf[:headKeep]
			}
			return Line{Data: buf, Over: end}, err
		}
		return Line{Data: buf}, err
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// VersionLine runs cfg's executable with --version (cfg.Args are replaced)
// and returns the first line it prints on stdout, else on stderr. It ends
// the process when ctx is done and then returns ctx's error.
func VersionLine(ctx context.Context, cfg Config) (string, error) {
	cfg.Args = []string{"--version"}
	cfg.MaxLine, cfg.StdinGrace, cfg.KillGrace = 4<<10, time.Second, time.Second
	p, err := Start(cfg)
	if err != nil {
		return "", err
	}
	// The first line, or the end of stdout: not Done, which may come
	// before the line is read.
	var first string
	select {
	case line, ok := <-p.Lines():
		if ok {
			first = strings.TrimSpace(string(line.Data))
		}
	case <-ctx.Done():
	}
	timedOut := ctx.Err()
	_ = p.Close(context.WithoutCancel(ctx))
	status := p.ExitStatus(time.Second)
	switch {
	case timedOut != nil:
		return "", fmt.Errorf("--version did not answer: %w", timedOut)
	case status != "exit status 0":
		return "", fmt.Errorf("--version: %s %s", status, strings.Join(p.Stderr(), " | "))
	case first == "":
		if tail := p.Stderr(); len(tail) > 0 {
			return tail[0], nil
		}
		return "", errors.New("--version printed nothing")
	}
	return first, nil
}
