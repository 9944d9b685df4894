// Package codex drives `codex app-server` (JSON-RPC over stdio, one JSON
// object per line) for one activation: start or resume a thread, run turns,
// relay items to run and every approval to the gate. It exports Adapter, the
// descriptor run knows it by.
//
// Protocol facts this package relies on were measured on codex 0.171.0 (see
// docs/agents.md): the server omits "jsonrpc", answers requests out of
// order, and numbers its own requests (approvals) in a separate id space
// starting at 0 per connection; an unanswered approval blocks the turn
// forever, so every server request is answered.
package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/agent/proc"
)

// Timing defaults; a Session copies them so tests can shorten them.
const (
	DefaultInterruptGrace = 3 * time.Second // Turn: wait for turn/completed after a cancelled ctx
	startTimeout          = 60 * time.Second
)

// Session is one live `codex app-server` process and its thread.
type Session struct {
	// Grace periods, set from the defaults by Start; tests may shorten them
	// before calling Close or Turn.
	StdinGrace     time.Duration
	KillGrace      time.Duration
	InterruptGrace time.Duration
	// MaxQueued bounds, in bytes, what the agent sent that waits for the
	// running turn (0: jsonrpc.DefaultMaxQueued); tests shrink it.
	MaxQueued int

	l      agent.Launch
	logger *slog.Logger
	// The app-server's process, and the Codex thread id (the resume
	// pointer) as the session id.
	proc.Session
	rpc *jsonrpc.Conn

	q *jsonrpc.Queue // approvals and notifications for the running turn

	mu           sync.Mutex
	turnID       string
	interrupted  bool
	wantInterupt bool // Interrupt came before the turn id was known
	resumed      bool
	haveTotal    bool
	total        tokenCounts
	resumeFailed string // the "no rollout found" message
	// images go with the next Turn's message (AttachImages).
	images []agent.Image
}

// AttachImages sends imgs with the next Turn's message as localImage
// inputs, which Codex reads from their paths (agent.ImageTaker).
func (s *Session) AttachImages(imgs []agent.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = imgs
}

// Approval methods the gate answers (v2 app-server protocol).
const (
	methodCommandApproval    = "item/commandExecution/requestApproval"
	methodFileChangeApproval = "item/fileChange/requestApproval"
	// methodPermissionsApproval asks to widen the session's sandbox
	// profile (permissions.go).
	methodPermissionsApproval = "item/permissions/requestApproval"
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
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "codex app-server did not start: %v%s", err, s.Proc.StderrTail())
	}
	return s, nil
}

func spawn(l agent.Launch) (*Session, error) {
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p, err := proc.Start(proc.Config{Path: l.Executable, Args: append([]string{"app-server"}, l.ExtraArgs...),
		Dir: l.WorkFolder, Env: l.Env, Log: l.Log, MaxLine: l.MaxLine, KillGrace: l.KillGrace, Confine: l.Confine})
	if err != nil {
		return nil, err
	}
	s := &Session{
		StdinGrace: p.StdinGrace, KillGrace: p.KillGrace, InterruptGrace: DefaultInterruptGrace,
		l: l, logger: logger, Session: proc.Session{Proc: p},
		q:       jsonrpc.NewQueue(),
		resumed: l.Resume,
	}
	s.rpc = s.conn(p.WriteLine)
	s.logger.Debug("codex app-server started", "pid", p.Pid())
	go s.readLoop()
	return s, nil
}

// conn is the JSON-RPC side of the session, writing with write.
func (s *Session) conn(write func([]byte) error) *jsonrpc.Conn {
	return jsonrpc.NewConn(jsonrpc.Options{
		Write:          write,
		OnRequest:      s.onRequest,
		OnNotification: s.onNotification,
		OnTooLong:      s.answerUnread,
		Logf: func(format string, args ...any) {
			if s.Proc != nil {
				s.Proc.Logf(format, args...)
			}
		},
	})
}

// readLoop feeds stdout to the connection until EOF, then closes it with
// how the process ended. Deltas are skipped undecoded (isDelta).
func (s *Session) readLoop() {
	for line := range s.Proc.Lines() {
		if line.Over > 0 {
			s.logger.Warn("codex: line over the limit skipped", "max_line", line.Over)
			s.rpc.ReceiveTooLong(line.Data)
			continue
		}
		if isDelta(line.Data) {
			continue
		}
		s.rpc.Receive(line.Data)
	}
	s.rpc.Close(fmt.Errorf("codex app-server exited (%s)", s.Proc.ExitStatus(time.Second)))
}

