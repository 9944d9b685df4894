package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// Tool names the adapter reports for Codex items; they are the names the
// model itself uses in 0.171.0, so a brief reads like the model's call.
const (
	ToolExec       = "exec_command" // commandExecution items and command approvals
	ToolApplyPatch = "apply_patch"  // fileChange items and file-change approvals
	ToolWebSearch  = "web_search"   // webSearch items
	// mcpToolCall items are named "mcp__<server>__<tool>".
)

// notRunText is the output of a call cancelled because another call of its
// turn waits for a person: it did not run, and the model asks again once
// the person has answered.
const notRunText = "not run: another call of this turn waits for a person"

// turn is the state of one Turn.
type turn struct {
	s     *Session
	h     agent.Handler
	start time.Time

	id        string
	started   bool // turn/started of our turn seen
	parked    bool
	completed *wireTurn
	lastError string
	// lastInfo is the codexErrorInfo of the last error notification;
	// resetAt is when a limit the account reached resets
	// (account/rateLimits/updated with a window used up).
	lastInfo json.RawMessage
	resetAt  time.Time

	startTotal tokenCounts
	startKnown bool
	sumLast    tokenCounts
	// responses counts the turn's model responses (a token usage update
	// follows each): its agent turns.
	responses int

	calls   map[string]bool            // tool_call emitted
	results map[string]bool            // tool_result emitted
	changes map[string]json.RawMessage // fileChange item id → its changes (from item/started)
	cwd     string
}

// Turn sends message as one user turn and relays it through h until
// turn/completed, a park, the end of the process or ctx.
func (s *Session) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	r, err := s.turn(ctx, message, h)
	if err == nil && ctx.Err() != nil && !r.ResumeFailed {
		err = ctx.Err()
	}
	return r, err
}

func (s *Session) turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	s.mu.Lock()
	failed := s.resumeFailed
	thread := s.SessionID()
	t := &turn{
		s: s, h: h, start: time.Now(),
		startTotal: s.total, startKnown: s.haveTotal || !s.resumed,
		calls: map[string]bool{}, results: map[string]bool{}, changes: map[string]json.RawMessage{},
		cwd: s.l.WorkFolder,
	}
	s.turnID, s.interrupted, s.wantInterupt = "", false, false
	s.mu.Unlock()
	if failed != "" {
		return agent.TurnResult{Outcome: agent.TurnFailed, ErrorText: failed, ResumeFailed: true}, nil
	}

	s.q.SetMax(s.MaxQueued)
	s.q.SetOpen(true)
	defer func() {
		// Nothing may be left waiting on us: a request that came after the
		// end is cancelled (parked turn) or declined.
		for _, m := range s.q.SetOpen(false) {
			if m.Kind == jsonrpc.Request {
				if t.parked {
					s.respond(m.ID, map[string]any{"decision": "cancel"})
				} else {
					s.respond(m.ID, map[string]any{"decision": "decline"})
				}
			}
		}
		s.mu.Lock()
		s.turnID = ""
		s.mu.Unlock()
	}()

	input := []any{map[string]any{"type": "text", "text": message, "text_elements": []any{}}}
	s.mu.Lock()
	for _, img := range s.images {
		if img.Path != "" {
			input = append(input, map[string]any{"type": "localImage", "path": img.Path})
		}
	}
	s.images = nil
	s.mu.Unlock()
	_, resp, err := s.rpc.Go("turn/start", map[string]any{
		"threadId": thread,
		"input":    input,
	})
	if err != nil {
		return t.result(agent.TurnFailed), s.crashed("turn/start: " + err.Error())
	}

	var grace <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case m := <-resp:
			resp = nil
			if m.Error != nil {
				return t.result(agent.TurnFailed), fmt.Errorf("codex turn/start: %w", m.Error)
			}
			var tr turnResult
			if json.Unmarshal(m.Result, &tr) == nil && tr.Turn.ID != "" {
				t.setID(tr.Turn.ID)
			}
		case <-s.q.Ready():
			if t.drain() {
				return t.finish(ctx)
			}
			if err := s.q.Full(); err != nil {
				// What came after the refused message is lost: the turn
				// cannot be told truly any more.
				t.closeOpenCalls("not finished: the turn ended first", true)
				return t.result(agent.TurnFailed), agent.Overrun("codex app-server", err)
			}
		case <-s.rpc.Done():
			if t.drain() {
				return t.finish(ctx)
			}
			return t.died()
		case <-ctxDone:
			ctxDone = nil
			go func() {
				if err := s.Interrupt(); err != nil {
					s.logger.Warn("codex: interrupt after cancel", "error", err)
				}
			}()
			timer := time.NewTimer(s.InterruptGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			t.closeOpenCalls("not finished: the turn was interrupted", true)
			return t.result(agent.TurnInterrupted), ctx.Err()
		}
	}
}

