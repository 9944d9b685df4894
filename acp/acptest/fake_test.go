package acptest

// Tests of the fakes themselves, over real HTTP; no agent CLI needed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, key string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// sseData are the payloads of an SSE body's data: lines.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

var geminiTools = []any{map[string]any{"functionDeclarations": []any{
	map[string]any{"name": "write_file"}, map[string]any{"name": "run_shell_command"}}}}

func geminiUser(text string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{
		map[string]any{"text": "<session_context>ctx</session_context>"}, map[string]any{"text": text}}}
}

// geminiStream posts contents and returns the parts the stream carried and
// the last chunk's usage.
func geminiStream(t *testing.T, s *GeminiServer, contents ...any) ([]map[string]any, map[string]any) {
	t.Helper()
	resp, body := post(t, s.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", FakeKey,
		map[string]any{"contents": contents, "tools": geminiTools})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !bytes.Contains(body, []byte("\r\n\r\n")) {
		t.Errorf("SSE events not separated by CRLF CRLF: %q", body)
	}
	var parts []map[string]any
	var usage map[string]any
	for _, d := range sseData(t, body) {
		var c struct {
			Candidates []struct {
				Content struct {
					Parts []map[string]any `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata map[string]any `json:"usageMetadata"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		parts = append(parts, c.Candidates[0].Content.Parts...)
		if c.UsageMetadata != nil {
			usage = c.UsageMetadata
			if c.Candidates[0].FinishReason != "STOP" {
				t.Errorf("last chunk finishReason %q", c.Candidates[0].FinishReason)
			}
		}
	}
	return parts, usage
}

func textOf(parts []map[string]any) string {
	var b strings.Builder
	for _, p := range parts {
		if s, ok := p["text"].(string); ok && p["thought"] != true {
			b.WriteString(s)
		}
	}
	return b.String()
}

func TestGeminiScript(t *testing.T) {
	s := NewGeminiServer(t)

	parts, usage := geminiStream(t, s, geminiUser("hello there"))
	if got := textOf(parts); got != "REPLY: hello there" || len(parts) != 2 {
		t.Errorf("reply %q in %d parts, want it split in 2", got, len(parts))
	}
	if usage["promptTokenCount"] != float64(UsageInput) || usage["cachedContentTokenCount"] != float64(UsageInputCached) ||
		usage["candidatesTokenCount"] != float64(UsageOutput) {
		t.Errorf("usage %v", usage)
	}

	// Two markers: one call per request, then DONE after the last result.
	prompt := geminiUser(`<<tool write_file {"file_path":"/w/a.txt","content":"x >> y"}>> and <<tool run_shell_command {"command":"ls"}>>`)
	parts, _ = geminiStream(t, s, prompt)
	fc, _ := parts[0]["functionCall"].(map[string]any)
	if fc["name"] != "write_file" || !sameJSON(fc["args"], map[string]any{"file_path": "/w/a.txt", "content": "x >> y"}) {
		t.Fatalf("first call %v", parts)
	}
	call1 := map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": fc}}}
	result := func(name string) map[string]any {
		return map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
			"name": name, "response": map[string]any{"output": "ok"}}}}}
	}
	parts, _ = geminiStream(t, s, prompt, call1, result("write_file"))
	fc2, _ := parts[0]["functionCall"].(map[string]any)
	if fc2["name"] != "run_shell_command" {
		t.Fatalf("second call %v", parts)
	}
	call2 := map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": fc2}}}
	parts, _ = geminiStream(t, s, prompt, call1, result("write_file"), call2, result("run_shell_command"))
	if got := textOf(parts); got != `DONE: run_shell_command -> {"output":"ok"}` {
		t.Errorf("after the last result: %q", got)
	}

	// "approved" re-issues the model's own latest call, same arguments.
	parts, _ = geminiStream(t, s, prompt, call1, result("write_file"), call2, result("run_shell_command"),
		geminiUser("A person approved your call. Run it again."))
	if fc, _ := parts[0]["functionCall"].(map[string]any); fc["name"] != "run_shell_command" || !sameJSON(fc["args"], map[string]any{"command": "ls"}) {
		t.Errorf("re-issued %v", parts)
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Rule != RuleReissue || last.Answer == nil || last.Answer.Name != "run_shell_command" {
		t.Errorf("logged %+v", last)
	}
	// With no call in the history, the latest earlier marker is used.
	geminiStream(t, s, prompt, geminiUser("approved"))
	if last := s.Requests()[len(s.Requests())-1]; last.Rule != RuleReissueMarker || last.Answer.Name != "run_shell_command" {
		t.Errorf("reissue from marker: %+v", last)
	}

	// A marker naming a tool the request does not offer answers text.
	parts, _ = geminiStream(t, s, geminiUser(`<<tool delete_everything {}>>`))
	if !strings.HasPrefix(textOf(parts), "REPLY: no tool") {
		t.Errorf("unoffered tool: %v", parts)
	}
	// A thought part comes first.
	parts, _ = geminiStream(t, s, geminiUser(`<<think pondering>> hi`))
	if parts[0]["thought"] != true || parts[0]["text"] != "pondering" {
		t.Errorf("thought: %v", parts)
	}
}

