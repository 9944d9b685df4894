// Package acptest helps tests drive the real ACP agents (Gemini CLI, Qwen
// Code, OpenCode, Copilot CLI) offline: GeminiServer, a scripted fake of the
// Gemini API, and ChatServer, a scripted fake of the OpenAI chat-completions
// API (what Qwen Code, OpenCode and Copilot's BYOK provider call). Both bind
// 127.0.0.1:0, log every request, play the same script language and inject
// the same faults. It is imported by tests only; docs/agents-acp.md says how
// each agent is pointed at them.
//
// The script is read from the conversation each request carries, not from a
// list of steps: an agent sends helper requests (titles, next-speaker checks,
// suggestions, memory extraction) whose number and order change between
// versions, and a step list would drift. The rules, first match wins:
//
//   - a Fault (Inject) or a refused API key (RequireKey) → that HTTP error;
//   - a request offering no tools → a helper answer: JSON filled from the
//     requested schema, or the text "Test title";
//   - <<fail STATUS [once] [retry=DUR]>> in the last user text → that HTTP
//     error (every time, or only for the first request that sees it);
//   - <<sleep DUR>> in the last user text → wait that long (or until the
//     client goes away) before the answer of the first request of the turn;
//   - <<think TEXT>> in the last user text → a thought part before the answer;
//   - <<tool NAME {json}>> markers in the last user text → one call per
//     request, in order: the k-th request of the turn calls the k-th marker
//     (a marker naming a tool the request does not offer answers text);
//   - the last message is a tool result → the text "DONE: <result>";
//   - the last user text says "approved" → the most recent call of the
//     history again, same name and arguments (else the latest marker of an
//     earlier user text, rule "reissue-marker");
//   - otherwise → the text "REPLY: <last user text>".
package acptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// Fixed usage every answer reports, so tests can assert sums.
const (
	UsageInput       = 100
	UsageInputCached = 40
	UsageOutput      = 10
)

// Rules a request can be answered by (Request.Rule).
const (
	RuleFault          = "fault"
	RuleKeyRefused     = "key-refused"
	RuleHelperJSON     = "helper-json"
	RuleNoTools        = "no-tools"
	RuleCountTokens    = "count-tokens"
	RuleFailMarker     = "fail-marker"
	RuleToolMarker     = "tool-marker"
	RuleToolNotOffered = "tool-not-offered"
	RuleToolResult     = "tool-result"
	RuleReissue        = "reissue-history"
	RuleReissueMarker  = "reissue-marker"
	RuleReissueMissing = "reissue-missing"
	RuleReply          = "reply"
	RuleNotFound       = "not-found"
	RuleBadBody        = "bad-body"
)

// Call is one tool call of the model.
type Call struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Result is one tool result sent back to the model.
type Result struct {
	ID     string `json:"id,omitempty"`
	Name   string `json:"name,omitempty"`
	Output string `json:"output"`
}

// Turn is one message of a request's conversation, normalized across the two
// APIs: Role "user" (text), "model" (text and calls) or "tool" (results).
// System/developer messages are left out.
type Turn struct {
	Role    string   `json:"role"`
	Text    string   `json:"text,omitempty"`
	Calls   []Call   `json:"calls,omitempty"`
	Results []Result `json:"results,omitempty"`
}

// Request is one recorded HTTP request and how it was answered.
type Request struct {
	Seq      int         `json:"seq"`
	Time     time.Time   `json:"time"`
	Method   string      `json:"method"`
	Path     string      `json:"path"`
	RawQuery string      `json:"query,omitempty"`
	Header   http.Header `json:"header"`
	Op       string      `json:"op"` // streamGenerateContent, generateContent, countTokens, chat.completions, …
	Model    string      `json:"model"`
	Stream   bool        `json:"stream"`
	Key      string      `json:"key"` // the API key the request carried
	Tools    []string    `json:"tools,omitempty"`
	Turns    []Turn      `json:"turns,omitempty"`
	Rule     string      `json:"rule"`
	Status   int         `json:"status"`
	Answer   *Call       `json:"answer_call,omitempty"` // the call answered, if any
	Text     string      `json:"answer_text,omitempty"` // the text answered, if any
	Body     []byte      `json:"-"`
}

