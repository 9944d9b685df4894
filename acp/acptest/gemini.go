package acptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// GeminiServer is a scripted fake of the Gemini API (generativelanguage
// v1beta) on 127.0.0.1: POST /v1beta/models/{model}:streamGenerateContent
// (SSE with ?alt=sse), :generateContent and :countTokens. Gemini CLI reaches
// it through GOOGLE_GEMINI_BASE_URL=URL. Anything else is logged and
// answered 404.
type GeminiServer struct {
	*core
	URL string // base URL, without /v1beta
	srv *httptest.Server
}

// NewGeminiServer starts the server; it is closed at test cleanup.
func NewGeminiServer(t testing.TB) *GeminiServer {
	return closedAtCleanup(t, StartGeminiServer())
}

// StartGeminiServer starts the server outside a test (the offline demo);
// the caller closes it.
func StartGeminiServer() *GeminiServer {
	s := &GeminiServer{core: newCore()}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *GeminiServer) Close() { s.srv.Close() }

var geminiPath = regexp.MustCompile(`^/(v1beta|v1|v1alpha)/models/([^:/]+):([A-Za-z]+)$`)

type geminiPart struct {
	Text         *string `json:"text,omitempty"`
	Thought      bool    `json:"thought,omitempty"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

type geminiBody struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig *struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

// geminiTurns normalizes contents: a user content's functionResponse parts
// become a "tool" turn after its text (Gemini sends results as role user).
// Thought parts are not part of the conversation's text.
func geminiTurns(b geminiBody) []Turn {
	var out []Turn
	for _, c := range b.Contents {
		var texts []string
		var calls []Call
		var results []Result
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				calls = append(calls, Call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: compactJSON(p.FunctionCall.Args)})
			case p.FunctionResponse != nil:
				results = append(results, Result{ID: p.FunctionResponse.ID, Name: p.FunctionResponse.Name,
					Output: p.FunctionResponse.Name + " -> " + string(compactJSON(p.FunctionResponse.Response))})
			case p.Text != nil && !p.Thought:
				texts = append(texts, *p.Text)
			}
		}
		role := c.Role
		if role == "" {
			role = "user"
		}
		if role == "model" {
			out = append(out, Turn{Role: "model", Text: strings.Join(texts, ""), Calls: calls})
			continue
		}
		if len(texts) > 0 {
			// The CLI sends a <session_context> part before the prompt: the
			// last text part is what the user said.
			out = append(out, Turn{Role: "user", Text: texts[len(texts)-1]})
		}
		if len(results) > 0 {
			out = append(out, Turn{Role: "tool", Results: results})
		}
	}
	return out
}

func compactJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return b
	}
	return c.Bytes()
}

func (s *GeminiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Key: r.Header.Get("x-goog-api-key")}
	if req.Key == "" {
		req.Key = r.URL.Query().Get("key")
	}
	m := geminiPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPost || m == nil {
		s.reply(w, req, RuleNotFound, 404, geminiError(404, "fake: no such endpoint "+r.Method+" "+r.URL.Path, 0))
		return
	}
	req.Model, req.Op = m[2], m[3]
	req.Stream = req.Op == "streamGenerateContent"
	var gb geminiBody
	if err := json.Unmarshal(body, &gb); err != nil {
		s.reply(w, req, RuleBadBody, 400, geminiError(400, "fake: bad body: "+err.Error(), 0))
		return
	}
	req.Turns = geminiTurns(gb)
	for _, t := range gb.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, f.Name)
		}
	}
	if s.faulted(w, req, s.fail) {
		return
	}
	switch req.Op {
	case "countTokens":
		s.reply(w, req, RuleCountTokens, 200, map[string]any{"totalTokens": UsageInput})
		return
	case "streamGenerateContent", "generateContent":
	default:
		s.reply(w, req, RuleNotFound, 404, geminiError(404, "fake: no such method "+req.Op, 0))
		return
	}

	var schema json.RawMessage
	jsonMode := gb.GenerationConfig != nil && gb.GenerationConfig.ResponseMimeType == "application/json"
	if jsonMode {
		schema = gb.GenerationConfig.ResponseJSONSchema
		if len(schema) == 0 {
			schema = gb.GenerationConfig.ResponseSchema
		}
	}
	d, ok := s.scripted(w, &req, jsonMode, schema, s.fail)
	if !ok {
		return
	}
	req.Status = 200
	s.record(req)
	pause(r.Context(), d.sleep)
	s.answer(w, req, d)
}

func (s *GeminiServer) fail(w http.ResponseWriter, status int, retry time.Duration) {
	if retry > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(retry.Round(time.Second)/time.Second)))
	}
	msg := fmt.Sprintf("fake: injected failure %d", status)
	switch status {
	case 429:
		msg = "fake: you exceeded your current quota"
		if retry > 0 {
			msg += fmt.Sprintf(", please retry in %gs", retry.Seconds())
		}
	case 400, 401, 403:
		msg = "fake: API key not valid. Please pass a valid API key."
	}
	writeJSON(w, status, geminiError(status, msg, retry))
}

func geminiError(code int, msg string, retry time.Duration) map[string]any {
	status := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[code]
	if status == "" {
		status = "INTERNAL"
	}
	e := map[string]any{"code": code, "message": msg, "status": status}
	var details []any
	if code == 400 || code == 401 || code == 403 {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": "API_KEY_INVALID", "domain": "googleapis.com"})
	}
	if retry > 0 {
		details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": fmt.Sprintf("%gs", retry.Seconds())})
	}
	if details != nil {
		e["details"] = details
	}
	return map[string]any{"error": e}
}

func (s *GeminiServer) answer(w http.ResponseWriter, req Request, d decision) {
	usage := map[string]any{"promptTokenCount": UsageInput, "cachedContentTokenCount": UsageInputCached,
		"candidatesTokenCount": UsageOutput, "totalTokenCount": UsageInput + UsageOutput}
	cand := func(parts []any, last bool) map[string]any {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		out := map[string]any{"candidates": []any{c}, "modelVersion": req.Model}
		if last {
			c["finishReason"] = "STOP"
			out["usageMetadata"] = usage
		}
		return out
	}
	var chunks []map[string]any
	if d.think != "" {
		chunks = append(chunks, cand([]any{map[string]any{"text": d.think, "thought": true}}, false))
	}
	if d.call != nil {
		var args any = map[string]any{}
		_ = json.Unmarshal(d.call.Args, &args)
		chunks = append(chunks, cand([]any{map[string]any{"functionCall": map[string]any{"name": d.call.Name, "args": args}}}, true))
	} else {
		parts := split(d.text)
		if d.rule == RuleHelperJSON {
			parts = []string{d.text} // one parseable piece
		}
		for i, p := range parts {
			chunks = append(chunks, cand([]any{map[string]any{"text": p}}, i == len(parts)-1))
		}
	}
	if !req.Stream {
		// One response: every part of every chunk, the last chunk's metadata.
		var parts []any
		for _, c := range chunks {
			content := c["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)
			for _, p := range content["parts"].([]any) {
				pm := p.(map[string]any)
				if n := len(parts); n > 0 {
					prev := parts[n-1].(map[string]any)
					pt, ok1 := prev["text"].(string)
					t, ok2 := pm["text"].(string)
					if ok1 && ok2 && prev["thought"] == pm["thought"] {
						prev["text"] = pt + t // the split halves of one text
						continue
					}
				}
				parts = append(parts, pm)
			}
		}
		writeJSON(w, 200, cand(parts, true))
		return
	}
	writeSSE(w, chunks, "\r\n", "")
}
