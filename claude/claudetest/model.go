// Package claudetest holds test helpers for code that drives Claude Code:
// ModelServer, a scripted fake Anthropic Messages API for the real CLI, and
// a scripted fake claude agent (the test binary re-executed, see
// FakeAgentCommand). It is imported by tests only.
package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// ToolUse is one tool_use block of a scripted reply.
type ToolUse struct {
	Name  string
	Input any // marshalled to JSON; a json.RawMessage is sent as is
}

// Reply is one scripted answer of the model.
type Reply struct {
	Thinking string
	Text     string
	Tools    []ToolUse
	// Status, when not 0, answers with this HTTP error instead
	// ({"type":"error","error":{"type":ErrorType,"message":ErrorMessage}}),
	// with Headers (e.g. retry-after, anthropic-ratelimit-*-reset).
	Status       int
	ErrorType    string
	ErrorMessage string
	Headers      map[string]string
	// Block, when set, holds the answer until it is closed or the client
	// goes away (an interrupted request).
	Block <-chan struct{}
}

// Step is one entry of a script: a fixed Reply, or Func for a dynamic one.
type Step struct {
	Reply
	Func func(Request) Reply
}

// Text is a step answering with text.
func Text(s string) Step { return Step{Reply: Reply{Text: s}} }

// Tool is a step calling one tool, with a short text before it.
func Tool(name string, input any) Step {
	return Step{Reply: Reply{Text: "calling " + name, Tools: []ToolUse{{Name: name, Input: input}}}}
}

// Error is a step answering with an HTTP error status.
func Error(status int) Step { return Step{Reply: Reply{Status: status}} }

// RateLimited is a step answering 429 rate_limit_error with the reset
// time the Anthropic API sends: retry-after in seconds, and the reset of
// each limit as anthropic-ratelimit-*-reset (RFC 3339).
func RateLimited(reset time.Time) Step {
	secs := int(time.Until(reset).Round(time.Second).Seconds())
	if secs < 0 {
		secs = 0
	}
	at := reset.UTC().Format(time.RFC3339)
	return Step{Reply: Reply{Status: http.StatusTooManyRequests, ErrorType: "rate_limit_error",
		ErrorMessage: "This request would exceed your organization's rate limit. Please try again later.",
		Headers: map[string]string{"retry-after": strconv.Itoa(secs),
			"anthropic-ratelimit-requests-reset": at, "anthropic-ratelimit-tokens-reset": at,
			"anthropic-ratelimit-input-tokens-reset": at, "anthropic-ratelimit-output-tokens-reset": at}}}
}

// Dynamic is a step computed from the request.
func Dynamic(f func(Request) Reply) Step { return Step{Func: f} }

// Message is one message of a request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text is the message's text: its string content or its text and
// tool_result blocks joined by newlines.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
	}
	_ = json.Unmarshal(m.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_result":
			parts = append(parts, Message{Content: b.Content}.Text())
		case "tool_use":
			parts = append(parts, "tool_use "+b.Name)
		}
	}
	return strings.Join(parts, "\n")
}