func (t *turn) setID(id string) {
	t.s.mu.Lock()
	t.id = id
	t.s.turnID = id
	want := t.s.wantInterupt
	t.s.wantInterupt = false
	t.s.mu.Unlock()
	if want {
		go func() {
			if err := t.s.Interrupt(); err != nil {
				t.s.logger.Warn("codex: deferred interrupt", "error", err)
			}
		}()
	}
}

// drain handles everything queued; true once the turn has ended.
func (t *turn) drain() bool {
	queued := t.s.q.Take()
	for i, m := range queued {
		t.handle(m)
		if t.completed != nil {
			// Later lines belong to no turn of ours, those taken with the
			// end and those queued since; what comes later still is
			// answered by Turn's deferred cleanup.
			for _, rest := range append(queued[i+1:], t.s.q.Take()...) {
				t.afterEnd(rest)
			}
			return true
		}
	}
	return false
}

// afterEnd drops what the server sent once its turn had completed: an
// update is not folded into the ended turn's items, and a request is never
// judged: it is declined, so the server does not wait on it.
func (t *turn) afterEnd(m jsonrpc.Message) {
	switch m.Kind {
	case jsonrpc.Request:
		t.s.Proc.Logf("a %s request (id %s) came after the turn ended: declined, not judged", m.Method, m.ID)
		t.s.respond(m.ID, map[string]any{"decision": "decline"})
	case jsonrpc.Notification:
		t.s.Proc.Logf("a %s came after the turn ended: dropped", m.Method)
	}
}

// finish builds the result of a turn that reported turn/completed.
func (t *turn) finish(ctx context.Context) (agent.TurnResult, error) {
	c := t.completed
	switch c.Status {
	case "completed":
		return t.result(agent.TurnCompleted), nil
	case "failed":
		r := t.result(agent.TurnFailed)
		info := t.lastInfo
		if c.Error != nil && c.Error.Message != "" {
			r.ErrorText, info = c.Error.Message, c.Error.CodexErrorInfo
		} else {
			r.ErrorText = t.lastError
		}
		r.Failure = failure(info, r.ErrorText)
		if r.Failure == agent.FailureRateLimit {
			r.ResetAt = t.resetAt
		}
		return r, nil
	default: // interrupted
		t.closeOpenCalls("not finished: the turn was interrupted", true)
		if t.parked {
			return t.result(agent.TurnParked), nil
		}
		return t.result(agent.TurnInterrupted), ctx.Err()
	}
}

// died is the end of stdout before turn/completed.
func (t *turn) died() (agent.TurnResult, error) {
	s := t.s
	s.mu.Lock()
	interrupted := s.interrupted
	s.mu.Unlock()
	closed := s.Proc.StdinClosed()
	switch {
	case t.parked:
		// A server that dies with an approval pending treats it as a
		// cancel: the call did not run.
		t.closeOpenCalls(notRunText, false)
		return t.result(agent.TurnParked), nil
	case !interrupted && s.Proc.NotReading() != nil:
		t.closeOpenCalls("not finished: the turn ended first", true)
		return t.result(agent.TurnFailed), s.crashed(s.Proc.NotReading().Error())
	case closed || interrupted:
		t.closeOpenCalls("not finished: the turn was interrupted", true)
		return t.result(agent.TurnInterrupted), nil
	}
	return t.result(agent.TurnFailed), s.crashed("codex app-server ended before the turn did")
}

func (s *Session) crashed(what string) error {
	return agent.Errorf(agent.CodeAgentCrashed, "%s (%s)%s", what, s.Proc.ExitStatus(time.Second), s.Proc.StderrTail())
}

func (t *turn) result(outcome string) agent.TurnResult {
	r := agent.TurnResult{Outcome: outcome, DurationMS: time.Since(t.start).Milliseconds()}
	t.s.mu.Lock()
	total, have := t.s.total, t.s.haveTotal
	t.s.mu.Unlock()
	u := t.sumLast
	if t.startKnown && have {
		u = total.minus(t.startTotal)
	}
	r.Usage = agent.Usage{InputTokens: u.InputTokens, InputTokensCached: u.CachedInputTokens, OutputTokens: u.OutputTokens}
	if have {
		// The thread's counters as Codex reports them (inputTokens holds
		// the cached ones too), as blobhub-worker keeps them.
		r.UsageTotal = map[string]int{"input_tokens": int(total.InputTokens), "cached_input_tokens": int(total.CachedInputTokens), "output_tokens": int(total.OutputTokens)}
	}
	r.NumTurns = t.responses
	return r
}

