package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/statefile"
)

// Timing defaults; a Session copies them so tests can shorten them.
const (
	// DefaultStdinGrace is how long Close waits after closing stdin before
	// SIGTERM to the group: Copilot takes ~2 s to exit mid-command, and
	// OpenCode needs stdin closed first (a group SIGTERM leaves its running
	// shell behind, in a group of its own).
	DefaultStdinGrace = 4 * time.Second
	// DefaultInterruptGrace is how long a cancelled Turn waits for the
	// prompt's answer after session/cancel.
	DefaultInterruptGrace = 5 * time.Second
	// DefaultParkGrace is how long a parked Turn waits for the prompt's
	// answer: the call is refused already, so the turn ends parked anyway.
	DefaultParkGrace = 30 * time.Second
	// DefaultTextIdle is how long the text of a message is held for more
	// chunks: a message ends at the next update of another kind, or at the
	// prompt's answer, but an agent that then waits (on a command, on the
	// model) would otherwise keep it from people until then.
	DefaultTextIdle = time.Second
)

var (
	// startTimeout bounds the handshake and the session's opening: the
	// agents took 0.5–1.6 s to initialize on a quiet machine, 5–15 times
	// that with twenty agents at once.
	startTimeout = 90 * time.Second
	// replayQuiet is how long the replay of a loaded session must be silent
	// before it counts as done, when its last update
	// (available_commands_update on every agent measured) does not come.
	replayQuiet = 300 * time.Millisecond
	// replayMax bounds the wait for the end of a replay.
	replayMax = 10 * time.Second
	// now is the clock the minute rule compares a session's creation with
	// (tests move it on, so a resume need not wait for the minute to turn).
	now = time.Now
)

// Session is one live ACP agent process and its session.
type Session struct {
	// Grace periods, set from the defaults by Start; tests may shorten them
	// before calling Close or Turn.
	StdinGrace, KillGrace, InterruptGrace, ParkGrace, TextIdle time.Duration
	// MaxQueued bounds, in bytes, what the agent sent that waits for the
	// running turn (0: jsonrpc.DefaultMaxQueued); tests shrink it.
	MaxQueued int

	p      *preset
	l      agent.Launch
	logger *slog.Logger
	// The agent's process, and its session id (the resume pointer).
	proc.Session
	rpc *jsonrpc.Conn
	q   *jsonrpc.Queue // updates and requests for the running turn
	cwd string

	mu           sync.Mutex
	resumeFailed string // the load error that means "no such session"
	interrupted  bool
	// takesImages: the agent advertised promptCapabilities.image; images
	// then go with the next prompt (AttachImages).
	takesImages bool
	images      []agent.Image

	// The replay of a loaded session: updates counted while no turn runs.
	replayMu   sync.Mutex
	replaySeen int
	replayEnd  bool // available_commands_update came
	replaySig  chan struct{}
}

