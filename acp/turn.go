package acp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
)

// Texts of the results bhw-run gives calls the agent left open.
const (
	interruptedText = "not finished: the turn was interrupted"
	unfinishedText  = "not finished: the turn ended first"
)

// turn is the state of one Turn.
type turn struct {
	s     *Session
	h     agent.Handler
	sid   string
	start time.Time

	tools   map[string]*toolState
	order   []string // tool call ids in the order first seen
	pending []string // seen, not announced yet (waiting for their arguments)

	// text and thought gather a message's chunks, bounded: a model can
	// stream a message of any length.
	text, thought agent.Gathered
	textMsg       string // the messageId of the buffered text, when the agent gives one

	promptID jsonrpc.ID
	ended    *jsonrpc.Message // the prompt's answer, once drained: the turn's end

	chunkUsage agent.Usage // usage reported per model request (Qwen Code)
	requests   int64       // the model requests chunkUsage sums
	parked     bool
	noticeErr  string // an "Error: " notice (Copilot's failed turn)
}

// AttachImages sends imgs with the next prompt as image blocks when the
// agent advertised that it takes them (agent.ImageTaker); otherwise the
// message's paths are all it gets.
func (s *Session) AttachImages(imgs []agent.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = imgs
}

// Turn sends message as one prompt and relays the turn through h until the
// prompt is answered, the gate parks it, the process ends, or ctx ends.
func (s *Session) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	s.mu.Lock()
	failed, sid := s.resumeFailed, s.SessionID()
	s.interrupted = false
	s.mu.Unlock()
	if failed != "" {
		return agent.TurnResult{Outcome: agent.TurnFailed, ErrorText: failed, ResumeFailed: true}, nil
	}
	t := &turn{s: s, h: h, sid: sid, start: time.Now(), tools: map[string]*toolState{}}
	s.q.SetMax(s.MaxQueued)
	s.q.SetOpen(true)
	defer func() {
		// Nothing may be left waiting on us: a request that came after the
		// end is cancelled.
		for _, m := range s.q.SetOpen(false) {
			t.afterEnd(m)
		}
	}()
	prompt := []any{map[string]any{"type": "text", "text": message}}
	s.mu.Lock()
	if s.takesImages {
		for _, img := range s.images {
			prompt = append(prompt, map[string]any{"type": "image", "mimeType": img.MediaType, "data": base64.StdEncoding.EncodeToString(img.Data)})
		}
	}
	s.images = nil
	s.mu.Unlock()
	id, _, err := s.rpc.Go("session/prompt", map[string]any{"sessionId": sid, "prompt": prompt})
	if err != nil {
		return t.result(agent.TurnFailed), s.crashed("sending the prompt: " + err.Error())
	}
	// The answer comes through the queue (OnResponse), after what the agent
	// sent before it: drain sees it in order.
	t.promptID = id

	var grace, parkWait <-chan time.Time
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	ctxDone := ctx.Done()
	for {
		select {
		case <-idle.C:
			t.flush()
		case <-s.q.Ready():
			t.drain()
		case <-s.rpc.Done():
			t.drain()
			if t.ended != nil {
				return t.finish(*t.ended), nil
			}
			return t.died(ctx)
		case <-ctxDone:
			ctxDone = nil
			if err := s.Interrupt(); err != nil {
				s.logger.Warn("acp: interrupt after cancel", "error", err)
			}
			timer := time.NewTimer(s.InterruptGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			t.closeOpen(interruptedText)
			return t.result(agent.TurnInterrupted), ctx.Err()
		case <-parkWait:
			s.Proc.Logf("the parked prompt was not answered within %s; the turn ends parked", s.ParkGrace)
			t.closeOpen(unfinishedText)
			return t.result(agent.TurnParked), nil
		}
		if t.ended != nil {
			r := t.finish(*t.ended)
			if ctx.Err() != nil && r.Outcome == agent.TurnInterrupted {
				return r, ctx.Err()
			}
			return r, nil
		}
		if err := s.q.Full(); err != nil {
			// What came after the refused message is lost: the turn cannot
			// be told truly any more.
			t.flush()
			t.closeOpen(unfinishedText)
			return t.result(agent.TurnFailed), agent.Overrun(s.p.typ, err)
		}
		if t.text.Len() > 0 || t.thought.Len() > 0 {
			idle.Reset(s.TextIdle)
		}
		if t.parked && parkWait == nil {
			timer := time.NewTimer(s.ParkGrace)
			defer timer.Stop()
			parkWait = timer.C
		}
	}
}