// handle maps one notification or approval request of the turn.
func (t *turn) handle(m jsonrpc.Message) {
	if m.Kind == jsonrpc.Request {
		if m.Method == methodPermissionsApproval {
			t.approvePermissions(m)
			return
		}
		t.approve(m)
		return
	}
	switch m.Method {
	case "turn/started":
		var n turnNotification
		if json.Unmarshal(m.Params, &n) == nil && t.s.ownThread(n.ThreadID) {
			if t.id == "" {
				t.setID(n.Turn.ID)
			}
			t.started = true
		}
	case "turn/completed":
		var n turnNotification
		if json.Unmarshal(m.Params, &n) != nil || !t.s.ownThread(n.ThreadID) {
			return
		}
		if t.id != "" && n.Turn.ID != t.id {
			return
		}
		t.completed = &n.Turn
	case "item/started", "item/completed":
		var n itemNotification
		if json.Unmarshal(m.Params, &n) != nil || !t.s.ownThread(n.ThreadID) {
			t.s.logger.Warn("codex: undecodable item skipped", "method", m.Method)
			return
		}
		if m.Method == "item/started" {
			t.itemStarted(n.Item)
		} else {
			t.itemCompleted(n.Item)
		}
	case "error":
		var n errorNotification
		if json.Unmarshal(m.Params, &n) != nil || !t.s.ownThread(n.ThreadID) {
			return
		}
		t.lastError, t.lastInfo = n.Error.Message, n.Error.CodexErrorInfo
		token := "agent_error"
		if n.WillRetry {
			token = "api_retry"
		}
		extra := map[string]any{"will_retry": n.WillRetry}
		var info any
		if len(n.Error.CodexErrorInfo) > 0 && json.Unmarshal(n.Error.CodexErrorInfo, &info) == nil && info != nil {
			extra["codex_error_info"] = info
		}
		t.h.Emit(agent.StatusItem(token, n.Error.Message, extra))
	case "thread/tokenUsage/updated":
		var n tokenUsageNotification
		if json.Unmarshal(m.Params, &n) != nil || !t.s.ownThread(n.ThreadID) {
			return
		}
		if !t.started {
			// A resumed thread replays its earlier cumulative usage right
			// after turn/start, before our turn starts: that is the baseline.
			t.startTotal, t.startKnown = n.TokenUsage.Total, true
			return
		}
		t.sumLast = t.sumLast.plus(n.TokenUsage.Last)
		t.responses++
		// Codex has no cap of its own: run meters the budget with this.
		u := t.sumLast
		t.h.Progress(agent.Progress{Turns: int64(t.responses),
			Usage: agent.Usage{InputTokens: u.InputTokens, InputTokensCached: u.CachedInputTokens, OutputTokens: u.OutputTokens}})
	case "account/rateLimits/updated":
		var n rateLimitsNotification
		if json.Unmarshal(m.Params, &n) == nil {
			for _, w := range []*rateLimitWindow{n.RateLimits.Primary, n.RateLimits.Secondary} {
				if w != nil && w.UsedPercent >= 100 && w.ResetsAt > 0 {
					if at := time.Unix(w.ResetsAt, 0).UTC(); at.After(t.resetAt) {
						t.resetAt = at
					}
				}
			}
		}
	default:
		// Deltas, status changes, warnings, diffs: the log has them.
	}
}

// failure classifies a failed turn from its codexErrorInfo and message.
// Measured with 0.171.0 (testdata/codex/): a refused key is
// {"httpConnectionFailed":{"httpStatusCode":401}} (or "unauthorized"), a
// provider key variable that is not set "Missing environment variable",
// a ChatGPT plan's limit "usageLimitExceeded", a key's rate limit
// {"responseTooManyFailedAttempts":{"httpStatusCode":429}} once Codex's
// own retries are spent.
func failure(info json.RawMessage, message string) string {
	var name string
	if json.Unmarshal(info, &name) != nil {
		var obj map[string]struct {
			HTTPStatusCode int `json:"httpStatusCode"`
		}
		if json.Unmarshal(info, &obj) == nil {
			for _, v := range obj {
				switch v.HTTPStatusCode {
				case 401:
					return agent.FailureAuth
				case 429:
					return agent.FailureRateLimit
				}
			}
		}
	}
	switch {
	case name == "unauthorized" || strings.HasPrefix(message, "Missing environment variable"):
		return agent.FailureAuth
	case name == "usageLimitExceeded":
		return agent.FailureRateLimit
	}
	return ""
}

func (t *turn) itemStarted(it wireItem) {
	switch it.Type {
	case "fileChange":
		if len(it.Changes) > 0 {
			t.changes[it.ID] = it.Changes
		}
		t.emitCall(it)
	case "commandExecution", "mcpToolCall", "webSearch":
		t.emitCall(it)
	}
}

