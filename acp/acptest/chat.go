package acptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ChatServer is a scripted fake of the OpenAI chat-completions API on
// 127.0.0.1: POST /v1/chat/completions, streamed as SSE (a usage chunk, then
// data: [DONE]) or answered as one JSON object, and GET /v1/models. Qwen
// Code (OPENAI_BASE_URL), OpenCode (a provider's baseURL) and Copilot
// (COPILOT_PROVIDER_BASE_URL) reach it at URL. Anything else is logged and
// answered 404.
type ChatServer struct {
	*core
	URL   string // base URL including /v1
	Model string // the model GET /v1/models lists
	srv   *httptest.Server
}

// NewChatServer starts the server; it is closed at test cleanup.
func NewChatServer(t testing.TB) *ChatServer {
	return closedAtCleanup(t, StartChatServer())
}

// StartChatServer starts the server outside a test; the caller closes it.
func StartChatServer() *ChatServer {
	s := &ChatServer{core: newCore(), Model: "fake-model"}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server.
func (s *ChatServer) Close() { s.srv.Close() }

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatBody struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// contentText is a message's text: its string content, or its text parts
// joined by newlines.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// chatTurns normalizes messages; consecutive tool messages make one turn.
func chatTurns(b chatBody) []Turn {
	var out []Turn
	for _, m := range b.Messages {
		switch m.Role {
		case "user":
			out = append(out, Turn{Role: "user", Text: contentText(m.Content)})
		case "assistant":
			t := Turn{Role: "model", Text: contentText(m.Content)}
			for _, tc := range m.ToolCalls {
				t.Calls = append(t.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: compactJSON(json.RawMessage(tc.Function.Arguments))})
			}
			out = append(out, t)
		case "tool":
			r := Result{ID: m.ToolCallID, Output: contentText(m.Content)}
			if n := len(out); n > 0 && out[n-1].Role == "tool" {
				out[n-1].Results = append(out[n-1].Results, r)
				continue
			}
			out = append(out, Turn{Role: "tool", Results: []Result{r}})
		}
	}
	return out
}

func (s *ChatServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body}
	req.Key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if req.Key == "" {
		req.Key = r.Header.Get("api-key")
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		req.Op = "models"
		s.reply(w, req, "models", 200, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": s.Model, "object": "model", "owned_by": "fake"}}})
		return
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
	default:
		s.reply(w, req, RuleNotFound, 404, chatError("fake: no such endpoint "+r.Method+" "+r.URL.Path, "invalid_request_error", ""))
		return
	}
	req.Op = "chat.completions"
	var cb chatBody
	if err := json.Unmarshal(body, &cb); err != nil {
		s.reply(w, req, RuleBadBody, 400, chatError("fake: bad body: "+err.Error(), "invalid_request_error", ""))
		return
	}
	req.Model, req.Stream, req.Turns = cb.Model, cb.Stream, chatTurns(cb)
	for _, t := range cb.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	if s.faulted(w, req, s.fail) {
		return
	}
	var schema json.RawMessage
	jsonMode := cb.ResponseFormat != nil && cb.ResponseFormat.Type != "text"
	if jsonMode && cb.ResponseFormat.JSONSchema != nil {
		schema = cb.ResponseFormat.JSONSchema.Schema
	}
	d, ok := s.scripted(w, &req, jsonMode, schema, s.fail)
	if !ok {
		return
	}
	var callID string
	if d.call != nil {
		callID = s.nextCallID()
		c := *d.call
		c.ID = callID
		req.Answer = &c
	}
	req.Status = 200
	s.record(req)
	pause(r.Context(), d.sleep)
	s.answer(w, req, d, callID)
}

func (s *ChatServer) fail(w http.ResponseWriter, status int, retry time.Duration) {
	if retry > 0 {
		secs := int(retry.Round(time.Second) / time.Second)
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		w.Header().Set("retry-after-ms", fmt.Sprint(retry.Milliseconds()))
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", fmt.Sprintf("%gs", retry.Seconds()))
	}
	switch status {
	case 429:
		msg := "fake: rate limit reached for requests"
		if retry > 0 {
			msg += fmt.Sprintf(". Please try again in %gs.", retry.Seconds())
		}
		writeJSON(w, status, chatError(msg, "requests", "rate_limit_exceeded"))
	case 401:
		writeJSON(w, status, chatError("fake: incorrect API key provided", "invalid_request_error", "invalid_api_key"))
	case 403:
		writeJSON(w, status, chatError("fake: this API key may not be used", "permission_denied", "permission_denied"))
	default:
		writeJSON(w, status, chatError(fmt.Sprintf("fake: injected failure %d", status), "server_error", ""))
	}
}

func chatError(msg, typ, code string) map[string]any {
	e := map[string]any{"message": msg, "type": typ}
	if code != "" {
		e["code"] = code
	}
	return map[string]any{"error": e}
}

func (s *ChatServer) answer(w http.ResponseWriter, req Request, d decision, callID string) {
	id := fmt.Sprintf("chatcmpl-fake-%d", len(s.Requests()))
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": UsageInput, "completion_tokens": UsageOutput,
		"total_tokens": UsageInput + UsageOutput, "prompt_tokens_details": map[string]any{"cached_tokens": UsageInputCached}}
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if d.call != nil {
		msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
			"function": map[string]any{"name": d.call.Name, "arguments": string(d.call.Args)}}}
		finish = "tool_calls"
	} else {
		msg["content"] = d.text
	}
	if d.think != "" {
		msg["reasoning_content"] = d.think
	}
	if !req.Stream {
		writeJSON(w, 200, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	chunks := []map[string]any{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if d.think != "" {
		chunks = append(chunks, chunk(map[string]any{"reasoning_content": d.think}, nil))
	}
	if d.call != nil {
		chunks = append(chunks,
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
				"function": map[string]any{"name": d.call.Name, "arguments": ""}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
				"function": map[string]any{"arguments": string(d.call.Args)}}}}, nil))
	} else {
		pieces := split(d.text)
		if d.rule == RuleHelperJSON {
			pieces = []string{d.text}
		}
		for _, p := range pieces {
			chunks = append(chunks, chunk(map[string]any{"content": p}, nil))
		}
	}
	chunks = append(chunks, chunk(map[string]any{}, finish))
	usageChunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
		"choices": []any{}, "usage": usage}
	chunks = append(chunks, usageChunk)

	w.Header().Set("Cache-Control", "no-cache")
	writeSSE(w, chunks, "\n", "[DONE]")
}
