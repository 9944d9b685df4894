package agenttest

import (
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
	"github.com/blobhub/bhw-run/policy"
)

// Type is the test agent's agent.type.
const Type = "test_agent"

// Agent is the test agent, a third adapter that only tests register: the
// scripted fake of this package, driven over its JSON-RPC protocol. Its
// executable is the test binary itself, whose TestMain calls MaybeRunFake,
// and its script is named by ScriptEnv in the agent's environment (which
// passes the allowlist: its prefix AGENTTEST_ is the agent's own).
type Agent struct {
	Type          string // default Type
	HostSessionID bool   // the host picks the session id, as for Claude
}

// Options are the test agent's own keys under agents.<type>.
type Options struct {
	// Args are extra arguments, appended after extra_args.
	Args []string `yaml:"args"`
}

// Adapter is the test agent's descriptor.
func (a Agent) Adapter() agent.Adapter {
	typ := a.Type
	if typ == "" {
		typ = Type
	}
	return agent.Adapter{
		Type:          typ,
		Executable:    "bhw-test-agent",
		HomeEnv:       "AGENTTEST_HOME",
		EnvPrefixes:   []string{"AGENTTEST_"},
		HomeDirs:      []string{".agenttest"},
		HostSessionID: a.HostSessionID,
		Describe:      describe,
		Options: func(raw map[string]any) (any, error) {
			var o Options
			if err := agent.DecodeOptions(raw, &o); err != nil {
				return nil, err
			}
			for _, arg := range o.Args {
				if strings.ContainsFunc(arg, func(r rune) bool { return r < 0x20 }) {
					return nil, fmt.Errorf("args: %q holds a control character", arg)
				}
			}
			return o, nil
		},
		Start: agent.StartFunc(Start),
	}
}

// describe names a call of effect as the test agent asks for it.
func describe(effect string, t policy.Target) policy.Call {
	tool := &Tool{Effect: effect, Target: t}
	in, _ := json.Marshal(toolInput(tool))
	return policy.Call{Tool: toolName(tool), Effect: effect, Target: t, Input: in, Kind: policy.KindApproval}
}

// DefaultTurnGrace is how long a cancelled Turn waits for the agent to end
// it after the cancel.
const DefaultTurnGrace = 3 * time.Second

// Session is one live test agent.
type Session struct {
	TurnGrace time.Duration
	// MaxQueued bounds, in bytes, what the agent sent that waits for the
	// running turn (0: jsonrpc.DefaultMaxQueued); tests shrink it.
	MaxQueued int

	l            agent.Launch
	logger       *slog.Logger
	proc.Session // the test agent's process and session id
	rpc          *jsonrpc.Conn

	q *jsonrpc.Queue // updates and permission requests for the running turn

	mu           sync.Mutex
	resumeFailed string
	interrupted  bool
}

// Start starts the test agent and opens its session; a session it cannot
// resume is reported by the first Turn.
func Start(ctx context.Context, l agent.Launch) (*Session, error) {
	s := &Session{TurnGrace: DefaultTurnGrace, l: l, logger: l.Logger, q: jsonrpc.NewQueue()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	args := l.ExtraArgs
	if o, ok := l.Options.(Options); ok {
		args = append(append([]string(nil), args...), o.Args...)
	}
	var err error
	s.Proc, err = proc.Start(proc.Config{Path: l.Executable, Args: args, Dir: l.WorkFolder, Env: l.Env, Log: l.Log,
		MaxLine: l.MaxLine, KillGrace: l.KillGrace, Confine: l.Confine})
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "test agent: start %s: %v", l.Executable, err)
	}
	s.rpc = jsonrpc.NewConn(jsonrpc.Options{Write: s.Proc.WriteLine, Version: true,
		OnRequest: s.push, OnNotification: s.push,
		// A response is queued too, where it stands among the updates: the
		// prompt's answer ends the turn there, and what comes after it is
		// not the turn's.
		OnResponse: func(m jsonrpc.Message) { s.q.Push(m) },
		OnTooLong: func(id jsonrpc.ID, _ string) {
			_ = s.rpc.Reply(id, map[string]string{"action": "deny", "message": "bhw-run: request too large to read"})
		},
		Logf: s.Proc.Logf})
	go func() {
		for line := range s.Proc.Lines() {
			if line.Over > 0 {
				s.rpc.ReceiveTooLong(line.Data)
				continue
			}
			s.rpc.Receive(line.Data)
		}
		s.rpc.Close(fmt.Errorf("the test agent exited (%s)", s.Proc.ExitStatus(time.Second)))
	}()
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.rpc.Call(ictx, "initialize", map[string]any{"session_id": l.SessionID, "resume": l.Resume})
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr) && rpcErr.Code == codeNoSession && l.Resume:
		s.SetSessionID(l.SessionID)
		s.resumeFailed = rpcErr.Message
	case err != nil:
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "the test agent did not start: %v%s", err, s.Proc.StderrTail())
	default:
		var r struct {
			SessionID string            `json:"session_id"`
			Env       map[string]string `json:"env"`
		}
		_ = json.Unmarshal(res, &r)
		s.SetSessionID(r.SessionID)
		s.Proc.Logf("session %s, env %v", r.SessionID, r.Env)
	}
	return s, nil
}

