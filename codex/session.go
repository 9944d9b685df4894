// Package codex drives `codex app-server` (JSON-RPC over stdio, one JSON
// object per line) for one activation: start or resume a thread, run turns,
// relay items to run and every approval to the gate (SPEC §7.2).
//
// Protocol facts this package relies on were measured on codex 0.171.0
// (agents/codex.md): the server omits "jsonrpc", answers requests out of
// order, and numbers its own requests (approvals) in a separate id space
// starting at 0 per connection; an unanswered approval blocks the turn
// forever, so every server request is answered.
//
// Lines go to Launch.Log as "codex> " (host to agent), "codex< " (agent to
// host) and "codex! " (agent stderr).
package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent"
)

// DefaultMaxLine bounds one protocol line (SPEC §7).
const DefaultMaxLine = 64 << 20

// Timing defaults; a Session copies them so tests can shorten them.
const (
	DefaultStdinGrace     = 2 * time.Second // Close: wait after closing stdin (codex exits in ~30 ms)
	DefaultKillGrace      = 3 * time.Second // Close: wait after SIGTERM before SIGKILL
	DefaultInterruptGrace = 3 * time.Second // Turn: wait for turn/completed after a cancelled ctx
	startTimeout          = 60 * time.Second
)

// Session is one live `codex app-server` process and its thread. It
// satisfies run.Session.
type Session struct {
	// Grace periods, set from the defaults by Start; tests may shorten them
	// before calling Close or Turn.
	StdinGrace     time.Duration
	KillGrace      time.Duration
	InterruptGrace time.Duration

	l      agent.Launch
	logger *slog.Logger
	log    *lineLog
	cmd    *exec.Cmd
	pgid   int

	stdin  *os.File
	stdout *os.File
	stderr *os.File
	wmu    sync.Mutex // serialises writes to stdin

	nextID  atomic.Int64
	pmu     sync.Mutex
	pending map[int64]chan Message

	q        *queue
	readDone chan struct{} // closed when no more lines will be read
	exited   chan struct{} // closed when the process was reaped
	waitErr  error         // valid after exited

	mu           sync.Mutex
	threadID     string
	turnID       string
	stdinClosed  bool
	interrupted  bool
	wantInterupt bool // Interrupt came before the turn id was known
	resumed      bool
	haveTotal    bool
	total        tokenCounts
	resumeFailed string // the "no rollout found" message

	closeOnce sync.Once
}

// Approval methods the gate answers (v2 app-server protocol).
const (
	methodCommandApproval    = "item/commandExecution/requestApproval"
	methodFileChangeApproval = "item/fileChange/requestApproval"
)

// Start spawns `<Executable> app-server` in l.WorkFolder, runs the
// handshake and starts or resumes the thread. A resume of an unknown thread
// does not fail Start: the first Turn reports ResumeFailed. Any other
// failure is an *agent.Error with AGENT_SPAWN_FAILED.
func Start(ctx context.Context, l agent.Launch) (*Session, error) {
	s, err := spawn(l)
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "cannot start %s app-server: %v", l.Executable, err)
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.open(sctx); err != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer ccancel()
		_ = s.Close(cctx)
		var ee *agent.Error
		if errors.As(err, &ee) {
			return nil, ee
		}
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "codex app-server did not start: %v%s", err, s.log.stderrTail())
	}
	return s, nil
}