// isDelta reports whether line is one of the notifications Codex streams an
// item's text or output in, piece by piece: a model's tokens, a command's
// output, hundreds in a turn. The item/completed after them carries the
// whole, and thread.log already has each line, so nothing reads them: they
// are skipped without decoding. Codex writes a notification as
// {"method":…,"params":…} and a request with its "id" between the two, so
// only that exact start counts; anything else is decoded as usual. The
// methods are those of codex 0.171.0 (the strings of its binary).
func isDelta(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"method":"`))
	if !ok {
		return false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 || !bytes.HasPrefix(rest[i:], []byte(`","params":`)) {
		return false
	}
	switch string(rest[:i]) {
	case "item/agentMessage/delta", "item/reasoning/summaryTextDelta", "item/reasoning/textDelta",
		"item/commandExecution/outputDelta", "item/fileChange/outputDelta", "item/plan/delta",
		"item/transcript/delta":
		return true
	}
	return false
}

// open runs the handshake and thread/start or thread/resume.
func (s *Session) open(ctx context.Context) error {
	if _, err := s.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "bhw-run", "title": "bhw-run", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false},
	}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := s.rpc.Notify("initialized", nil); err != nil {
		return fmt.Errorf("initialized: %w", err)
	}
	l := s.l
	params := map[string]any{"cwd": l.WorkFolder}
	approval, sandbox := posture(l)
	params["approvalPolicy"], params["sandbox"] = approval, sandbox
	config := sandboxConfig(sandbox)
	if l.Model != "" {
		params["model"] = l.Model
	}
	if l.Effort != "" {
		if config == nil {
			config = map[string]any{}
		}
		config["model_reasoning_effort"] = l.Effort
		if l.Resume && l.Model == "" {
			// Effort alone on thread/resume drops the thread's persisted
			// model (measured on 0.171.0).
			s.logger.Warn("codex resume with an effort but no model; the thread's model may be lost", "agent_session_id", l.SessionID)
		}
	}
	if config != nil {
		params["config"] = config
	}
	method := "thread/start"
	if l.Resume {
		method = "thread/resume"
		params["threadId"] = l.SessionID
		// Without it the answer carries the whole history and a
		// deprecationNotice.
		params["excludeTurns"] = true
	}
	res, err := s.call(ctx, method, params)
	if err != nil {
		var rpcErr *jsonrpc.Error
		if l.Resume && errors.As(err, &rpcErr) && strings.Contains(rpcErr.Message, "no rollout found") {
			s.SetSessionID(l.SessionID)
			s.mu.Lock()
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
	s.SetSessionID(tr.Thread.ID)
	return nil
}

// Interrupt sends turn/interrupt for the running turn. Before the turn id is
// known it is remembered and sent as soon as it is. An agent that does not
// take it within the process's interrupt bound is stopped
// (proc.Interrupting).
func (s *Session) Interrupt() error {
	s.Proc.Interrupting()
	s.mu.Lock()
	thread, turn := s.SessionID(), s.turnID
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
	s.Proc.SetGraces(s.StdinGrace, s.KillGrace)
	return s.Proc.Close(ctx)
}

func (s *Session) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return s.rpc.Call(ctx, method, params)
}

func (s *Session) respond(id jsonrpc.ID, result any) {
	if err := s.rpc.Reply(id, result); err != nil {
		s.logger.Warn("codex: cannot answer server request", "id", id.String(), "error", err)
	}
}

func (s *Session) respondError(id jsonrpc.ID, code int64, msg string) {
	if err := s.rpc.ReplyError(id, code, msg); err != nil {
		s.logger.Warn("codex: cannot answer server request", "id", id.String(), "error", err)
	}
}

// answerUnread answers a server request whose line could not be read, so
// the agent never waits on it: approvals are declined, anything else errors.
func (s *Session) answerUnread(id jsonrpc.ID, method string) {
	switch method {
	case methodCommandApproval, methodFileChangeApproval:
		s.respond(id, map[string]any{"decision": "decline"})
	case methodPermissionsApproval:
		s.respond(id, noPermissions)
	default:
		s.respondError(id, jsonrpc.CodeInternalError, "request too large")
	}
}

// onRequest takes the server's requests: approvals go to the running turn,
// anything else is refused at once.
func (s *Session) onRequest(m jsonrpc.Message) {
	switch m.Method {
	case methodCommandApproval, methodFileChangeApproval, methodPermissionsApproval:
		if !s.q.Push(m) {
			// No turn is running to put it to the gate, or too much waits
			// for it already: fail closed.
			if m.Method == methodPermissionsApproval {
				s.respond(m.ID, noPermissions)
				return
			}
			s.respond(m.ID, map[string]any{"decision": "decline"})
		}
	default:
		s.respondError(m.ID, jsonrpc.CodeMethodNotFound, "bhw-run does not support "+m.Method)
	}
}

func (s *Session) onNotification(m jsonrpc.Message) {
	if m.Method == "thread/tokenUsage/updated" {
		var n tokenUsageNotification
		if json.Unmarshal(m.Params, &n) == nil && s.ownThread(n.ThreadID) {
			s.mu.Lock()
			s.total, s.haveTotal = n.TokenUsage.Total, true
			s.mu.Unlock()
		}
	}
	s.q.Push(m)
}

func (s *Session) ownThread(id string) bool {
	thread := s.SessionID()
	return id == "" || thread == "" || id == thread
}

func firstBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