// push queues an update or a permission request for the running turn; a
// request that comes between turns is denied (fail closed).
func (s *Session) push(m jsonrpc.Message) {
	if !s.q.Push(m) && m.Kind == jsonrpc.Request {
		_ = s.rpc.Reply(m.ID, map[string]string{"action": "deny", "message": "no turn is running"})
	}
}

// Interrupt asks the agent to end the turn; one that does not take the
// cancel within the process's interrupt bound is stopped.
func (s *Session) Interrupt() error {
	s.Proc.Interrupting()
	s.mu.Lock()
	s.interrupted = true
	s.mu.Unlock()
	return s.rpc.Notify("cancel", nil)
}

// Close ends the process (stdin, SIGTERM, SIGKILL).
func (s *Session) Close(ctx context.Context) error { return s.Proc.Close(ctx) }

// Turn sends message and relays the turn through h until the agent
// answers the prompt, dies, or ctx ends.
func (s *Session) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	start := time.Now()
	s.mu.Lock()
	failed := s.resumeFailed
	s.interrupted = false
	s.mu.Unlock()
	if failed != "" {
		return agent.TurnResult{Outcome: agent.TurnFailed, ErrorText: failed, ResumeFailed: true}, nil
	}
	t := &testTurn{s: s, h: h}
	s.q.SetMax(s.MaxQueued)
	s.q.SetOpen(true)
	defer func() {
		// Nothing may be left waiting on us: a request that came after the
		// end is denied.
		for _, m := range s.q.SetOpen(false) {
			t.afterEnd(m)
		}
	}()
	id, _, err := s.rpc.Go("prompt", map[string]string{"message": message})
	if err != nil {
		return agent.TurnResult{}, s.crashed("writing to the agent: " + err.Error())
	}
	// The answer comes through the queue (OnResponse), after what the agent
	// sent before it: drain sees it in order.
	t.promptID = id
	var grace <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case <-s.q.Ready():
			t.drain()
		case <-s.rpc.Done():
			t.drain()
			if t.ended != nil {
				break
			}
			if ctx.Err() != nil {
				return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
			}
			s.mu.Lock()
			interrupted := s.interrupted
			s.mu.Unlock()
			if err := s.Proc.NotReading(); err != nil && !interrupted {
				return agent.TurnResult{}, s.crashed(err.Error())
			}
			if interrupted || s.Proc.StdinClosed() {
				return agent.TurnResult{Outcome: agent.TurnInterrupted}, nil
			}
			return agent.TurnResult{}, s.crashed("the test agent ended before its turn did")
		case <-ctxDone:
			ctxDone = nil
			_ = s.Interrupt()
			timer := time.NewTimer(s.TurnGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
		}
		if t.ended != nil {
			r := t.result(*t.ended, time.Since(start))
			if grace != nil {
				return r, ctx.Err()
			}
			return r, nil
		}
		if err := s.q.Full(); err != nil {
			return agent.TurnResult{Outcome: agent.TurnFailed}, agent.Overrun("the test agent", err)
		}
	}
}

func (s *Session) crashed(what string) error {
	return agent.Errorf(agent.CodeAgentCrashed, "%s (%s)%s", what, s.Proc.ExitStatus(time.Second), s.Proc.StderrTail())
}

// testTurn is the state of one Turn.
type testTurn struct {
	s        *Session
	h        agent.Handler
	parked   bool
	parkedID string // the call the gate parked

	promptID jsonrpc.ID
	ended    *jsonrpc.Message // the prompt's answer, once drained: the turn's end
}

// drain handles everything queued, up to the prompt's answer; what the
// agent sent after it is not the turn's (afterEnd).
func (t *testTurn) drain() {
	if m := t.s.q.Drain(t.promptID, t.ended != nil, t.handle, t.afterEnd); m != nil {
		t.ended = m
	}
}

