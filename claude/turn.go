package claude

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// parkMessage is the deny message of a parked call. The CLI replaces it by
// its own canned text when interrupt is set (the model reads "The user
// doesn't want to proceed… STOP"), so it is for the log only.
const parkMessage = "waiting for a person"

// userLine is a host → CLI user turn.
type userLine struct {
	Type            string      `json:"type"`
	Message         userContent `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
}

type userContent struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// imageBlock is a picture in a user message, its bytes inline.
type imageBlock struct {
	Type   string      `json:"type"`
	Source imageSource `json:"source"`
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// AttachImages sends imgs with the next Turn's message as image blocks
// (agent.ImageTaker).
func (s *Session) AttachImages(imgs []agent.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images = imgs
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// turnState is what one Turn learns as it reads.
type turnState struct {
	parked      bool
	parkedID    string // the tool_use the gate parked
	interrupted bool   // by ctx cancel or Interrupt
	// apiError is the class of the turn's API error message
	// (authentication_failed, rate_limit, …), apiStatus its HTTP status.
	apiError  string
	apiStatus int
	// resetAt is when a rejected subscription limit resets.
	resetAt time.Time
}

// Turn sends one user message and relays the turn through h until the CLI
// prints its result line, the one turn end it knows.
func (s *Session) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	s.mu.Lock()
	s.interrupted = false
	imgs := s.images
	s.images = nil
	s.mu.Unlock()
	content := []any{textBlock{Type: "text", Text: message}}
	for _, img := range imgs {
		content = append(content, imageBlock{Type: "image", Source: imageSource{Type: "base64", MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)}})
	}
	msg := userLine{Type: "user", Message: userContent{Role: "user", Content: content}}
	if err := s.writeJSON(msg); err != nil {
		// The process is probably gone; report how it ended.
		return agent.TurnResult{}, s.deadError(err)
	}

	var st turnState
	var grace <-chan time.Time // set once ctx is cancelled and the interrupt sent
	var exited = s.Proc.Done()
	var drain <-chan time.Time // set once the process exited: read what is left, then stop
	ctxDone := ctx.Done()
	for {
		select {
		case line, ok := <-s.Proc.Lines():
			if !ok {
				return s.endWithoutResult(ctx, st)
			}
			if line.Over > 0 {
				s.skipOverlong(line)
				continue
			}
			res, end := s.handle(line.Data, h, &st)
			if end {
				if grace != nil {
					return res, ctx.Err()
				}
				return res, nil
			}
		case <-ctxDone:
			ctxDone = nil
			st.interrupted = true
			s.logf("turn cancelled (%v): interrupting", context.Cause(ctx))
			if err := s.Interrupt(); err != nil {
				return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
			}
			t := time.NewTimer(s.TurnGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			s.logf("no result %v after the interrupt", s.TurnGrace)
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
		case <-exited:
			exited, drain = nil, time.After(proc.ExitDrain)
		case <-drain:
			return s.endWithoutResult(ctx, st)
		}
	}
}

// handle processes one line; end reports the turn's end.
func (s *Session) handle(raw []byte, h agent.Handler, st *turnState) (agent.TurnResult, bool) {
	l, err := decodeLine(raw)
	if err != nil {
		s.logf("skipped a bad line: %v", err)
		// The CLI waits for an answer to every request, readable or not.
		if id, ok := overlongRequestID(raw); ok && l.Kind == kindControlReq {
			s.logf("the bad line is control_request %s: answering deny", id)
			_ = s.writeJSON(denyResponse(id, "bhw-run: request could not be read"))
		}
		return agent.TurnResult{}, false
	}
	switch l.Kind {
	case kindSystem:
		if l.Subtype == "init" {
			s.mu.Lock()
			s.sawInit = true
			if l.System.SessionID != "" {
				s.SetSessionID(l.System.SessionID)
			}
			s.tools = l.System.Tools
			s.mu.Unlock()
		}
	case kindControlReq:
		s.answer(l.Control, h, st)
		return agent.TurnResult{}, false
	case kindControlCancel:
		s.logf("the CLI withdrew control_request %s", l.Cancel.RequestID)
		return agent.TurnResult{}, false
	case kindResult:
		return s.result(l.Result, st), true
	case kindRateLimit:
		if i := l.RateLimit.Info; i.Status == "rejected" && i.ResetsAt > 0 {
			st.resetAt = time.Unix(i.ResetsAt, 0).UTC()
		}
		return agent.TurnResult{}, false
	case kindAssistant:
		if a := l.Assistant; a.IsAPIError {
			st.apiError = a.Error
			if a.APIErrorStatus != nil {
				st.apiStatus = *a.APIErrorStatus
			}
			if p := a.APIErrorParams; p != nil && p.RateLimitInfo != nil && p.RateLimitInfo.ResetsAt > 0 {
				st.resetAt = time.Unix(p.RateLimitInfo.ResetsAt, 0).UTC()
			}
		}
	case kindUser, kindControlResp, kindStreamEvent:
	default:
		s.logf("skipped a line of unknown type %q", l.Kind)
		return agent.TurnResult{}, false
	}
	for _, it := range l.items() {
		if st.parked && it.Type() == agent.ItemToolResult {
			if tool, _ := it.Meta["tool"].(map[string]any); tool["invocation_id"] == st.parkedID {
				// The CLI's refusal ("The user doesn't want to proceed…
				// STOP") is how the call was stopped, not its result.
				it = agent.ParkedResultItem(st.parkedID)
			}
		}
		h.Emit(it)
	}
	return agent.TurnResult{}, false
}

func (s *Session) result(r *resultMsg, st *turnState) agent.TurnResult {
	s.mu.Lock()
	if r.SessionID != "" {
		s.SetSessionID(r.SessionID)
	}
	sawInit := s.sawInit
	interrupted := st.interrupted || s.interrupted
	s.mu.Unlock()
	out := agent.TurnResult{
		Outcome: agent.TurnCompleted,
		Usage: agent.Usage{
			InputTokens:       r.Usage.InputTokens + r.Usage.CacheReadInputTokens + r.Usage.CacheCreationInputTokens,
			InputTokensCached: r.Usage.CacheReadInputTokens,
			OutputTokens:      r.Usage.OutputTokens,
		},
		CostUSD:    r.TotalCostUSD,
		NumTurns:   r.NumTurns,
		DurationMS: r.DurationMS,
		// total_cost_usd is the session's: a resumed session starts from
		// what it had cost (testdata/claude/resume.jsonl), so the turn's
		// own cost is the difference.
		SessionCostUSD: r.TotalCostUSD,
	}
	if s.l.Resume && s.l.SessionCostUSD > 0 && s.l.SessionCostUSD <= r.TotalCostUSD {
		out.CostUSD = r.TotalCostUSD - s.l.SessionCostUSD
	}
	if !r.IsError {
		return out
	}
	out.ErrorText = r.Result
	if out.ErrorText == "" {
		out.ErrorText = strings.Join(r.Errors, "; ")
	}
	switch {
	case r.NumTurns == 0 && !sawInit && strings.Contains(out.ErrorText, "No conversation found"):
		out.ResumeFailed = true
		out.Outcome = agent.TurnFailed
	case st.parked:
		// error_during_execution / aborted_tools (and exit 1) is the
		// expected end of a parked turn, not a failure.
		out.Outcome, out.ErrorText = agent.TurnParked, ""
	case interrupted:
		out.Outcome, out.ErrorText = agent.TurnInterrupted, ""
	case r.Subtype == "error_max_turns" || r.Subtype == "error_max_budget_usd":
		// The budget run passed (Launch.Budget) is spent.
		out.Outcome, out.Failure = agent.TurnFailed, agent.FailureBudget
	default:
		out.Outcome = agent.TurnFailed
		status := st.apiStatus
		if r.APIErrorStatus != nil {
			status = *r.APIErrorStatus
		}
		out.Failure = failure(st.apiError, status)
		if out.Failure == agent.FailureRateLimit {
			out.ResetAt = st.resetAt
		}
	}
	return out
}

// failure classifies an error turn from the CLI's API error message: its
// class ("error" of the synthetic assistant message) and HTTP status.
// Measured with 2.1.332 (testdata/claude/): a refused key is
// authentication_failed with 401, no login at all authentication_failed
// without a status ("Not logged in · Please run /login"), a rate or
// usage limit rate_limit with 429, an overloaded API 529.
func failure(class string, status int) string {
	switch {
	case class == "authentication_failed" || status == 401:
		return agent.FailureAuth
	case class == "rate_limit" || status == 429 || status == 529:
		return agent.FailureRateLimit
	case class == "server_error" || class == "unknown" || status >= 500:
		// What blobhub-worker resumes (its transient classes, rate_limit
		// aside: bhw-run waits for a limit's reset instead).
		return agent.FailureTransient
	}
	return ""
}

// endWithoutResult: stdout ended (or the process exited) before result.
func (s *Session) endWithoutResult(ctx context.Context, st turnState) (agent.TurnResult, error) {
	select {
	case <-s.Proc.Done():
	case <-time.After(s.ExitWait):
		// stdout closed but the process lives on: treat it as dead anyway.
	}
	if ctx.Err() != nil {
		return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
	}
	s.mu.Lock()
	interrupted := st.interrupted || s.interrupted
	s.mu.Unlock()
	if err := s.Proc.NotReading(); err != nil && !interrupted {
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentCrashed, "claude: %v (%s)", err, s.Proc.ExitStatus(0))
	}
	if interrupted || s.Proc.StdinClosed() {
		return agent.TurnResult{Outcome: agent.TurnInterrupted}, nil
	}
	return agent.TurnResult{}, s.deadError(nil)
}

// deadError describes a process that ended before its result line:
// AGENT_SPAWN_FAILED when it never got as far as system/init and said why
// on stderr (bad flags, root without IS_SANDBOX), else AGENT_CRASHED.
func (s *Session) deadError(cause error) error {
	select {
	case <-s.Proc.Done():
	case <-time.After(s.ExitWait):
		if cause != nil {
			return agent.Errorf(agent.CodeAgentCrashed, "claude: writing to the agent: %v", cause)
		}
	}
	last, any := s.stderrTail()
	s.mu.Lock()
	sawInit := s.sawInit
	s.mu.Unlock()
	status := s.Proc.ExitStatus(0)
	if !sawInit && any {
		return agent.Errorf(agent.CodeAgentSpawnFailed, "claude ended before it started (%s): %s", status, last)
	}
	msg := "claude ended before its turn-end line (" + status + ")"
	if last != "" {
		msg += "; last stderr: " + last
	}
	return agent.Errorf(agent.CodeAgentCrashed, "%s", msg)
}

// answer replies to one CLI → host control request. Every request gets an
// answer: an unanswered one would leave the CLI waiting (fail closed).
func (s *Session) answer(r *controlRequest, h agent.Handler, st *turnState) {
	if r.Request.Subtype != "can_use_tool" {
		s.logf("unsupported control_request %q: answering error", r.Request.Subtype)
		_ = s.writeJSON(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "error", "request_id": r.RequestID, "error": "unsupported by bhw-run"}})
		return
	}
	call := s.call(r)
	v := h.Decide(call)
	if call.Kind == policy.KindAskUserQuestion && v.Action == policy.Allow {
		// A question is never approved: it has no answers to give here.
		v = policy.Verdict{Action: policy.Park}
	}
	var resp map[string]any
	switch v.Action {
	case policy.Allow:
		in := r.Request.Input
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		// The input goes back unchanged; permission_suggestions are never
		// echoed and updatedPermissions never sent: they can write
		// .claude/settings.local.json into the repository, which would
		// approve later calls by itself.
		resp = map[string]any{"behavior": "allow", "updatedInput": in}
	case policy.Park:
		st.parked, st.parkedID = true, call.InvocationID
		resp = map[string]any{"behavior": "deny", "message": parkMessage, "interrupt": true}
	default:
		msg := v.Message
		if msg == "" {
			msg = "denied by bhw-run"
		}
		resp = map[string]any{"behavior": "deny", "message": msg}
	}
	_ = s.writeJSON(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": r.RequestID, "response": resp}})
}

// skipOverlong notes a line too long to read; a control_request in it is
// answered deny, so the CLI never waits for it.
func (s *Session) skipOverlong(line proc.Line) {
	s.logf("skipped a line of %d bytes (limit %d); it began: %.200s", line.Over, s.maxLine(), line.Data)
	if id, ok := overlongRequestID(line.Data); ok {
		s.logf("the skipped line is control_request %s: answering deny", id)
		_ = s.writeJSON(denyResponse(id, "bhw-run: request too large to read"))
	}
}

func (s *Session) maxLine() int {
	if s.l.MaxLine > 0 {
		return s.l.MaxLine
	}
	return proc.DefaultMaxLine
}

func denyResponse(id, msg string) map[string]any {
	return map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": id, "response": map[string]any{"behavior": "deny", "message": msg}}}
}

// call describes a can_use_tool request for the gate.
func (s *Session) call(r *controlRequest) policy.Call {
	tool, in := r.Request.ToolName, r.Request.Input
	c := policy.Call{
		Tool:         tool,
		Effect:       toolEffect(tool),
		InvocationID: r.Request.ToolUseID,
		Input:        in,
		Target:       toolTarget(tool, in),
		Fingerprint:  Fingerprint(tool, in),
		Kind:         policy.KindApproval,
	}
	c.Summary = policy.Summary(tool, c.Target)
	if r.Request.RequiresUserInteraction {
		c.Kind = policy.KindAskUserQuestion
		qs, err := toolQuestions(in)
		if err != nil {
			s.logf("AskUserQuestion input without readable questions: %v", err)
		}
		c.Questions = qs
	}
	return c
}