func TestGeminiHelpers(t *testing.T) {
	s := NewGeminiServer(t)
	resp, body := post(t, s.URL+"/v1beta/models/gemini-2.5-flash:generateContent", FakeKey, map[string]any{
		"contents": []any{geminiUser("classify")},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "object", "properties": map[string]any{
				"next_speaker": map[string]any{"type": "string", "enum": []any{"user", "model"}},
				"reasoning":    map[string]any{"type": "string"},
				"score":        map[string]any{"type": "integer"}}}}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out struct {
		Candidates []struct {
			Content struct {
				Parts []struct{ Text string } `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	_ = json.Unmarshal(body, &out)
	var filled map[string]any
	if err := json.Unmarshal([]byte(out.Candidates[0].Content.Parts[0].Text), &filled); err != nil ||
		filled["next_speaker"] != "user" || filled["score"] != float64(10) || filled["reasoning"] != "fake" {
		t.Errorf("schema answer %s (%v)", body, err)
	}
	resp, body = post(t, s.URL+"/v1beta/models/gemini-2.5-flash:countTokens", FakeKey, map[string]any{"contents": []any{}})
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"totalTokens"`)) {
		t.Errorf("countTokens %d %s", resp.StatusCode, body)
	}
	resp, _ = post(t, s.URL+"/v1beta/models/x:embedContent", FakeKey, map[string]any{})
	if resp.StatusCode != 404 {
		t.Errorf("unknown method %d", resp.StatusCode)
	}
	r, _ := http.Get(s.URL + "/v1beta/models")
	r.Body.Close()
	rules := map[string]int{}
	for _, q := range s.Requests() {
		rules[q.Rule]++
		if q.Rule == RuleHelperJSON && (q.Model != "gemini-2.5-flash" || q.Op != "generateContent" || q.Key != FakeKey) {
			t.Errorf("logged %+v", q)
		}
	}
	if rules[RuleHelperJSON] != 1 || rules[RuleCountTokens] != 1 || rules[RuleNotFound] != 2 {
		t.Errorf("rules %v", rules)
	}
}

func TestGeminiFaults(t *testing.T) {
	s := NewGeminiServer(t)
	url := s.URL + "/v1beta/models/m:streamGenerateContent?alt=sse"
	body := map[string]any{"contents": []any{geminiUser("hi")}, "tools": geminiTools}

	s.Inject(Fault{Status: 500, Times: 1})
	if resp, b := post(t, url, FakeKey, body); resp.StatusCode != 500 || !bytes.Contains(b, []byte(`"INTERNAL"`)) {
		t.Errorf("first: %d %s", resp.StatusCode, b)
	}
	if resp, _ := post(t, url, FakeKey, body); resp.StatusCode != 200 {
		t.Errorf("a fault for one request answered the next with %d", resp.StatusCode)
	}

	s.Inject(Fault{Status: 429, RetryAfter: 20 * time.Second})
	for range 2 {
		resp, b := post(t, url, FakeKey, body)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "20" ||
			!bytes.Contains(b, []byte(`"retryDelay":"20s"`)) || !bytes.Contains(b, []byte("RESOURCE_EXHAUSTED")) {
			t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
		}
	}
	// Helper requests are not hit by a fault without Match.
	if resp, _ := post(t, s.URL+"/v1beta/models/m:countTokens", FakeKey, map[string]any{}); resp.StatusCode != 200 {
		t.Errorf("countTokens under a fault: %d", resp.StatusCode)
	}
	s.ClearFaults()

	s.RequireKey("other-key", 403)
	if resp, b := post(t, url, FakeKey, body); resp.StatusCode != 403 || !bytes.Contains(b, []byte("API_KEY_INVALID")) {
		t.Errorf("refused key: %d %s", resp.StatusCode, b)
	}
	if resp, _ := post(t, url, "other-key", body); resp.StatusCode != 200 {
		t.Errorf("accepted key: %d", resp.StatusCode)
	}
	s.RequireKey("", 0)

	body["contents"] = []any{geminiUser("<<fail 503 once>> hi")}
	if resp, _ := post(t, url, FakeKey, body); resp.StatusCode != 503 {
		t.Errorf("fail marker: %d", resp.StatusCode)
	}
	if resp, _ := post(t, url, FakeKey, body); resp.StatusCode != 200 {
		t.Errorf("fail marker once, second request: %d", resp.StatusCode)
	}
	rules := []string{}
	for _, q := range s.Requests() {
		rules = append(rules, q.Rule)
	}
	want := "fault reply fault fault count-tokens key-refused reply fail-marker reply"
	if strings.Join(rules, " ") != want {
		t.Errorf("rules %v, want %s", rules, want)
	}
}

// A sleeping answer ends when the client goes away; WaitFor sees the
// request as soon as it arrives.
func TestSleepAndWaitFor(t *testing.T) {
	s := NewGeminiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	b, _ := json.Marshal(map[string]any{"contents": []any{geminiUser("<<sleep 60s>> slow")}, "tools": geminiTools})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", bytes.NewReader(b))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	q, err := s.WaitFor(wctx, func(q Request) bool { return strings.Contains(q.LastUserText(), "slow") })
	if err != nil || q.Rule != RuleReply {
		t.Fatalf("WaitFor: %+v %v", q, err)
	}
	t0 := time.Now()
	cancel()
	if err := <-done; err == nil {
		t.Error("the request completed")
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("cancel took %s", d)
	}
	short, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	if _, err := s.WaitFor(short, func(Request) bool { return false }); err == nil {
		t.Error("WaitFor without a match returned no error")
	}
}

func chatBodyWith(stream bool, msgs ...any) map[string]any {
	return map[string]any{"model": "fake-model", "stream": stream, "messages": msgs,
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "write"}},
			map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}}
}