// start spawns the agent in l.WorkFolder with the preset's argv and
// environment, writes its settings, runs the handshake and opens the
// session: session/new, or session/load for a resume. A session the agent
// cannot load does not fail the start: the first Turn reports
// ResumeFailed. Any other failure is an *agent.Error with
// AGENT_SPAWN_FAILED, or the context's error when ctx ended.
func start(ctx context.Context, p *preset, l agent.Launch) (*Session, error) {
	env, err := p.environ(l)
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "%s: cannot prepare the agent's home %s: %v", p.typ, l.Home, err)
	}
	if l.Resume && p.loadMinute {
		if err := waitMinute(ctx, l, sessionCreated(l.CacheDir, l.SessionID)); err != nil {
			return nil, err
		}
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cwd := l.WorkFolder
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	s := &Session{
		StdinGrace: DefaultStdinGrace, InterruptGrace: DefaultInterruptGrace, ParkGrace: DefaultParkGrace, TextIdle: DefaultTextIdle,
		p: p, l: l, logger: logger, q: jsonrpc.NewQueue(), cwd: cwd, replaySig: make(chan struct{}, 1),
	}
	args := append(append([]string(nil), p.args...), l.ExtraArgs...)
	s.Proc, err = proc.Start(proc.Config{Path: l.Executable, Args: args, Dir: l.WorkFolder, Env: env, Log: l.Log,
		MaxLine: l.MaxLine, StdinGrace: s.StdinGrace, KillGrace: l.KillGrace, Confine: l.Confine})
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "cannot start %s (%s): %v", l.Executable, p.typ, err)
	}
	s.KillGrace = s.Proc.KillGrace
	s.rpc = jsonrpc.NewConn(jsonrpc.Options{Write: s.Proc.WriteLine, Version: true,
		OnRequest: s.onRequest, OnNotification: s.onNotification, OnTooLong: s.answerUnread, Logf: s.Proc.Logf,
		// A response is queued too, where it stands among the updates: the
		// prompt's answer ends the turn there, and what comes after it is
		// not the turn's.
		OnResponse: func(m jsonrpc.Message) { s.q.Push(m) }})
	go s.readLoop()

	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.open(sctx); err != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), s.StdinGrace+2*s.KillGrace)
		defer ccancel()
		_ = s.Close(cctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not start: %w", p.typ, ctx.Err())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", startTimeout)
		}
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "%s (%s) did not start: %v%s", l.Executable, p.typ, err, s.Proc.StderrTail())
	}
	return s, nil
}

// environ is the agent's environment: the launch's (already filtered by
// run's allowlist) with the variables the preset derives from the home,
// and the home's settings written.
func (p *preset) environ(l agent.Launch) ([]string, error) {
	env := l.Env
	if p.home == nil {
		return env, nil
	}
	if l.Home == "" || !filepath.IsAbs(l.Home) {
		return nil, fmt.Errorf("the %s agent needs an absolute home of its own, got %q", p.typ, l.Home)
	}
	// The home itself is made as its parents allow (they are the machine
	// owner's or the state tree's); inside it, the agent's own, nothing is
	// followed (agent.MkdirIn).
	if err := os.MkdirAll(l.Home, 0o700); err != nil {
		return nil, err
	}
	tmp := filepath.Join(l.Home, "tmp")
	if err := agent.MkdirIn(l.Home, "tmp"); err != nil {
		return nil, err
	}
	vars, err := p.home(homeCtx{dir: l.Home, l: l, opts: l.Options})
	if err != nil {
		return nil, err
	}
	// Its scratch files (Gemini's error reports, shell scratch) stay in the
	// thread's home too.
	return setEnv(env, append([]string{"TMPDIR=" + tmp}, vars...)...), nil
}

// readLoop feeds stdout to the connection until EOF, then closes it with
// how the process ended.
func (s *Session) readLoop() {
	for line := range s.Proc.Lines() {
		if line.Over > 0 {
			s.rpc.ReceiveTooLong(line.Data)
			continue
		}
		s.rpc.Receive(line.Data)
	}
	s.rpc.Close(fmt.Errorf("%s exited (%s)", s.p.typ, s.Proc.ExitStatus(time.Second)))
}