// LastUserText is the text of the last user turn.
func (r Request) LastUserText() string {
	for i := len(r.Turns) - 1; i >= 0; i-- {
		if r.Turns[i].Role == "user" {
			return r.Turns[i].Text
		}
	}
	return ""
}

// Calls are every model call in the conversation, oldest first.
func (r Request) Calls() []Call {
	var out []Call
	for _, t := range r.Turns {
		out = append(out, t.Calls...)
	}
	return out
}

// Results are every tool result in the conversation, oldest first.
func (r Request) Results() []Result {
	var out []Result
	for _, t := range r.Turns {
		out = append(out, t.Results...)
	}
	return out
}

// Contains reports whether s occurs in the raw body.
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// IsModelTurn reports whether the request is part of the scripted
// conversation (offers tools), not a helper or token count.
func (r Request) IsModelTurn() bool {
	return len(r.Tools) > 0 && r.Op != "countTokens"
}

// Fault makes the server answer requests with an HTTP error.
type Fault struct {
	Status int // e.g. 500, 429, 503
	// Times is how many requests it answers; 0: every matching request from
	// now on, until ClearFaults.
	Times int
	// RetryAfter, when set, goes out as the Retry-After header (seconds) and
	// as the API's own reset hint in the body (Gemini: RetryInfo.retryDelay;
	// OpenAI: "try again in …s" and x-ratelimit-reset-requests).
	RetryAfter time.Duration
	// Match selects the requests it applies to; nil: every request that
	// offers tools (helper requests and token counts are left alone).
	Match func(Request) bool
}

// decision is what a request is answered with.
type decision struct {
	rule       string
	status     int
	retryAfter time.Duration
	text       string
	think      string
	call       *Call
	sleep      time.Duration
}

var (
	toolRe  = regexp.MustCompile(`<<tool\s+([A-Za-z0-9_.\-]+)\s*`)
	sleepRe = regexp.MustCompile(`<<sleep\s+([0-9.]+)(ms|s)?\s*>>`)
	failRe  = regexp.MustCompile(`<<fail\s*([0-9]{3})((?:\s+(?:once|retry=[0-9.]+(?:ms|s)?))*)\s*>>`)
	thinkRe = regexp.MustCompile(`(?s)<<think\s+(.*?)>>`)
	apprRe  = regexp.MustCompile(`(?i)\bapproved\b`)
	durRe   = regexp.MustCompile(`^([0-9.]+)(ms|s)?$`)
)

// markers are the <<tool NAME {json}>> markers of text, in order. The JSON
// is decoded as a value, so it may itself hold markers (a subagent's
// prompt); those are skipped, not counted.
func markers(text string) []Call {
	var out []Call
	for pos := 0; pos < len(text); {
		loc := toolRe.FindStringSubmatchIndex(text[pos:])
		if loc == nil {
			break
		}
		name := text[pos+loc[2] : pos+loc[3]]
		rest := text[pos+loc[1]:]
		args := json.RawMessage("{}")
		adv := loc[1]
		if strings.HasPrefix(rest, "{") {
			dec := json.NewDecoder(strings.NewReader(rest))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == nil {
				args = raw
				adv += int(dec.InputOffset())
			}
		}
		tail := strings.TrimLeft(text[pos+adv:], " \t\r\n")
		if !strings.HasPrefix(tail, ">>") {
			pos += loc[1]
			continue
		}
		out = append(out, Call{Name: name, Args: compactJSON(args)})
		pos = len(text) - len(tail) + 2
	}
	return out
}

func parseDur(num, unit string) time.Duration {
	f, _ := strconv.ParseFloat(num, 64)
	if unit == "ms" {
		return time.Duration(f * float64(time.Millisecond))
	}
	return time.Duration(f * float64(time.Second))
}

// answerFor decides a request's answer: a helper's JSON filled from its
// schema (jsonMode), a helper's title (no tools offered), or the script.
func (c *core) answerFor(r Request, jsonMode bool, schema json.RawMessage) decision {
	switch {
	case jsonMode:
		v, _ := json.Marshal(fillSchema(schema))
		return decision{rule: RuleHelperJSON, text: string(v)}
	case len(r.Tools) == 0:
		return decision{rule: RuleNoTools, text: "Test title"}
	}
	return c.decide(r)
}