func spawn(l agent.Launch) (*Session, error) {
	if l.Executable == "" {
		return nil, errors.New("no executable")
	}
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		StdinGrace:     DefaultStdinGrace,
		KillGrace:      DefaultKillGrace,
		InterruptGrace: DefaultInterruptGrace,
		l:              l,
		logger:         logger,
		log:            &lineLog{log: l.Log},
		pending:        map[int64]chan Message{},
		q:              &queue{signal: make(chan struct{}, 1)},
		readDone:       make(chan struct{}),
		exited:         make(chan struct{}),
		resumed:        l.Resume,
	}
	if l.KillGrace > 0 {
		s.KillGrace = l.KillGrace
	}
	// Our own pipes rather than cmd.StdoutPipe: Wait must not close the
	// read ends under the reader, and a grandchild holding stdout open must
	// not keep Wait from returning.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	args := append([]string{"app-server"}, l.ExtraArgs...)
	cmd := exec.Command(l.Executable, args...)
	cmd.Dir = l.WorkFolder
	cmd.Env = l.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// Own process group, so Close can signal the agent and its commands
	// together (SPEC §6.7).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	s.cmd, s.pgid = cmd, cmd.Process.Pid
	s.stdin, s.stdout, s.stderr = inW, outR, errR
	s.logger.Debug("codex app-server started", "pid", s.pgid)

	stderrDone := make(chan struct{})
	go s.drainStderr(stderrDone)
	go s.readLoop()
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
		// A descendant may still hold stdout/stderr open; give the reader a
		// moment to see what the agent wrote, then cut it loose.
		grace, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		select {
		case <-s.readDone:
		case <-grace.Done():
			s.stdout.Close()
		}
		select {
		case <-stderrDone:
		case <-grace.Done():
			s.stderr.Close()
		}
	}()
	return s, nil
}

// open runs the handshake and thread/start or thread/resume.
func (s *Session) open(ctx context.Context) error {
	if _, err := s.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "bhw-run", "title": "bhw-run", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false},
	}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := s.write(map[string]any{"method": "initialized"}); err != nil {
		return fmt.Errorf("initialized: %w", err)
	}
	l := s.l
	params := map[string]any{"cwd": l.WorkFolder}
	if l.Permissions == "autonomous" {
		params["approvalPolicy"] = "never"
		params["sandbox"] = "danger-full-access"
	} else {
		params["approvalPolicy"] = "on-request"
		params["sandbox"] = sandbox(l)
	}
	if l.Model != "" {
		params["model"] = l.Model
	}
	if l.Effort != "" {
		params["config"] = map[string]any{"model_reasoning_effort": l.Effort}
		if l.Resume && l.Model == "" {
			// SPEC §7.2: effort alone on thread/resume drops the persisted model.
			s.logger.Warn("codex resume with an effort but no model; the thread's model may be lost", "agent_session_id", l.SessionID)
		}
	}
	method := "thread/start"
	if l.Resume {
		method = "thread/resume"
		params["threadId"] = l.SessionID
		// Without it the answer carries the whole history and a
		// deprecationNotice (codex.md §6).
		params["excludeTurns"] = true
	}
	res, err := s.call(ctx, method, params)
	if err != nil {
		var rpcErr *RPCError
		if l.Resume && errors.As(err, &rpcErr) && strings.Contains(rpcErr.Message, "no rollout found") {
			s.mu.Lock()
			s.threadID = l.SessionID
			s.resumeFailed = rpcErr.Message
			s.mu.Unlock()
			s.logger.Info("codex thread not found; a fresh session is needed", "agent_session_id", l.SessionID)
			return nil
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	var tr threadResult
	if err := json.Unmarshal(res, &tr); err != nil || tr.Thread.ID == "" {
		return fmt.Errorf("%s: no thread id in %s", method, firstBytes(res, 200))
	}
	s.mu.Lock()
	s.threadID = tr.Thread.ID
	s.mu.Unlock()
	return nil
}

// SessionID is the Codex thread id (the resume pointer).
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threadID
}

// Pgid is the app-server's process group.
func (s *Session) Pgid() int { return s.pgid }