// open runs initialize and session/new or session/load.
func (s *Session) open(ctx context.Context) error {
	// No fs and no terminal capability: the agent then does its own reads,
	// writes and commands, after asking, and bhw-run never does the
	// agent's writes outside the gate.
	init, err := s.rpc.Call(ctx, "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{},
		"clientInfo":         map[string]any{"name": "bhw-run", "title": "bhw-run", "version": "1"},
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var caps struct {
		AgentCapabilities struct {
			PromptCapabilities struct {
				Image bool `json:"image"`
			} `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
	}
	_ = json.Unmarshal(init, &caps)
	s.mu.Lock()
	s.takesImages = caps.AgentCapabilities.PromptCapabilities.Image
	s.mu.Unlock()
	if s.l.Resume {
		return s.load(ctx)
	}
	res, err := s.rpc.Call(ctx, "session/new", map[string]any{"cwd": s.cwd, "mcpServers": []any{}})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(res, &r) != nil || r.SessionID == "" {
		return fmt.Errorf("session/new gave no sessionId: %s", agent.Shorten(string(res), 200))
	}
	s.SetSessionID(r.SessionID)
	if s.p.loadMinute {
		if err := recordCreated(s.l.CacheDir, r.SessionID, time.Now()); err != nil {
			s.logger.Warn("cannot record when the session was created; a resume in that minute may lose it", "agent_session_id", r.SessionID, "error", err)
		}
	}
	return nil
}

// load opens the session to resume and waits for the end of its replay.
// The agent replays the history as session/update notifications that may
// come before and after the load's answer; none of them is relayed (no
// turn runs), and the prompt waits until the replay is over.
func (s *Session) load(ctx context.Context) error {
	s.SetSessionID(s.l.SessionID)
	_, err := s.rpc.Call(ctx, "session/load", map[string]any{"sessionId": s.l.SessionID, "cwd": s.cwd, "mcpServers": []any{}})
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && s.p.noSession(rpcErr) {
		s.mu.Lock()
		s.resumeFailed = errorText(rpcErr)
		s.mu.Unlock()
		s.logger.Info("the agent has no such session; a fresh session is needed", "agent_session_id", s.l.SessionID, "error", rpcErr.Message)
		return nil
	}
	if err != nil {
		return fmt.Errorf("session/load: %w", err)
	}
	s.waitReplay(ctx)
	return nil
}

// waitReplay returns once the replay looks over: its last update
// (available_commands_update) has come, or nothing came for replayQuiet,
// or replayMax passed. What comes later is still not relayed unless a
// prompt has been sent: updates outside a turn are dropped.
func (s *Session) waitReplay(ctx context.Context) {
	deadline := time.NewTimer(replayMax)
	defer deadline.Stop()
	quiet := time.NewTimer(replayQuiet)
	defer quiet.Stop()
	for {
		s.replayMu.Lock()
		end, seen := s.replayEnd, s.replaySeen
		s.replayMu.Unlock()
		if end {
			s.Proc.Logf("replay of session %s: %d updates, ended by available_commands_update", s.l.SessionID, seen)
			return
		}
		select {
		case <-s.replaySig:
			quiet.Reset(replayQuiet)
		case <-quiet.C:
			s.Proc.Logf("replay of session %s: %d updates, then %s of silence", s.l.SessionID, seen, replayQuiet)
			return
		case <-deadline.C:
			s.Proc.Logf("replay of session %s: still going after %s (%d updates); going on", s.l.SessionID, replayMax, seen)
			return
		case <-ctx.Done():
			return
		}
	}
}

// Interrupt asks the agent to end the running prompt (session/cancel); it
// answers the prompt "cancelled". An agent that does not take the cancel
// within the process's interrupt bound is stopped (proc.Interrupting).
func (s *Session) Interrupt() error {
	s.Proc.Interrupting()
	s.mu.Lock()
	s.interrupted = true
	s.mu.Unlock()
	sid := s.SessionID()
	if err := s.rpc.Notify("session/cancel", map[string]any{"sessionId": sid}); err != nil {
		return fmt.Errorf("%s session/cancel: %w", s.p.typ, err)
	}
	return nil
}

// Close ends the process: stdin closed, StdinGrace to exit, then SIGTERM to
// the group (Gemini CLI stays in a running shell call until then), SIGKILL
// after KillGrace. It returns once the process is gone.
func (s *Session) Close(ctx context.Context) error {
	s.Proc.SetGraces(s.StdinGrace, s.KillGrace)
	return s.Proc.Close(ctx)
}

// cancelled is the answer to a permission request that must not run.
var cancelled = map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}

// onRequest takes the agent's requests: permission requests go to the
// running turn (between turns they are cancelled: no gate is there to ask);
// fs writes are acknowledged without writing (OpenCode sends them although
// no fs capability was advertised, and writes the file itself); every
// other request is refused, so the agent never waits on us.
func (s *Session) onRequest(m jsonrpc.Message) {
	switch m.Method {
	case "session/request_permission":
		if !s.q.Push(m) {
			s.Proc.Logf("a permission request came while no turn runs, or past what may wait for it: cancelled")
			s.reply(m.ID, cancelled)
		}
	case "fs/write_text_file":
		s.reply(m.ID, map[string]any{})
	case "fs/read_text_file":
		s.replyError(m.ID, jsonrpc.CodeMethodNotFound, "bhw-run reads no files for the agent (no fs capability was advertised)")
	default:
		s.replyError(m.ID, jsonrpc.CodeMethodNotFound, "bhw-run does not support "+m.Method)
	}
}

// onNotification queues session/updates for the running turn; outside a
// turn they are the replay of a loaded session (or bookkeeping such as the
// command list), counted and dropped.
func (s *Session) onNotification(m jsonrpc.Message) {
	if m.Method != "session/update" || s.q.Push(m) {
		return
	}
	kind, ok := updateKind(m.Params)
	if !ok {
		var p struct {
			Update struct {
				Kind string `json:"sessionUpdate"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &p)
		kind = p.Update.Kind
	}
	s.replayMu.Lock()
	s.replaySeen++
	if kind == "available_commands_update" {
		s.replayEnd = true
	}
	s.replayMu.Unlock()
	select {
	case s.replaySig <- struct{}{}:
	default:
	}
}

// answerUnread answers a request whose line was too long to read: a
// permission request is cancelled (fail closed), anything else refused.
func (s *Session) answerUnread(id jsonrpc.ID, method string) {
	if method == "session/request_permission" {
		s.reply(id, cancelled)
		return
	}
	s.replyError(id, jsonrpc.CodeInvalidRequest, "request too large")
}

func (s *Session) reply(id jsonrpc.ID, result any) {
	if err := s.rpc.Reply(id, result); err != nil {
		s.logger.Warn("acp: cannot answer the agent's request", "id", id.String(), "error", err)
	}
}

func (s *Session) replyError(id jsonrpc.ID, code int64, msg string) {
	if err := s.rpc.ReplyError(id, code, msg); err != nil {
		s.logger.Warn("acp: cannot answer the agent's request", "id", id.String(), "error", err)
	}
}

// sessionsDir holds, in the state tree's cache folder (Launch.CacheDir),
// when each session was created. Not in the agent's home: the agent
// writes there, and could leave a link (which a write would follow), a
// named pipe (which a read would block on) or a huge file in its place.
const sessionsDir = "acp-sessions"

// maxCreatedRecord bounds the read of a creation record (one timestamp).
const maxCreatedRecord = 256

// recordCreated notes when session id was created, for the minute rule.
func recordCreated(cacheDir, id string, at time.Time) error {
	if cacheDir == "" || !safeName(id) {
		return fmt.Errorf("no cache folder or an unusable session id %q", id)
	}
	dir := filepath.Join(cacheDir, sessionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return statefile.WriteAtomic(filepath.Join(dir, id), []byte(at.UTC().Format(time.RFC3339Nano)+"\n"), 0o600)
}

// sessionCreated is when session id was created; zero when unknown.
func sessionCreated(cacheDir, id string) time.Time {
	if cacheDir == "" || !safeName(id) {
		return time.Time{}
	}
	f, err := statefile.Open(filepath.Join(cacheDir, sessionsDir, id), os.O_RDONLY, 0)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCreatedRecord))
	if err != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}
	}
	return t
}

// safeName: id can be a file name (the agents' ids are UUIDs).
func safeName(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	return !strings.ContainsAny(id, "/\\\x00")
}

// waitMinute waits, when the session was created in the current UTC
// minute, for the minute to turn: Gemini CLI names a session's file by its
// creation minute, and a session/load in that minute overwrites the stored
// history. It honours ctx.
func waitMinute(ctx context.Context, l agent.Launch, created time.Time) error {
	if created.IsZero() {
		return nil
	}
	next := created.UTC().Truncate(time.Minute).Add(time.Minute)
	d := next.Sub(now())
	if d <= 0 {
		return nil
	}
	l.Log.Printf(agent.StreamAdapter, "session %s was created at %s: waiting %s for the UTC minute to turn before loading it",
		l.SessionID, created.UTC().Format(time.RFC3339), d.Round(time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the minute to turn before loading session %s: %w", l.SessionID, ctx.Err())
	}
}