func (t *turn) itemCompleted(it wireItem) {
	switch it.Type {
	case "agentMessage":
		if it.Text != "" {
			t.h.Emit(agent.TextItem(it.Text))
		}
	case "reasoning":
		if text := reasoningText(it); text != "" {
			t.h.Emit(agent.ThinkingItem(text))
		}
	case "commandExecution", "fileChange", "mcpToolCall", "webSearch":
		if it.Type == "fileChange" && len(it.Changes) > 0 {
			if _, ok := t.changes[it.ID]; !ok {
				t.changes[it.ID] = it.Changes
			}
		}
		if t.results[it.ID] {
			return
		}
		t.emitCall(it) // a tool_call always precedes its result
		out, isErr := toolOutput(it)
		t.emitResult(it.ID, out, isErr)
	}
}

func (t *turn) emitCall(it wireItem) {
	if t.calls[it.ID] {
		return
	}
	t.calls[it.ID] = true
	name, input, summary := describeItem(it)
	t.h.Emit(agent.ToolCallItem(name, it.ID, input, summary))
}

func (t *turn) emitResult(id, out string, isErr bool) {
	if t.results[id] {
		return
	}
	t.results[id] = true
	t.h.Emit(agent.ToolResultItem(id, out, isErr))
}

// closeOpenCalls gives every announced call without a result one, so each
// tool_call has its tool_result (an interrupted command gets no
// item/completed).
func (t *turn) closeOpenCalls(text string, isErr bool) {
	for id := range t.calls {
		if !t.results[id] {
			t.emitResult(id, text, isErr)
		}
	}
}

// describeItem is the tool_call name, input and summary of a tool item.
func describeItem(it wireItem) (name string, input json.RawMessage, summary string) {
	switch it.Type {
	case "commandExecution":
		script := policy.CodexExecCommand(it.Command)
		input, _ = json.Marshal(map[string]any{"command": it.Command, "cwd": it.Cwd})
		return ToolExec, input, oneLine(script)
	case "fileChange":
		input, _ = json.Marshal(map[string]any{"changes": json.RawMessage(orNull(it.Changes))})
		return ToolApplyPatch, input, changeSummary(it.Changes)
	case "mcpToolCall":
		return "mcp__" + it.Server + "__" + it.Tool, orEmptyObject(it.Arguments), ""
	case "webSearch":
		input, _ = json.Marshal(map[string]any{"query": it.Query})
		return ToolWebSearch, input, it.Query
	}
	return it.Type, nil, ""
}

func toolOutput(it wireItem) (string, bool) {
	isErr := it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "commandExecution":
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		if it.Status == "declined" && out == "" {
			out = "declined"
		}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			isErr = true
			out = strings.TrimRight(out, "\n") + fmt.Sprintf("\n(exit code %d)", *it.ExitCode)
			out = strings.TrimLeft(out, "\n")
		}
		return out, isErr
	case "fileChange":
		var chs []fileUpdateChange
		_ = json.Unmarshal(it.Changes, &chs)
		var b strings.Builder
		b.WriteString(it.Status)
		for _, c := range chs {
			fmt.Fprintf(&b, "\n%s %s", c.Kind.Type, c.Path)
		}
		return b.String(), isErr
	case "mcpToolCall":
		if it.Error != nil {
			return it.Error.Message, true
		}
		return string(it.Result), isErr
	case "webSearch":
		return it.Query, isErr
	}
	return "", isErr
}

func reasoningText(it wireItem) string {
	var parts []string
	for _, list := range [][]json.RawMessage{it.Summary, it.Content} {
		for _, raw := range list {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				parts = append(parts, s)
				continue
			}
			var o struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(raw, &o) == nil && o.Text != "" {
				parts = append(parts, o.Text)
			}
		}
		if len(parts) > 0 {
			break // the summary when there is one, else the raw content
		}
	}
	return strings.Join(parts, "\n\n")
}

// changePaths are the paths a file change touches (move targets included),
// absolute against cwd.
func changePaths(changes json.RawMessage, cwd string) []string {
	var chs []fileUpdateChange
	_ = json.Unmarshal(changes, &chs)
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if !filepath.IsAbs(p) && cwd != "" {
			p = filepath.Join(cwd, p)
		}
		out = append(out, p)
	}
	for _, c := range chs {
		add(c.Path)
		if c.Kind.MovePath != nil {
			add(*c.Kind.MovePath)
		}
	}
	return out
}

func changeSummary(changes json.RawMessage) string {
	var chs []fileUpdateChange
	_ = json.Unmarshal(changes, &chs)
	var parts []string
	for _, c := range chs {
		parts = append(parts, c.Kind.Type+" "+c.Path)
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}
