// Package claude drives the Claude Code CLI (2.1.332, pinned) for one
// activation: it launches the native binary with stream-json on stdin and
// stdout (SPEC §7.1), relays each turn as thread items, routes every
// permission request through the gate and stops the process group cleanly.
//
// *Session satisfies run.Session (checked in a test: the adapter cannot
// import run).
//
// Log format: every line crossing the agent's stdio goes to Launch.Log,
// prefixed by its stream: "stdout: <line>", "stdin: <line>", "stderr:
// <line>"; adapter notes (skipped lines, exit status) are "bhw: <text>".
package claude

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent"
)

// DefaultMaxLine bounds one line of agent output when Launch.MaxLine is 0.
const DefaultMaxLine = 64 << 20

// Default grace periods of Close and of a cancelled Turn.
const (
	DefaultExitWait  = 2 * time.Second // after closing stdin, before SIGTERM
	DefaultKillGrace = 5 * time.Second // after SIGTERM, before SIGKILL
	DefaultTurnGrace = 3 * time.Second // after an interrupt on ctx cancel, for the result
)

// Session is one live claude process. Its exported grace fields may be
// shortened (tests) before the first Turn or Close.
type Session struct {
	ExitWait  time.Duration
	KillGrace time.Duration
	TurnGrace time.Duration

	l      agent.Launch
	logger *slog.Logger
	cmd    *exec.Cmd
	pgid   int
	cancel context.CancelFunc // fires cmd.Cancel: SIGTERM to the group

	stdin  *os.File
	stdout *os.File

	wmu     sync.Mutex // serialises writes to stdin
	reqSeq  int
	inClose atomic.Bool // stdin closed by us
	closeIn sync.Once

	log *agent.Log

	lines chan []byte   // stdout lines, closed at EOF
	quit  chan struct{} // closed by Close: no Turn will read lines any more
	done  chan struct{} // closed once the process has been waited for
	// set before done is closed
	waitErr error

	stderrDone chan struct{}
	emu        sync.Mutex
	lastStderr string
	anyStderr  bool

	mu          sync.Mutex
	sessionID   string
	sawInit     bool
	interrupted bool
	tools       []string
	closeOnce   sync.Once
	closeErr    error
}

// Start launches the agent and returns once the process is spawned. The
// CLI prints system/init only after the first user message, so Start does
// not wait for it. Launch failures are *agent.Error AGENT_SPAWN_FAILED.
func Start(ctx context.Context, l agent.Launch) (*Session, error) {
	args, env, err := command(l)
	if err != nil {
		return nil, err
	}
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	s := &Session{
		ExitWait: DefaultExitWait, KillGrace: DefaultKillGrace, TurnGrace: DefaultTurnGrace,
		l: l, logger: l.Logger, log: l.Log,
		lines: make(chan []byte), quit: make(chan struct{}), done: make(chan struct{}), stderrDone: make(chan struct{}),
		sessionID: l.SessionID,
	}
	if l.KillGrace > 0 {
		s.KillGrace = l.KillGrace
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}

	// Own pipes (not cmd.StdoutPipe): cmd.Wait then never touches our read
	// ends, so the process can be waited for while a grandchild that kept a
	// copy of stdout holds the pipe open, and reads never race Wait.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: pipe: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: pipe: %v", err)
	}

	// The process context is not the caller's: a cancelled activation must
	// interrupt politely first (SPEC §6.7); Close fires it to SIGTERM.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cmd := exec.CommandContext(pctx, l.Executable, args...)
	cmd.Dir = l.WorkFolder
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// SIGTERM to the whole group, never SIGKILL first: Claude kills its Bash
	// children (own sessions) on SIGTERM, SIGKILL would orphan them.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = s.KillGrace
	s.logf("start: %s %s", l.Executable, strings.Join(args, " "))
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		cancel()
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: start %s: %v", l.Executable, err)
	}
	s.cmd, s.pgid, s.cancel = cmd, cmd.Process.Pid, cancel
	s.stdin, s.stdout = inW, outR
	s.logger.Info("claude started", "pid", s.pgid, "session_id", l.SessionID, "resume", l.Resume)

	go s.drainStderr(errR)
	go s.readStdout()
	go func() {
		err := cmd.Wait()
		<-s.stderrDone
		s.waitErr = err
		s.logf("exit: %v", exitText(err))
		close(s.done)
	}()
	return s, nil
}