// Interrupt sends turn/interrupt for the running turn. Before the turn id is
// known it is remembered and sent as soon as it is.
func (s *Session) Interrupt() error {
	s.mu.Lock()
	thread, turn := s.threadID, s.turnID
	s.interrupted = true
	if turn == "" {
		s.wantInterupt = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.call(ctx, "turn/interrupt", map[string]any{"threadId": thread, "turnId": turn})
	if err != nil {
		return fmt.Errorf("codex turn/interrupt: %w", err)
	}
	return nil
}

// Close closes the agent's stdin (it exits within ~30 ms and kills its
// commands), then SIGTERMs the process group after StdinGrace and SIGKILLs
// it after KillGrace. It returns once the process is gone.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.stdinClosed = true
		s.mu.Unlock()
		// Not under wmu: a write blocked on an agent that stopped reading
		// holds it, and closing the file is what unblocks that write.
		s.stdin.Close()
		if !s.waitExit(ctx, s.StdinGrace) {
			s.logger.Warn("codex did not exit after stdin closed; sending SIGTERM", "pid", s.pgid)
			_ = syscall.Kill(-s.pgid, syscall.SIGTERM)
			if !s.waitExit(ctx, s.KillGrace) {
				s.logger.Warn("codex did not exit after SIGTERM; sending SIGKILL", "pid", s.pgid)
				_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
			}
		}
	})
	<-s.exited
	// Sweep what is left of the group (commands the agent started in it);
	// ESRCH when it is empty.
	_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	return nil
}

func (s *Session) waitExit(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// --- JSON-RPC plumbing ---

func (s *Session) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.log.log.Line(agent.StreamStdin, b)
	_, err = s.stdin.Write(append(b, '\n'))
	return err
}

// request sends a request and returns the channel its response arrives on.
func (s *Session) request(method string, params any) (int64, chan Message, error) {
	id := s.nextID.Add(1)
	ch := make(chan Message, 1)
	s.pmu.Lock()
	s.pending[id] = ch
	s.pmu.Unlock()
	if err := s.write(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		s.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

func (s *Session) forget(id int64) {
	s.pmu.Lock()
	delete(s.pending, id)
	s.pmu.Unlock()
}

// call sends a request and waits for its result.
func (s *Session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, ch, err := s.request(method, params)
	if err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-s.readDone:
		s.forget(id)
		// The response may have been delivered just before the end.
		select {
		case m := <-ch:
			if m.Error != nil {
				return nil, m.Error
			}
			return m.Result, nil
		default:
		}
		return nil, fmt.Errorf("codex app-server exited (%s)", s.exitStatus())
	case <-ctx.Done():
		s.forget(id)
		return nil, ctx.Err()
	}
}

func (s *Session) respond(id int64, result any) {
	if err := s.write(map[string]any{"id": id, "result": result}); err != nil {
		s.logger.Warn("codex: cannot answer server request", "id", id, "error", err)
	}
}

func (s *Session) respondError(id int64, code int, msg string) {
	if err := s.write(map[string]any{"id": id, "error": map[string]any{"code": code, "message": msg}}); err != nil {
		s.logger.Warn("codex: cannot answer server request", "id", id, "error", err)
	}
}

// exitStatus describes how the process ended, once it has.
func (s *Session) exitStatus() string {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		return "still running"
	}
	if s.waitErr == nil {
		return "exit status 0"
	}
	return s.waitErr.Error()
}

// readLoop reads stdout until EOF: responses go to their callers, approval
// requests and notifications to the running turn, other server requests are
// answered with an error at once.
func (s *Session) readLoop() {
	defer close(s.readDone)
	br := bufio.NewReaderSize(s.stdout, 64<<10)
	for {
		line, prefix, tooLong, err := readLine(br, s.l.MaxLine)
		if tooLong {
			s.log.log.Line(agent.StreamStdout, append(prefix, []byte(" …[line over the limit, skipped]")...))
			s.logger.Warn("codex: line over the limit skipped", "max_line", s.l.MaxLine)
			if id, method, ok := requestInPrefix(prefix); ok {
				s.answerUnread(id, method)
			}
		} else if len(line) > 0 {
			s.log.log.Line(agent.StreamStdout, line)
			s.dispatch(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.logger.Warn("codex: reading stdout", "error", err)
			}
			return
		}
	}
}

