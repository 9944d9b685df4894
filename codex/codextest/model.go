// Package codextest helps tests drive the real Codex CLI offline: a scripted
// fake of the OpenAI Responses API (the only endpoint Codex 0.171.0 calls for
// a custom provider is POST /v1/responses, answered as SSE), a CODEX_HOME
// that points at it, and the environment to run the CLI with.
//
// The facts it rests on: docs/agents.md, Codex, testing against it.
package codextest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// Model is the catalog slug the fake provider serves. A bundled-catalog slug
// is needed: an unknown one warns and loses the apply_patch tool.
const Model = "gpt-5.5"

// Request is one recorded /v1/responses request.
type Request struct {
	Model  string
	Effort string           // reasoning.effort, "" when absent
	Input  []map[string]any // the input items as sent (developer prompt, history, user text)
	Tools  []string         // tool names offered
	Header http.Header
	Body   []byte
}

// UserTexts are the texts of the user messages in Input, in order
// (environment context included).
func (r Request) UserTexts() []string { return r.messageTexts("user") }

func (r Request) messageTexts(role string) []string {
	var out []string
	for _, it := range r.Input {
		if it["type"] != "message" || it["role"] != role {
			continue
		}
		parts, _ := it["content"].([]any)
		for _, p := range parts {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// LastUserText is the newest user message text: what the model was just told.
func (r Request) LastUserText() string {
	t := r.UserTexts()
	if len(t) == 0 {
		return ""
	}
	return t[len(t)-1]
}

// ToolOutputs are the outputs of function_call_output and
// custom_tool_call_output items in Input, keyed by call_id.
func (r Request) ToolOutputs() map[string]string {
	out := map[string]string{}
	for _, it := range r.Input {
		switch it["type"] {
		case "function_call_output", "custom_tool_call_output":
			id, _ := it["call_id"].(string)
			switch o := it["output"].(type) {
			case string:
				out[id] = o
			default:
				b, _ := json.Marshal(o)
				out[id] = string(b)
			}
		}
	}
	return out
}

// ItemsOfType returns the Input items whose type is typ.
func (r Request) ItemsOfType(typ string) []map[string]any {
	var out []map[string]any
	for _, it := range r.Input {
		if it["type"] == typ {
			out = append(out, it)
		}
	}
	return out
}

// Reply is what the fake model answers one request with. Exactly one of the
// fields is meant to be set.
type Reply struct {
	Status int // an HTTP error status (e.g. 500) instead of a stream
	// ErrorBody and Headers go with Status: the JSON body (default a
	// server_error) and the headers of the error answer.
	ErrorBody string
	Headers   map[string]string
	Text      string // an assistant message
	Exec      *Exec  // an exec_command function call
	Patch     string // an apply_patch custom tool call (the whole "*** Begin Patch" text)
	CallID    string // optional call id; the server picks "call_N" otherwise

	// Deltas streams Text as this many output_text deltas, as a real model
	// streams its tokens (0 or 1: one delta).
	Deltas int
	// DeltaEvery is the pause after each delta, each sent at once: a model
	// that takes its time to answer.
	DeltaEvery time.Duration
}

// Exec is an exec_command call.
type Exec struct {
	Cmd           string
	Escalate      bool   // sandbox_permissions: require_escalated
	Justification string // shown to the host as the approval's reason
	YieldTimeMS   int    // 0: the CLI default
}

// Step answers one request.
type Step func(Request) Reply

// Say answers with an assistant message.
func Say(text string) Step { return func(Request) Reply { return Reply{Text: text} } }

// SayStreamed answers with an assistant message in n deltas.
func SayStreamed(text string, n int) Step {
	return func(Request) Reply { return Reply{Text: text, Deltas: n} }
}

// splitText cuts s into n pieces of about the same length, on rune
// boundaries (fewer when s has fewer runes; s itself when n < 2).
func splitText(s string, n int) []string {
	r := []rune(s)
	if n < 2 || len(r) < 2 {
		return []string{s}
	}
	n = min(n, len(r))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// Run answers with an exec_command call of cmd inside the sandbox.
func Run(cmd string) Step { return func(Request) Reply { return Reply{Exec: &Exec{Cmd: cmd}} } }

// Escalate answers with an exec_command call asking to leave the sandbox.
func Escalate(cmd, justification string) Step {
	return func(Request) Reply {
		return Reply{Exec: &Exec{Cmd: cmd, Escalate: true, Justification: justification}}
	}
}

// Patch answers with an apply_patch call.
func Patch(patch string) Step { return func(Request) Reply { return Reply{Patch: patch} } }

// AddFile is the apply_patch text that creates path with the given lines.
func AddFile(path string, lines ...string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// Fail answers with an HTTP error status.
func Fail(status int) Step { return func(Request) Reply { return Reply{Status: status} } }

// UsageLimited answers 429 as the OpenAI API refuses a request over a
// ChatGPT plan's usage limit: error type usage_limit_reached, with the
// reset as resets_at (Unix seconds) and resets_in_seconds, and the plan's
// window in the x-codex-primary-* headers ChatGPT's backend sends.
func UsageLimited(reset time.Time) Step {
	return func(Request) Reply {
		secs := int64(time.Until(reset).Seconds())
		if secs < 0 {
			secs = 0
		}
		body, _ := json.Marshal(map[string]any{"error": map[string]any{
			"type": "usage_limit_reached", "message": "The usage limit has been reached",
			"plan_type": "plus", "resets_at": reset.Unix(), "resets_in_seconds": secs}})
		return Reply{Status: http.StatusTooManyRequests, ErrorBody: string(body), Headers: map[string]string{
			"x-codex-primary-used-percent":   "100",
			"x-codex-primary-window-minutes": "300",
			"x-codex-primary-reset-at":       strconv.FormatInt(reset.Unix(), 10)}}
	}
}

// RateLimited answers 429 rate_limit_exceeded with the reset in
// retry-after (seconds), as the API refuses a request over a key's rate
// limit.
func RateLimited(reset time.Time) Step {
	return func(Request) Reply {
		secs := int64(time.Until(reset).Round(time.Second).Seconds())
		if secs < 0 {
			secs = 0
		}
		return Reply{Status: http.StatusTooManyRequests,
			ErrorBody: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`,
			Headers:   map[string]string{"retry-after": strconv.FormatInt(secs, 10)}}
	}
}

// ModelServer is a scripted fake Responses API on 127.0.0.1. Steps are
// consumed in order, one per request; a request past the end of the script
// fails the test.
type ModelServer struct {
	URL string // base URL including /v1

	// The script, the requests and the key: a request whose API key
	// (Authorization: Bearer) is not the one RequireKey names is answered
	// 401 invalid_api_key without taking a step.
	agenttest.ModelScript[Request, Step]

	t   testing.TB
	srv *httptest.Server
}

// NewModelServer starts the server; it is closed by t.Cleanup.
func NewModelServer(t testing.TB, steps ...Step) *ModelServer {
	t.Helper()
	m := &ModelServer{t: t}
	m.Push(steps...)
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = m.srv.URL + "/v1"
	t.Cleanup(m.srv.Close)
	return m
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		m.t.Errorf("codextest: unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		Model     string           `json:"model"`
		Input     []map[string]any `json:"input"`
		Reasoning *struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		m.t.Errorf("codextest: request body: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if m.Refuse(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	req := Request{Model: in.Model, Input: in.Input, Header: r.Header.Clone(), Body: body}
	if in.Reasoning != nil {
		req.Effort = in.Reasoning.Effort
	}
	for _, tl := range in.Tools {
		n := tl.Name
		if n == "" {
			n = tl.Type
		}
		req.Tools = append(req.Tools, n)
	}

	step, n, _ := m.Take(req)
	if step == nil {
		m.t.Errorf("codextest: request %d past the end of the script (last user text %q)", n, req.LastUserText())
		http.Error(w, "script exhausted", http.StatusInternalServerError)
		return
	}
	rep := step(req)
	if rep.Status != 0 && rep.Status != http.StatusOK {
		body := rep.ErrorBody
		if body == "" {
			body = `{"error":{"message":"fake failure","type":"server_error"}}`
		}
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, body)
		return
	}
	m.stream(w, r, n, rep)
}

func (m *ModelServer) stream(w http.ResponseWriter, r *http.Request, n int, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	respID := fmt.Sprintf("resp_%d", n)
	callID := rep.CallID
	if callID == "" {
		callID = fmt.Sprintf("call_%d", n)
	}
	send := func(event string, data map[string]any) {
		data["type"] = event
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	send("response.created", map[string]any{"response": map[string]any{"id": respID}})
	switch {
	case rep.Exec != nil:
		args := map[string]any{"cmd": rep.Exec.Cmd}
		if rep.Exec.Escalate {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = rep.Exec.Justification
		}
		if rep.Exec.YieldTimeMS > 0 {
			args["yield_time_ms"] = rep.Exec.YieldTimeMS
		}
		a, _ := json.Marshal(args)
		send("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": "exec_command",
			"arguments": string(a), "status": "completed",
		}})
	case rep.Patch != "":
		send("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "custom_tool_call", "id": "ctc_" + callID, "call_id": callID, "name": "apply_patch",
			"input": rep.Patch, "status": "completed",
		}})
	default:
		msgID := fmt.Sprintf("msg_%d", n)
		send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{},
		}})
		for _, d := range splitText(rep.Text, rep.Deltas) {
			send("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": d})
			if rep.DeltaEvery > 0 {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(rep.DeltaEvery):
				}
			}
		}
		send("response.output_item.done", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}},
		}})
	}
	send("response.completed", map[string]any{"response": map[string]any{"id": respID, "usage": map[string]any{
		"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 40},
		"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110,
	}}})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// WriteCodexHome writes dir/config.toml pointing Codex at the fake server,
// with retries off (an upstream failure otherwise takes ~25 s) and the
// plugin and analytics lookups off (they would try the network on start).
func WriteCodexHome(t testing.TB, dir, serverURL string) {
	t.Helper()
	cfg := fmt.Sprintf(`model = %q
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
`, Model, serverURL)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Env is a minimal environment for the CLI: PATH, HOME (inside codexHome, so
// nothing of the real user's is read), CODEX_HOME, the fake provider key,
// TMPDIR inside codexHome (a CODEX_HOME under $TMPDIR makes Codex warn and
// skip its helper aliases) and loopback exempt from any proxy.
func Env(codexHome string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	home := filepath.Join(codexHome, "home")
	tmp := filepath.Join(codexHome, "tmp")
	_ = os.MkdirAll(home, 0o755)
	_ = os.MkdirAll(tmp, 0o755)
	return []string{
		"PATH=" + path,
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"TMPDIR=" + tmp,
		"FAKE_OPENAI_API_KEY=dummy",
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"LANG=C.UTF-8",
	}
}