// decide plays the script for one request that offers tools.
func (c *core) decide(r Request) decision {
	last := r.LastUserText()
	// Requests since the last user turn: 0 for the turn's first request.
	k, lastIsTool := 0, false
	for i := len(r.Turns) - 1; i >= 0 && r.Turns[i].Role != "user"; i-- {
		if r.Turns[i].Role == "tool" {
			k++
		}
	}
	if n := len(r.Turns); n > 0 && r.Turns[n-1].Role == "tool" {
		lastIsTool = true
	}
	if m := failRe.FindStringSubmatch(last); m != nil {
		status, _ := strconv.Atoi(m[1])
		d := decision{rule: RuleFailMarker, status: status}
		once := false
		for _, opt := range strings.Fields(m[2]) {
			if opt == "once" {
				once = true
			} else if v, ok := strings.CutPrefix(opt, "retry="); ok {
				mm := durRe.FindStringSubmatch(v)
				if mm != nil {
					d.retryAfter = parseDur(mm[1], mm[2])
				}
			}
		}
		if !once || c.failOnce(last) {
			return d
		}
	}
	var d decision
	if k == 0 {
		if m := sleepRe.FindStringSubmatch(last); m != nil {
			d.sleep = parseDur(m[1], m[2])
		}
	}
	if m := thinkRe.FindStringSubmatch(last); m != nil {
		d.think = m[1]
	}
	if ms := markers(last); k < len(ms) && (k == 0 || lastIsTool) {
		call := ms[k]
		if !offered(r.Tools, call.Name) {
			d.rule, d.text = RuleToolNotOffered, fmt.Sprintf("REPLY: no tool %q is offered", call.Name)
			return d
		}
		d.rule, d.call = RuleToolMarker, &call
		return d
	}
	if lastIsTool {
		res := r.Turns[len(r.Turns)-1].Results
		out := ""
		if len(res) > 0 {
			out = res[len(res)-1].Output
		}
		d.rule, d.text = RuleToolResult, "DONE: "+clip(out, 300)
		return d
	}
	if apprRe.MatchString(last) {
		// The history before the approval message: the model's own calls.
		calls := Request{Turns: r.Turns[:lastUserIndex(r.Turns)]}.Calls()
		if n := len(calls); n > 0 {
			call := Call{Name: calls[n-1].Name, Args: calls[n-1].Args}
			d.rule, d.call = RuleReissue, &call
			return d
		}
		for i := lastUserIndex(r.Turns) - 1; i >= 0; i-- {
			if r.Turns[i].Role != "user" {
				continue
			}
			if ms := markers(r.Turns[i].Text); len(ms) > 0 {
				call := ms[len(ms)-1]
				d.rule, d.call = RuleReissueMarker, &call
				return d
			}
		}
		d.rule, d.text = RuleReissueMissing, "REPLY: approved, but no earlier call in the history"
		return d
	}
	d.rule, d.text = RuleReply, "REPLY: "+clip(strings.TrimSpace(last), 200)
	return d
}

func lastUserIndex(turns []Turn) int {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == "user" {
			return i
		}
	}
	return 0
}

func offered(tools []string, name string) bool {
	for _, t := range tools {
		if t == name {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// core is what both fakes share: the log (Requests, WaitFor), the faults
// and the key check.
type core struct {
	agenttest.RequestLog[Request]

	mu      sync.Mutex
	faults  []*Fault
	key     string
	keyCode int
	failed  map[string]bool
	calls   int
}

func newCore() *core {
	return &core{failed: map[string]bool{}}
}

// failOnce reports whether a "once" fail marker for this text has not
// fired yet, and marks it fired.
func (c *core) failOnce(text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed[text] {
		return false
	}
	c.failed[text] = true
	return true
}

// Inject adds a fault; faults are checked in the order they were added.
func (c *core) Inject(f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &f)
}

// ClearFaults removes every fault.
func (c *core) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
}

// RequireKey makes every request whose API key is not key fail with status
// (401 or 403), as a real API refuses a revoked key. "" turns the check off.
func (c *core) RequireKey(key string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key, c.keyCode = key, status
}

// fault returns the fault r hits, if any, and counts it.
func (c *core) fault(r Request) (status int, retry time.Duration, rule string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key != "" && r.Key != c.key {
		return c.keyCode, 0, RuleKeyRefused
	}
	for i, f := range c.faults {
		match := r.IsModelTurn()
		if f.Match != nil {
			match = f.Match(r)
		}
		if !match {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				c.faults = append(c.faults[:i:i], c.faults[i+1:]...)
			}
		}
		return f.Status, f.RetryAfter, RuleFault
	}
	return 0, 0, ""
}