func (s *Session) crashed(what string) error {
	return agent.Errorf(agent.CodeAgentCrashed, "%s (%s)%s", what, s.Proc.ExitStatus(time.Second), s.Proc.StderrTail())
}

// drain handles everything queued, up to the prompt's answer; what the
// agent sent after it is not the turn's (afterEnd).
func (t *turn) drain() {
	if m := t.s.q.Drain(t.promptID, t.ended != nil, t.handle, t.afterEnd); m != nil {
		t.ended = m
	}
}

// afterEnd drops what the agent sent once its turn had ended: an update is
// not folded into the ended turn's items, and a request is never judged
// (nor counted): it is cancelled, so the agent does not wait on it.
func (t *turn) afterEnd(m jsonrpc.Message) {
	switch m.Kind {
	case jsonrpc.Request:
		t.s.Proc.Logf("a %s request (id %s) came after the turn ended: cancelled, not judged", m.Method, m.ID)
		t.s.reply(m.ID, cancelled)
	case jsonrpc.Notification:
		t.s.Proc.Logf("a %s came after the turn ended: dropped", m.Method)
	}
}

// died is the end of the agent's output before the prompt's answer.
func (t *turn) died(ctx context.Context) (agent.TurnResult, error) {
	s := t.s
	s.mu.Lock()
	interrupted := s.interrupted
	s.mu.Unlock()
	switch {
	case t.parked:
		// The call was refused before the end: it did not run.
		t.closeOpen(unfinishedText)
		return t.result(agent.TurnParked), nil
	case ctx.Err() != nil:
		t.closeOpen(interruptedText)
		return t.result(agent.TurnInterrupted), ctx.Err()
	case !interrupted && s.Proc.NotReading() != nil:
		t.closeOpen(unfinishedText)
		return t.result(agent.TurnFailed), s.crashed(s.Proc.NotReading().Error())
	case interrupted || s.Proc.StdinClosed():
		t.closeOpen(interruptedText)
		return t.result(agent.TurnInterrupted), nil
	}
	t.closeOpen(unfinishedText)
	return t.result(agent.TurnFailed), s.crashed(s.p.typ + " ended before its turn did")
}