// afterEnd drops what the agent sent once its turn had ended: an update is
// not folded into the ended turn's items, and a request is never judged:
// it is denied, so the agent does not wait on it.
func (t *testTurn) afterEnd(m jsonrpc.Message) {
	switch m.Kind {
	case jsonrpc.Request:
		t.s.Proc.Logf("a %s request (id %s) came after the turn ended: denied, not judged", m.Method, m.ID)
		_ = t.s.rpc.Reply(m.ID, map[string]string{"action": "deny", "message": "the turn has ended"})
	case jsonrpc.Notification:
		t.s.Proc.Logf("a %s came after the turn ended: dropped", m.Method)
	}
}

func (t *testTurn) result(m jsonrpc.Message, d time.Duration) agent.TurnResult {
	var r struct {
		Outcome   string      `json:"outcome"`
		ErrorText string      `json:"error_text"`
		Usage     agent.Usage `json:"usage"`
	}
	if m.Error != nil {
		return agent.TurnResult{Outcome: agent.TurnFailed, ErrorText: m.Error.Message}
	}
	_ = json.Unmarshal(m.Result, &r)
	out := agent.TurnResult{Usage: r.Usage, DurationMS: d.Milliseconds(), NumTurns: 1}
	switch {
	case r.Outcome == "end":
		out.Outcome = agent.TurnCompleted
	case r.Outcome == "failed":
		out.Outcome, out.ErrorText = agent.TurnFailed, r.ErrorText
	case t.parked:
		out.Outcome = agent.TurnParked
	default:
		out.Outcome = agent.TurnInterrupted
	}
	return out
}

func (t *testTurn) handle(m jsonrpc.Message) {
	if m.Kind == jsonrpc.Request {
		t.permission(m)
		return
	}
	if m.Method != "update" {
		return
	}
	var u struct {
		Kind    string          `json:"kind"`
		Text    string          `json:"text"`
		Token   string          `json:"token"`
		ID      string          `json:"id"`
		Tool    string          `json:"tool"`
		Input   json.RawMessage `json:"input"`
		Output  string          `json:"output"`
		IsError bool            `json:"is_error"`
	}
	if err := json.Unmarshal(m.Params, &u); err != nil {
		t.s.Proc.Logf("skipped an update that does not decode: %v", err)
		return
	}
	switch u.Kind {
	case "text":
		t.h.Emit(agent.TextItem(u.Text))
	case "thinking":
		t.h.Emit(agent.ThinkingItem(u.Text))
	case "status":
		t.h.Emit(agent.StatusItem(u.Token, u.Text, nil))
	case "tool_call":
		t.h.Emit(agent.ToolCallItem(u.Tool, u.ID, u.Input, ""))
	case "tool_result":
		if t.parked && u.ID == t.parkedID {
			// What the agent says of the call it stopped at is not its result.
			t.s.Proc.Logf("the parked call's own result, not relayed: %s", u.Output)
			t.h.Emit(agent.ParkedResultItem(u.ID))
			return
		}
		t.h.Emit(agent.ToolResultItem(u.ID, u.Output, u.IsError))
	default:
		t.s.Proc.Logf("skipped an update of unknown kind %q", u.Kind)
	}
}

// permission answers one permission request through the gate.
func (t *testTurn) permission(m jsonrpc.Message) {
	if m.Method != "permission" {
		_ = t.s.rpc.ReplyError(m.ID, jsonrpc.CodeMethodNotFound, "bhw-run does not support "+m.Method)
		return
	}
	var p struct {
		ID        string            `json:"id"`
		Tool      string            `json:"tool"`
		Effect    string            `json:"effect"`
		Input     json.RawMessage   `json:"input"`
		Target    policy.Target     `json:"target"`
		Kind      string            `json:"kind"`
		Questions []policy.Question `json:"questions"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		_ = t.s.rpc.Reply(m.ID, map[string]string{"action": "deny", "message": "bhw-run: request could not be read"})
		return
	}
	c := policy.Call{Tool: p.Tool, Effect: p.Effect, InvocationID: p.ID, Input: p.Input, Target: p.Target,
		Kind: policy.KindApproval, Summary: policy.Summary(p.Tool, p.Target),
		Fingerprint: policy.Fingerprint(map[string]any{"tool": p.Tool, "input": p.Input})}
	if p.Kind == policy.KindAskUserQuestion {
		c.Kind, c.Questions = policy.KindAskUserQuestion, p.Questions
	}
	if t.parked {
		// Only the first call of a parked turn is asked.
		_ = t.s.rpc.Reply(m.ID, map[string]string{"action": "park"})
		return
	}
	v := t.h.Decide(c)
	if c.Kind == policy.KindAskUserQuestion && v.Action == policy.Allow {
		v = policy.Verdict{Action: policy.Park}
	}
	if v.Action == policy.Park {
		t.parked, t.parkedID = true, p.ID
	}
	_ = t.s.rpc.Reply(m.ID, map[string]string{"action": v.Action.String(), "message": v.Message})
}