// Request is one recorded POST /v1/messages.
type Request struct {
	Model     string          `json:"model"`
	Messages  []Message       `json:"messages"`
	System    json.RawMessage `json:"system"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Body []byte `json:"-"`
}

// LastUserText is the text of the last user message (the CLI puts role
// "system" messages after it).
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// Contains reports whether s occurs anywhere in the request body.
func (r Request) Contains(s string) bool { return strings.Contains(string(r.Body), s) }

// ToolNames are the names of the tools offered to the model.
func (r Request) ToolNames() []string {
	var n []string
	for _, t := range r.Tools {
		n = append(n, t.Name)
	}
	return n
}

// ModelServer is a scripted fake Anthropic Messages API on 127.0.0.1.
// Each streaming request consumes the next step; when the script is
// exhausted it answers "done".
type ModelServer struct {
	*httptest.Server
	// The script, the requests and the key: a request whose API key
	// (x-api-key, or Authorization: Bearer) is not the one RequireKey
	// names is answered 401 authentication_error without taking a step.
	agenttest.ModelScript[Request, Step]

	thenMu sync.Mutex
	// then answers every request once the script is played (nil: "done")
	then func(Request) Reply
}

// Then makes f answer every request once the script is played, instead of
// "done": a server that serves any number of turns (make model).
func (m *ModelServer) Then(f func(Request) Reply) {
	m.thenMu.Lock()
	defer m.thenMu.Unlock()
	m.then = f
}

// NewModelServer starts a server playing script; it stops at test cleanup.
func NewModelServer(t testing.TB, script ...Step) *ModelServer {
	m := StartModelServer(script...)
	t.Cleanup(m.Close)
	return m
}

// StartModelServer starts a server playing script outside a test (the
// offline demo, scripts/demo); the caller closes it.
func StartModelServer(script ...Step) *ModelServer {
	m := &ModelServer{}
	m.Push(script...)
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// StartModelServerAt is StartModelServer on addr (127.0.0.1:PORT), a
// port that stays the same across restarts (make model MODEL_PORT=…).
func StartModelServerAt(addr string, script ...Step) (*ModelServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &ModelServer{}
	m.Push(script...)
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.Server.Listener.Close()
	m.Server.Listener = l
	m.Server.Start()
	return m, nil
}

// Env is the environment the real CLI needs against this server, with
// its state isolated in configDir.
func (m *ModelServer) Env(configDir string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + configDir,
		"CLAUDE_CONFIG_DIR=" + configDir,
		"ANTHROPIC_BASE_URL=" + m.URL,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"LANG=C.UTF-8",
	}
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	case r.URL.Path == "/v1/messages/count_tokens":
		writeJSON(w, 200, map[string]any{"input_tokens": 100})
		return
	default:
		http.NotFound(w, r)
		return
	}
	var req Request
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeJSON(w, 400, apiError("invalid_request_error", "fake: bad body: "+err.Error()))
		return
	}
	req.Body = body
	if m.Refuse(requestKey(r)) {
		w.Header().Set("request-id", "req_fake_refused")
		writeJSON(w, http.StatusUnauthorized, apiError("authentication_error", "invalid x-api-key"))
		return
	}
	if !req.Stream {
		// set_model's probe, one non-streaming request: not part of the script.
		writeJSON(w, 200, map[string]any{"id": "msg_fake_probe", "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{map[string]any{"type": "text", "text": "ok"}},
			"stop_reason": "end_turn", "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}})
		return
	}
	step, n, ok := m.Take(req)
	if !ok {
		m.thenMu.Lock()
		then := m.then
		m.thenMu.Unlock()
		step = Text("done")
		if then != nil {
			step = Dynamic(then)
		}
	}

	rep := step.Reply
	if step.Func != nil {
		rep = step.Func(req)
	}
	if rep.Block != nil {
		select {
		case <-rep.Block:
		case <-r.Context().Done():
			return
		}
	}
	if rep.Status != 0 {
		typ := rep.ErrorType
		if typ == "" {
			typ = map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 429: "rate_limit_error", 529: "overloaded_error"}[rep.Status]
			if typ == "" {
				typ = "api_error"
			}
		}
		msg := rep.ErrorMessage
		if msg == "" {
			msg = fmt.Sprintf("fake error %d", rep.Status)
		}
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("request-id", fmt.Sprintf("req_fake_%04d", n))
		writeJSON(w, rep.Status, apiError(typ, msg))
		return
	}
	m.stream(w, req, rep, n)
}

func (m *ModelServer) stream(w http.ResponseWriter, req Request, rep Reply, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%04d", n))
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if fl != nil {
			fl.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake_%04d", n), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1,
			"cache_creation_input_tokens": 5, "cache_read_input_tokens": 20},
	}})
	event("ping", map[string]any{"type": "ping"})
	idx := 0
	block := func(start map[string]any, deltas ...map[string]any) {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": start})
		for _, d := range deltas {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if rep.Thinking != "" {
		block(map[string]any{"type": "thinking", "thinking": ""},
			map[string]any{"type": "thinking_delta", "thinking": rep.Thinking},
			map[string]any{"type": "signature_delta", "signature": "fakesig"})
	}
	if rep.Text != "" || len(rep.Tools) == 0 {
		text := rep.Text
		if text == "" {
			text = "done"
		}
		block(map[string]any{"type": "text", "text": ""}, map[string]any{"type": "text_delta", "text": text})
	}
	for i, tu := range rep.Tools {
		in, ok := tu.Input.(json.RawMessage)
		if !ok {
			in, _ = json.Marshal(tu.Input)
		}
		if len(in) == 0 || string(in) == "null" {
			in = json.RawMessage("{}")
		}
		block(map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake_%04d_%d", n, i), "name": tu.Name, "input": map[string]any{}},
			map[string]any{"type": "input_json_delta", "partial_json": string(in)})
	}
	stop := "end_turn"
	if len(rep.Tools) > 0 {
		stop = "tool_use"
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// UsageLimited is a step answering 429 as the API refuses a request over
// a subscription's usage limit (Claude Code logged in with claude.ai):
// anthropic-ratelimit-unified-status rejected, with the limit that was
// hit and its reset in Unix seconds.
func UsageLimited(reset time.Time) Step {
	epoch := strconv.FormatInt(reset.Unix(), 10)
	return Step{Reply: Reply{Status: http.StatusTooManyRequests, ErrorType: "rate_limit_error",
		ErrorMessage: "This request would exceed your account's rate limit. Please try again later.",
		Headers: map[string]string{"anthropic-ratelimit-unified-status": "rejected",
			"anthropic-ratelimit-unified-reset":                epoch,
			"anthropic-ratelimit-unified-representative-claim": "five_hour",
			"anthropic-ratelimit-unified-5h-status":            "rejected",
			"anthropic-ratelimit-unified-5h-reset":             epoch}}}
}

// requestKey is the API key a request carries: x-api-key, or the bearer
// token of Authorization (ANTHROPIC_AUTH_TOKEN, an OAuth token).
func requestKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func apiError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteOAuthLogin logs the CLI of configDir in as a claude.ai subscriber
// would be (.credentials.json with a fake OAuth token valid until
// expires), so it sends a bearer token instead of an API key and reports
// a subscription's usage limits with their reset time. The CLI must then
// get no ANTHROPIC_API_KEY.
func WriteOAuthLogin(t testing.TB, configDir string, expires time.Time) {
	t.Helper()
	cred := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-fake","refreshToken":"sk-ant-ort01-fake","expiresAt":%d,"scopes":["user:inference","user:profile"],"subscriptionType":"max"}}`, expires.UnixMilli())
	if err := os.WriteFile(configDir+"/.credentials.json", []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
}