func (c *core) nextCallID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return fmt.Sprintf("call_%d", c.calls)
}

func (c *core) record(r Request) {
	c.Record(func(n int) Request { r.Seq = n; return r })
}

// reply records req as answered with status by rule and writes body.
func (c *core) reply(w http.ResponseWriter, req Request, rule string, status int, body any) {
	req.Rule, req.Status = rule, status
	c.record(req)
	writeJSON(w, status, body)
}

// faulted answers req with the injected fault that matches it, if one
// does, through fail (the server's own error shape); true when it did.
func (c *core) faulted(w http.ResponseWriter, req Request, fail func(http.ResponseWriter, int, time.Duration)) bool {
	status, retry, rule := c.fault(req)
	if status == 0 {
		return false
	}
	req.Rule, req.Status = rule, status
	c.record(req)
	fail(w, status, retry)
	return true
}

// scripted is the script's answer to req, noted in req; a scripted
// failure is recorded and answered through fail, and ok is false.
func (c *core) scripted(w http.ResponseWriter, req *Request, jsonMode bool, schema json.RawMessage, fail func(http.ResponseWriter, int, time.Duration)) (d decision, ok bool) {
	d = c.answerFor(*req, jsonMode, schema)
	req.Rule, req.Text, req.Answer = d.rule, d.text, d.call
	if d.status != 0 {
		req.Status = d.status
		c.record(*req)
		fail(w, d.status, d.retryAfter)
		return d, false
	}
	return d, true
}

// closedAtCleanup has t close s when the test ends.
func closedAtCleanup[S interface{ Close() }](t testing.TB, s S) S {
	t.Cleanup(s.Close)
	return s
}

// ModelRequests are the requests that offered tools (the scripted turns).
func (c *core) ModelRequests() []Request {
	var out []Request
	for _, r := range c.Requests() {
		if r.IsModelTurn() {
			out = append(out, r)
		}
	}
	return out
}

// WriteLog writes every request as one JSON line (body included) to path.
func (c *core) WriteLog(path string) error {
	var b bytes.Buffer
	for _, r := range c.Requests() {
		line, err := json.Marshal(struct {
			Request
			Body json.RawMessage `json:"body,omitempty"`
		}{r, rawOrString(r.Body)})
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func rawOrString(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

// pause waits d, or until ctx ends (the client went away).
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// split cuts s into two chunks, so streams carry more than one delta and a
// reader must coalesce them: after the last space before the middle (a
// path or word stays whole), else at the middle's rune boundary.
func split(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	i := strings.LastIndexByte(s[:len(s)/2], ' ') + 1
	if i <= 0 {
		i = len(s) / 2
	}
	for i < len(s) && !utf8RuneStart(s[i]) {
		i++
	}
	if i >= len(s) {
		return []string{s}
	}
	return []string{s[:i], s[i:]}
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// fillSchema builds a value that satisfies a JSON schema well enough for a
// helper request: objects get every property, enums their first value.
func fillSchema(raw json.RawMessage) any {
	var s map[string]any
	if json.Unmarshal(raw, &s) != nil {
		return map[string]any{}
	}
	return fillValue(s)
}

func fillValue(s map[string]any) any {
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			if vs, ok := v.(map[string]any); ok {
				out[k] = fillValue(vs)
			}
		}
		return out
	case "array":
		return []any{}
	case "integer", "number":
		return 10
	case "boolean":
		return false
	}
	return "fake"
}

// writeSSE answers 200 with each chunk as a server-sent event, its lines
// ended by eol (the APIs differ), flushed one by one; done, when not "",
// is the data of a last event.
func writeSSE(w http.ResponseWriter, chunks []map[string]any, eol, done string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	event := func(data []byte) {
		fmt.Fprintf(w, "data: %s%s%s", data, eol, eol)
		if fl != nil {
			fl.Flush()
		}
	}
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		event(b)
	}
	if done != "" {
		event([]byte(done))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