// answerUnread answers a server request whose line could not be read, so
// the agent never waits on it: approvals are declined, anything else errors.
func (s *Session) answerUnread(id int64, method string) {
	switch method {
	case methodCommandApproval, methodFileChangeApproval:
		s.respond(id, map[string]any{"decision": "decline"})
	default:
		s.respondError(id, -32603, "request too large")
	}
}

func (s *Session) dispatch(line []byte) {
	m, err := DecodeLine(line)
	if err != nil {
		s.logger.Warn("codex: undecodable line skipped", "error", err)
		return
	}
	switch m.Kind {
	case KindResponse:
		s.pmu.Lock()
		ch := s.pending[m.ID]
		delete(s.pending, m.ID)
		s.pmu.Unlock()
		if ch == nil {
			s.logger.Warn("codex: response to no request", "id", m.ID)
			return
		}
		ch <- m
	case KindRequest:
		switch m.Method {
		case methodCommandApproval, methodFileChangeApproval:
			if !s.q.push(m, true) {
				// No turn is running to put it to the gate: fail closed.
				s.respond(m.ID, map[string]any{"decision": "decline"})
			}
		default:
			s.respondError(m.ID, -32601, "bhw-run does not support "+m.Method)
		}
	case KindNotification:
		if m.Method == "thread/tokenUsage/updated" {
			var n tokenUsageNotification
			if json.Unmarshal(m.Params, &n) == nil && s.ownThread(n.ThreadID) {
				s.mu.Lock()
				s.total, s.haveTotal = n.TokenUsage.Total, true
				s.mu.Unlock()
			}
		}
		s.q.push(m, false)
	}
}

func (s *Session) ownThread(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return id == "" || s.threadID == "" || id == s.threadID
}

func (s *Session) drainStderr(done chan struct{}) {
	defer close(done)
	br := bufio.NewReaderSize(s.stderr, 64<<10)
	for {
		line, prefix, tooLong, err := readLine(br, 1<<20)
		if tooLong {
			line = prefix
		}
		if len(line) > 0 {
			s.log.stderr(line)
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one '\n'-terminated line of at most max bytes. A longer
// line is consumed and dropped; its first 4 KiB come back as prefix.
func readLine(br *bufio.Reader, max int) (line, prefix []byte, tooLong bool, err error) {
	for {
		frag, e := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > max {
				tooLong = true
				prefix = append(line, frag...)
				if len(prefix) > 4096 {
					prefix = prefix[:4096]
				}
				prefix = append([]byte(nil), prefix...)
				line = nil
			} else {
				line = append(line, frag...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		return trimEOL(line), prefix, tooLong, e
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func firstBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// queue hands notifications and approval requests from the reader to the
// running Turn, unbounded so the reader never blocks on the gate. Between
// turns it drops notifications and refuses requests (the reader declines
// them).
type queue struct {
	mu     sync.Mutex
	open   bool
	items  []Message
	signal chan struct{}
}

func (q *queue) push(m Message, isRequest bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open {
		return false
	}
	q.items = append(q.items, m)
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

func (q *queue) take() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

func (q *queue) setOpen(open bool) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open = open
	out := q.items
	q.items = nil
	return out
}

// lineLog copies protocol lines and stderr to Launch.Log and keeps the
// stderr tail.
type lineLog struct {
	log  *agent.Log
	mu   sync.Mutex
	tail []string // last stderr lines, for a failed start
}

func (l *lineLog) stderr(b []byte) {
	l.log.Line(agent.StreamStderr, b)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, string(b))
	if len(l.tail) > 5 {
		l.tail = l.tail[len(l.tail)-5:]
	}
}

func (l *lineLog) stderrTail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tail) == 0 {
		return ""
	}
	return "; stderr: " + strings.Join(l.tail, " | ")
}