// command builds argv and env (SPEC §7.1), refusing unsafe values before
// anything is spawned.
func command(l agent.Launch) (args, env []string, err error) {
	if l.Executable == "" {
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: no executable given")
	}
	args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--permission-prompt-tool", "stdio", "--strict-mcp-config"}
	flag := func(name, value string) error {
		if err := checkValue(name, value); err != nil {
			return err
		}
		args = append(args, "--"+name+"="+value)
		return nil
	}
	if l.SessionID == "" {
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: no session id given")
	}
	name := "session-id"
	if l.Resume {
		name = "resume"
	}
	if err := flag(name, l.SessionID); err != nil {
		return nil, nil, err
	}
	if l.Model != "" {
		if err := flag("model", l.Model); err != nil {
			return nil, nil, err
		}
	}
	if l.Effort != "" {
		if err := flag("effort", l.Effort); err != nil {
			return nil, nil, err
		}
	}
	env = append([]string(nil), l.Env...)
	switch l.Permissions {
	case "autonomous":
		args = append(args, "--permission-mode=bypassPermissions")
		// As root the CLI refuses bypass without it (anthropics/claude-code#3490).
		env = append(env, "IS_SANDBOX=1")
	case "approval", "guarded":
		// No settings file, hook or .mcp.json may approve a call before the
		// gate sees it (settings-and-sandbox.md Q1); CLAUDE.md is passed
		// explicitly below because this drops it too.
		args = append(args, "--permission-mode=default", "--setting-sources=")
	default:
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: unknown permissions %q; want autonomous, guarded or approval", l.Permissions)
	}
	if l.WorkFolder != "" {
		md := filepath.Join(l.WorkFolder, "CLAUDE.md")
		if abs, err := filepath.Abs(md); err == nil {
			md = abs
		}
		if st, err := os.Stat(md); err == nil && st.Mode().IsRegular() {
			if err := flag("append-system-prompt-file", md); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, a := range l.ExtraArgs {
		if hasControl(a) {
			return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: extra argument %q holds a control character; remove it", a)
		}
	}
	args = append(args, l.ExtraArgs...)
	return args, env, nil
}

func checkValue(name, v string) error {
	if strings.HasPrefix(v, "-") {
		return agent.Errorf(agent.CodeAgentSpawnFailed, "claude: --%s value %q starts with '-'; fix the thread's agent settings", name, v)
	}
	if hasControl(v) {
		return agent.Errorf(agent.CodeAgentSpawnFailed, "claude: --%s value %q holds a control character; fix the thread's agent settings", name, v)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// SessionID is the Claude session id: the one given to --session-id or
// --resume, confirmed by system/init.
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// Pgid is the agent's process group (its pid: it is the group leader).
func (s *Session) Pgid() int { return s.pgid }

// Tools is system/init.tools of the last init seen.
func (s *Session) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tools...)
}

// Interrupt asks the CLI to stop the running turn; the turn then ends with
// result error_during_execution (outcome interrupted). Safe from any goroutine.
func (s *Session) Interrupt() error {
	s.mu.Lock()
	s.interrupted = true
	s.mu.Unlock()
	s.wmu.Lock()
	s.reqSeq++
	id := fmt.Sprintf("bhw_req_%d", s.reqSeq)
	s.wmu.Unlock()
	return s.writeJSON(map[string]any{"type": "control_request", "request_id": id,
		"request": map[string]any{"subtype": "interrupt"}})
}

// Close ends the process: close stdin and wait ExitWait, then SIGTERM to the
// group, SIGKILL to the group after KillGrace. It returns once the process
// has exited. A ctx that ends cuts the waits short (each step escalates at
// once); pass a fresh cleanup context, not the cancelled run context.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *Session) close(ctx context.Context) error {
	s.closeStdin()
	t := time.NewTimer(s.ExitWait)
	defer t.Stop()
	select {
	case <-s.done:
		return s.finish()
	case <-t.C:
	case <-ctx.Done():
	}
	s.logf("still running %v after closing stdin: SIGTERM to group %d", s.ExitWait, s.pgid)
	s.cancel() // cmd.Cancel: SIGTERM to -pgid
	t.Reset(s.KillGrace)
	select {
	case <-s.done:
		return s.finish()
	case <-t.C:
	case <-ctx.Done():
	}
	s.logf("still running %v after SIGTERM: SIGKILL to group %d", s.KillGrace, s.pgid)
	_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	select {
	case <-s.done:
		return s.finish()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish runs once the leader is reaped: anything left in its group is
// killed (a pgid stays allocated while any member lives, so this cannot hit
// a stranger), and the read end of stdout is closed so a grandchild holding
// the write end cannot keep the reader alive.
func (s *Session) finish() error {
	_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	s.cancel()
	close(s.quit)
	s.stdout.Close()
	return nil
}

// closeStdin does not take wmu: a write blocked on an agent that stopped
// reading holds it, and closing the file is what unblocks that write.
func (s *Session) closeStdin() {
	s.closeIn.Do(func() {
		s.inClose.Store(true)
		s.stdin.Close()
		s.logf("stdin closed")
	})
}

func (s *Session) stdinClosed() bool { return s.inClose.Load() }

func (s *Session) writeJSON(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return s.writeLine(b)
}

func (s *Session) writeLine(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.inClose.Load() {
		return errors.New("claude: stdin already closed")
	}
	s.log.Line(agent.StreamStdin, b)
	_, err := s.stdin.Write(append(b[:len(b):len(b)], '\n'))
	return err
}

func (s *Session) logf(format string, args ...any) {
	s.log.Printf(agent.StreamAdapter, format, args...)
}

func (s *Session) drainStderr(r *os.File) {
	defer close(s.stderrDone)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readBounded(br, 1<<20)
		if len(line.data) > 0 || line.over > 0 {
			text := strings.TrimRight(string(line.data), "\r")
			s.log.Line(agent.StreamStderr, []byte(text))
			if strings.TrimSpace(text) != "" {
				s.emu.Lock()
				s.lastStderr, s.anyStderr = text, true
				s.emu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *Session) stderrTail() (string, bool) {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.lastStderr, s.anyStderr
}

// readStdout feeds s.lines; over-long lines are skipped here, and answered
// with a deny when they are a control_request so the CLI never waits.
func (s *Session) readStdout() {
	defer close(s.lines)
	br := bufio.NewReaderSize(s.stdout, 1<<20)
	for {
		line, err := readBounded(br, s.l.MaxLine)
		switch {
		case line.over > 0:
			s.logf("skipped a line of %d bytes (limit %d); it began: %.200s", line.over, s.l.MaxLine, line.data)
			if id, ok := overlongRequestID(line.data); ok {
				s.logf("the skipped line is control_request %s: answering deny", id)
				_ = s.writeJSON(denyResponse(id, "bhw-run: request too large to read"))
			}
		case len(line.data) > 0:
			s.log.Line(agent.StreamStdout, line.data)
			select {
			case s.lines <- line.data:
			case <-s.quit:
				// Closed with no Turn reading (a line after the turn
				// ended): the reader must not stay blocked here.
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.logf("reading stdout: %v", err)
			}
			return
		}
	}
}

type boundedLine struct {
	data []byte // the line (without '\n'), or its first bytes when over
	over int    // total length when the line exceeded max, else 0
}

const overlongKeep = 4 << 10

// readBounded reads one '\n'-terminated line of at most max bytes. A longer
// line is consumed entirely but only its first overlongKeep bytes are kept.
func readBounded(br *bufio.Reader, max int) (boundedLine, error) {
	var buf []byte
	total := 0
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if total <= max+1 {
			buf = append(buf, chunk...)
		} else if len(buf) < overlongKeep {
			buf = append(buf, chunk[:min(len(chunk), overlongKeep-len(buf))]...)
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
			if len(buf) > overlongKeep {
				buf = buf[:overlongKeep]
			}
			return boundedLine{data: buf, over: end}, err
		}
		return boundedLine{data: buf}, err
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