// promptResult is the answer to session/prompt, with the usage each agent
// reports its own way.
type promptResult struct {
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens      int64 `json:"inputTokens"`
		OutputTokens     int64 `json:"outputTokens"`
		CachedReadTokens int64 `json:"cachedReadTokens"`
	} `json:"usage"`
	Meta struct {
		Quota struct {
			TokenCount *struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"token_count"`
		} `json:"quota"`
	} `json:"_meta"`
}

// finish is how the turn ended, from the prompt's answer. A turn ends on
// that answer only: its stopReason, or a JSON-RPC error for a failed model
// turn (Copilot's failed turn ends end_turn with an "Error: " notice).
func (t *turn) finish(m jsonrpc.Message) agent.TurnResult {
	t.flush()
	s := t.s
	s.mu.Lock()
	interrupted := s.interrupted
	s.mu.Unlock()
	if m.Error != nil {
		switch {
		case t.parked:
			t.closeOpen(unfinishedText)
			return t.result(agent.TurnParked)
		case interrupted:
			t.closeOpen(interruptedText)
			return t.result(agent.TurnInterrupted)
		}
		t.closeOpen(unfinishedText)
		r := t.result(agent.TurnFailed)
		r.ErrorText = errorText(m.Error)
		r.Failure, r.ResetAt = refusal(r.ErrorText, m.Error.Code, time.Now())
		return r
	}
	var pr promptResult
	if err := json.Unmarshal(m.Result, &pr); err != nil {
		s.Proc.Logf("the prompt's answer does not decode (%v); taken as end_turn", err)
	}
	r := t.result("")
	t.usage(&r, pr)
	switch pr.StopReason {
	case "cancelled":
		t.closeOpen(interruptedText)
		if t.parked {
			r.Outcome = agent.TurnParked
		} else {
			r.Outcome = agent.TurnInterrupted
		}
	case "refusal":
		t.closeOpen(unfinishedText)
		r.Outcome, r.ErrorText = agent.TurnFailed, "the agent refused to go on (stopReason refusal)"
	default: // end_turn, max_tokens, max_turn_requests
		t.closeOpen(unfinishedText)
		r.Outcome = agent.TurnCompleted
		if t.noticeErr != "" {
			r.Outcome, r.ErrorText = agent.TurnFailed, t.noticeErr
			r.Failure, r.ResetAt = refusal(t.noticeErr, 0, time.Now())
		}
	}
	return r
}

func (t *turn) result(outcome string) agent.TurnResult {
	// A turn is one agent turn unless the agent tells its model requests.
	turns := max(int(t.requests), 1)
	return agent.TurnResult{Outcome: outcome, DurationMS: time.Since(t.start).Milliseconds(), NumTurns: turns, Usage: t.chunkUsage}
}

// usage takes the prompt result's usage when there is one: usage (OpenCode:
// the last model request only; Copilot: the turn), else _meta.quota (Gemini
// CLI: the turn); else the per-request usage summed (Qwen Code).
func (t *turn) usage(r *agent.TurnResult, pr promptResult) {
	switch {
	case pr.Usage != nil && (pr.Usage.InputTokens > 0 || pr.Usage.OutputTokens > 0):
		u := pr.Usage
		in := u.InputTokens
		if t.s.p.inputExcludesCached {
			in += u.CachedReadTokens
		}
		r.Usage = agent.Usage{InputTokens: in, InputTokensCached: u.CachedReadTokens, OutputTokens: u.OutputTokens}
	case pr.Meta.Quota.TokenCount != nil:
		tc := pr.Meta.Quota.TokenCount
		r.Usage = agent.Usage{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens}
	}
}

// update is one session/update's update, the fields bhw-run reads.
type update struct {
	Kind       string          `json:"sessionUpdate"`
	Content    json.RawMessage `json:"content"`
	MessageID  string          `json:"messageId"`
	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title"`
	ToolKind   *string         `json:"kind"`
	Status     *string         `json:"status"`
	Locations  json.RawMessage `json:"locations"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`
	Entries    []struct {
		Content  string `json:"content"`
		Priority string `json:"priority"`
		Status   string `json:"status"`
	} `json:"entries"`
	Meta struct {
		Usage *struct {
			InputTokens      int64 `json:"inputTokens"`
			OutputTokens     int64 `json:"outputTokens"`
			CachedReadTokens int64 `json:"cachedReadTokens"`
		} `json:"usage"`
		ToolName string `json:"toolName"`
	} `json:"_meta"`
}

// handle maps one queued message of the turn.
func (t *turn) handle(m jsonrpc.Message) {
	if m.Kind == jsonrpc.Request {
		t.permission(m)
		return
	}
	if k, ok := updateKind(m.Params); ok && !relayed[k] {
		// available_commands_update and the like: not decoded (Qwen Code's
		// is half a megabyte).
		return
	}
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	var u update
	if err := json.Unmarshal(m.Params, &p); err != nil || json.Unmarshal(p.Update, &u) != nil {
		t.s.Proc.Logf("skipped a session/update that does not decode")
		return
	}
	if p.SessionID != "" && t.sid != "" && p.SessionID != t.sid {
		t.s.Proc.Logf("skipped a session/update of another session (%s)", p.SessionID)
		return
	}
	switch u.Kind {
	case "agent_message_chunk":
		t.messageChunk(u)
	case "agent_thought_chunk":
		t.flushText()
		t.thought.WriteString(chunkText(u.Content))
	case "tool_call", "tool_call_update":
		t.flush()
		t.toolUpdate(u)
	case "plan":
		t.flush()
		var lines []string
		for _, e := range u.Entries {
			lines = append(lines, fmt.Sprintf("[%s] %s", e.Status, e.Content))
		}
		t.emit(agent.StatusItem("plan", "plan:\n"+strings.Join(lines, "\n"), map[string]any{"entries": u.Entries}))
	default:
		// user_message_chunk (the agent's echo or replay of our own
		// prompt), available_commands_update, usage_update,
		// config_option_update, session_info_update, current_mode_update
		// and kinds to come: thread.log has them.
	}
}

// relayed are the session/update kinds a turn reads.
var relayed = map[string]bool{"agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true}

// updateKind finds a session/update's kind without decoding the whole
// update: the value of its only "sessionUpdate" key. ok is false when the
// text does not show one plainly (then the update is decoded).
func updateKind(params []byte) (kind string, ok bool) {
	key := []byte(`"sessionUpdate"`)
	i := bytes.Index(params, key)
	if i < 0 || bytes.Contains(params[i+len(key):], key) {
		return "", false
	}
	rest := bytes.TrimLeft(params[i+len(key):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return "", false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return "", false
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 || bytes.IndexByte(rest[1:1+end], '\\') >= 0 {
		return "", false
	}
	return string(rest[1 : 1+end]), true
}

// messageChunk buffers model text, one item per message: the chunks of one
// message are coalesced. An agent's own notice (Copilot's "Info: …",
// "Error: …") is not model text: an "Error: " notice is a status item and
// fails the turn, a retry notice is a status item, the rest is dropped.
func (t *turn) messageChunk(u update) {
	if mu := u.Meta.Usage; mu != nil {
		t.chunkUsage.InputTokens += mu.InputTokens
		t.chunkUsage.InputTokensCached += mu.CachedReadTokens
		t.chunkUsage.OutputTokens += mu.OutputTokens
		// The only usage an ACP agent reports mid-turn: run meters the
		// budget with it.
		t.requests++
		t.h.Progress(agent.Progress{Usage: t.chunkUsage, Turns: t.requests})
	}
	text := chunkText(u.Content)
	if text == "" {
		return // Qwen Code's usage carriers
	}
	if t.s.p.notices && (strings.HasPrefix(text, "Info: ") || strings.HasPrefix(text, "Error: ")) {
		t.flush()
		switch {
		case strings.HasPrefix(text, "Error: "):
			t.noticeErr = strings.TrimPrefix(text, "Error: ")
			t.emit(agent.StatusItem("agent_error", text, nil))
		case strings.Contains(text, "Retrying"):
			t.emit(agent.StatusItem("api_retry", text, nil))
		}
		// Other notices ("Info: Disabled tools: task", the path of a file
		// just written) are in thread.log only.
		return
	}
	t.flushThought()
	if u.MessageID != "" && t.textMsg != "" && u.MessageID != t.textMsg {
		t.flushText()
	}
	if u.MessageID != "" {
		t.textMsg = u.MessageID
	}
	t.text.WriteString(text)
}

// chunkText is a content block's text ("" for images and the like).
func chunkText(raw json.RawMessage) string {
	var c struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &c) != nil || (c.Type != "" && c.Type != "text") {
		return ""
	}
	return c.Text
}

func (t *turn) flush() {
	t.flushThought()
	t.flushText()
}

func (t *turn) flushText() {
	if t.text.Len() > 0 {
		it := t.text.Mark(agent.TextItem(t.text.String()))
		t.text.Reset()
		t.textMsg = ""
		t.emit(it)
	}
}

func (t *turn) flushThought() {
	if t.thought.Len() > 0 {
		it := t.thought.Mark(agent.ThinkingItem(t.thought.String()))
		t.thought.Reset()
		t.emit(it)
	}
}

// emit relays it after the tool calls still waiting to be announced, so
// items keep the agent's order.
func (t *turn) emit(it agent.Item) {
	t.announcePending()
	t.h.Emit(it)
}