func TestChatStream(t *testing.T) {
	s := NewChatServer(t)
	user := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": `<<think hmm>> <<tool bash {"command":"echo hi"}>>`}}}
	resp, body := post(t, s.URL+"/chat/completions", FakeKey, chatBodyWith(true, map[string]any{"role": "system", "content": "sys"}, user))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	data := sseData(t, body)
	if data[len(data)-1] != "[DONE]" {
		t.Errorf("last event %q", data[len(data)-1])
	}
	var args, name, id, reasoning, finish string
	var usage map[string]any
	for _, d := range data[:len(data)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Error("the usage chunk has choices")
			}
			usage = c.Usage
			continue
		}
		ch := c.Choices[0]
		reasoning += ch.Delta.ReasoningContent
		for _, tc := range ch.Delta.ToolCalls {
			args += tc.Function.Arguments
			name += tc.Function.Name
			id += tc.ID
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if name != "bash" || args != `{"command":"echo hi"}` || id != "call_1" || finish != "tool_calls" || reasoning != "hmm" {
		t.Errorf("streamed call %q %q %q finish %q reasoning %q", name, args, id, finish, reasoning)
	}
	if usage["prompt_tokens"] != float64(UsageInput) || usage["completion_tokens"] != float64(UsageOutput) {
		t.Errorf("usage %v", usage)
	}

	// The tool result → DONE, as one JSON object when not streaming.
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
		"function": map[string]any{"name": "bash", "arguments": `{"command":"echo hi"}`}}}}
	tool := map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "hi\n"}
	resp, body = post(t, s.URL+"/chat/completions", FakeKey, chatBodyWith(false, user, call, tool))
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != 200 || out.Object != "chat.completion" || out.Choices[0].Message.Content != "DONE: hi\n" {
		t.Errorf("non-stream %d %s", resp.StatusCode, body)
	}

	// approved → the same call again, with a new id.
	resp, body = post(t, s.URL+"/chat/completions", FakeKey, chatBodyWith(false, user, call, tool,
		map[string]any{"role": "user", "content": "A person approved your call bash. Run it again now."}))
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"arguments":"{\"command\":\"echo hi\"}"`)) || !bytes.Contains(body, []byte(`"call_2"`)) {
		t.Errorf("reissue %s", body)
	}
	reqs := s.Requests()
	if r := reqs[len(reqs)-1]; r.Rule != RuleReissue || r.Answer.ID != "call_2" || r.Model != "fake-model" || r.Key != FakeKey {
		t.Errorf("logged %+v", r)
	}
	// A request offering no tools is a helper (OpenCode's title).
	resp, body = post(t, s.URL+"/chat/completions", FakeKey, map[string]any{"model": "m", "messages": []any{user}})
	if !bytes.Contains(body, []byte("Test title")) {
		t.Errorf("no tools: %d %s", resp.StatusCode, body)
	}
	r, err := http.Get(s.URL + "/models")
	if err != nil || r.StatusCode != 200 {
		t.Errorf("GET /models: %v", err)
	}
	r.Body.Close()
}

func TestChatFaults(t *testing.T) {
	s := NewChatServer(t)
	body := chatBodyWith(true, map[string]any{"role": "user", "content": "hi"})
	s.Inject(Fault{Status: 429, Times: 1, RetryAfter: 1500 * time.Millisecond})
	resp, b := post(t, s.URL+"/chat/completions", FakeKey, body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("retry-after-ms") != "1500" ||
		resp.Header.Get("x-ratelimit-reset-requests") != "1.5s" || !bytes.Contains(b, []byte("rate_limit_exceeded")) {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	s.RequireKey("other", 401)
	if resp, b := post(t, s.URL+"/chat/completions", FakeKey, body); resp.StatusCode != 401 || !bytes.Contains(b, []byte("invalid_api_key")) {
		t.Errorf("401: %d %s", resp.StatusCode, b)
	}
	s.RequireKey("", 0)
	s.Inject(Fault{Status: 500, Match: func(r Request) bool { return strings.Contains(r.LastUserText(), "boom") }})
	if resp, _ := post(t, s.URL+"/chat/completions", FakeKey, body); resp.StatusCode != 200 {
		t.Errorf("a matched fault hit another request: %d", resp.StatusCode)
	}
	if resp, _ := post(t, s.URL+"/chat/completions", FakeKey, chatBodyWith(true, map[string]any{"role": "user", "content": "boom"})); resp.StatusCode != 500 {
		t.Errorf("matched fault: %d", resp.StatusCode)
	}
}

func TestMarkers(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{`<<tool a {"x":1}>>`, []string{`a {"x":1}`}},
		{`pre <<tool a>> mid <<tool b { "y" : [1, 2] } >> post`, []string{`a {}`, `b {"y":[1,2]}`}},
		// A marker inside the arguments (a subagent's prompt) is not counted.
		{`<<tool task {"prompt":"<<tool write {\"p\":1}>>"}>>`, []string{`task {"prompt":"<<tool write {\"p\":1}>>"}`}},
		{`<<tool a {"x":1}`, nil},
		{`<<tool a {bad json}>>`, nil},
		{`no markers`, nil},
	} {
		var got []string
		for _, m := range markers(c.text) {
			got = append(got, m.Name+" "+string(m.Args))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("markers(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
