package claude

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// transcripts are the real CLI's stdout lines recorded by the real-CLI
// tests (BHW_CLAUDE_RECORD=1) under testdata/claude.
func transcripts(t testing.TB) map[string][][]byte {
	files, err := filepath.Glob("../testdata/claude/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in ../testdata/claude (%v)", err)
	}
	out := map[string][][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				out[filepath.Base(f)] = append(out[filepath.Base(f)], l)
			}
		}
	}
	return out
}

func TestDecodeTranscripts(t *testing.T) {
	kinds := map[string]int{}
	for name, lines := range transcripts(t) {
		for i, raw := range lines {
			l, err := decodeLine(raw)
			if err != nil {
				t.Errorf("%s:%d: %v", name, i+1, err)
				continue
			}
			if !knownKind(l.Kind) {
				t.Errorf("%s:%d: unknown kind %q", name, i+1, l.Kind)
			}
			kinds[l.Kind+"/"+l.Subtype]++
		}
	}
	for _, k := range []string{"system/init", "system/api_retry", "assistant/", "user/", "result/success",
		"result/error_during_execution", "control_request/", "control_response/"} {
		if kinds[k] == 0 {
			t.Errorf("no %s line in the transcripts (kinds %v)", k, kinds)
		}
	}
}

// items of a whole transcript, plus its result lines.
func transcriptItems(t *testing.T, name string) ([]agent.Item, []*resultMsg, []*controlRequest) {
	lines := transcripts(t)[name]
	if lines == nil {
		t.Fatalf("no transcript %s", name)
	}
	var items []agent.Item
	var results []*resultMsg
	var reqs []*controlRequest
	for _, raw := range lines {
		l, err := decodeLine(raw)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, l.items()...)
		if l.Result != nil {
			results = append(results, l.Result)
		}
		if l.Control != nil {
			reqs = append(reqs, l.Control)
		}
	}
	return items, results, reqs
}

func itemTypes(items []agent.Item) []string {
	var t []string
	for _, it := range items {
		t = append(t, it.Type())
	}
	return t
}

func TestTranscriptMapping(t *testing.T) {
	items, results, _ := transcriptItems(t, "autonomous-write.jsonl")
	if got, want := itemTypes(items), []string{"thinking", "text", "tool_call", "tool_result", "text"}; !slices.Equal(got, want) {
		t.Errorf("autonomous-write items = %v, want %v", got, want)
	}
	call := items[2].Meta["tool"].(map[string]any)
	res := items[3].Meta["tool"].(map[string]any)
	if call["name"] != "Write" || call["invocation_id"] != res["invocation_id"] || res["is_error"] != false ||
		!strings.HasPrefix(res["output"].(string), "File created successfully") {
		t.Errorf("call %v / result %v", call, res)
	}
	if len(results) != 1 || results[0].IsError || results[0].NumTurns != 2 || results[0].Usage.CacheReadInputTokens == 0 {
		t.Errorf("result = %+v", results)
	}

	items, results, _ = transcriptItems(t, "apierr-500.jsonl")
	if len(items) != 0 {
		t.Errorf("apierr items = %v (the synthetic API error message is reported by the result only)", itemTypes(items))
	}
	if len(results) != 1 || !results[0].IsError || results[0].Subtype != "success" || !strings.Contains(results[0].Result, "500") {
		t.Errorf("apierr result = %+v", results)
	}

	items, _, _ = transcriptItems(t, "api-retry.jsonl")
	if got := itemTypes(items); !slices.Equal(got, []string{"status", "text"}) {
		t.Errorf("api-retry items = %v", got)
	}

	items, _, reqs := transcriptItems(t, "deny.jsonl")
	if len(reqs) != 1 || reqs[0].Request.ToolName != "Write" || reqs[0].Request.ToolUseID == "" {
		t.Errorf("deny requests = %+v", reqs)
	}
	tr := items[slices.Index(itemTypes(items), "tool_result")].Meta["tool"].(map[string]any)
	if tr["is_error"] != true {
		t.Errorf("denied tool_result = %v", tr)
	}

	_, results, reqs = transcriptItems(t, "ask.jsonl")
	if len(reqs) != 1 || !reqs[0].Request.RequiresUserInteraction {
		t.Errorf("ask requests = %+v", reqs)
	}
	if len(results) != 1 || results[0].TerminalReason != "aborted_tools" {
		t.Errorf("ask result = %+v", results)
	}

	_, results, _ = transcriptItems(t, "resume-unknown.jsonl")
	if len(results) != 1 || results[0].NumTurns != 0 || !strings.Contains(strings.Join(results[0].Errors, " "), "No conversation found") {
		t.Errorf("resume-unknown result = %+v", results)
	}
}

func TestResultMapping(t *testing.T) {
	s := &Session{}
	r := &resultMsg{IsError: true, Subtype: "error_during_execution", NumTurns: 0, Errors: []string{"No conversation found with session ID: x"}}
	if got := s.result(r, &turnState{}); !got.ResumeFailed {
		t.Errorf("unknown resume: %+v", got)
	}
	s.sawInit = true
	if got := s.result(r, &turnState{}); got.ResumeFailed || got.Outcome != agent.TurnFailed {
		t.Errorf("after init: %+v", got)
	}
	r = &resultMsg{IsError: true, Subtype: "error_during_execution", NumTurns: 2}
	if got := s.result(r, &turnState{parked: true}); got.Outcome != agent.TurnParked || got.ErrorText != "" {
		t.Errorf("parked: %+v", got)
	}
	if got := s.result(r, &turnState{interrupted: true}); got.Outcome != agent.TurnInterrupted {
		t.Errorf("interrupted: %+v", got)
	}
	r = &resultMsg{IsError: true, Subtype: "success", Result: "API Error: 400 bad"}
	if got := s.result(r, &turnState{}); got.Outcome != agent.TurnFailed || got.ErrorText != "API Error: 400 bad" {
		t.Errorf("api error: %+v", got)
	}
	r = &resultMsg{Subtype: "success", NumTurns: 3, DurationMS: 9, TotalCostUSD: 0.5}
	r.Usage.InputTokens, r.Usage.CacheReadInputTokens, r.Usage.CacheCreationInputTokens, r.Usage.OutputTokens = 10, 20, 5, 7
	got := s.result(r, &turnState{})
	want := agent.TurnResult{Outcome: agent.TurnCompleted, Usage: agent.Usage{InputTokens: 35, InputTokensCached: 20, OutputTokens: 7},
		CostUSD: 0.5, NumTurns: 3, DurationMS: 9, SessionCostUSD: 0.5}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("success: %+v, want %+v", got, want)
	}
	// A resumed session reports its running cost: the turn's own is the rest.
	s.l = agent.Launch{Resume: true, SessionCostUSD: 0.2}
	if got := s.result(r, &turnState{}); got.CostUSD != 0.3 || got.SessionCostUSD != 0.5 {
		t.Errorf("resumed: cost %v session %v, want 0.3 and 0.5", got.CostUSD, got.SessionCostUSD)
	}
	s.l = agent.Launch{}
	// The caps run passed: the CLI stops itself and says which.
	for _, sub := range []string{"error_max_turns", "error_max_budget_usd"} {
		r := &resultMsg{IsError: true, Subtype: sub, NumTurns: 2}
		if got := s.result(r, &turnState{}); got.Outcome != agent.TurnFailed || got.Failure != agent.FailureBudget {
			t.Errorf("%s: %+v", sub, got)
		}
	}
	// A limit and a refused login, as the CLI's API error message says.
	st := &turnState{apiError: "rate_limit", apiStatus: 429}
	if got := s.result(&resultMsg{IsError: true, Subtype: "success", Result: "API Error: 429"}, st); got.Failure != agent.FailureRateLimit {
		t.Errorf("429: %+v", got)
	}
	st = &turnState{apiError: "authentication_failed"}
	if got := s.result(&resultMsg{IsError: true, Subtype: "success", Result: "Not logged in · Please run /login"}, st); got.Failure != agent.FailureAuth {
		t.Errorf("not logged in: %+v", got)
	}
}

func TestSummaryAndResultText(t *testing.T) {
	for _, c := range []struct{ tool, in, want string }{
		{"Bash", `{"command":"npm test\nnpm run lint","description":"d"}`, "npm test …"},
		{"Write", `{"file_path":"/a/b.txt","content":"x"}`, "/a/b.txt"},
		{"Grep", `{"pattern":"foo","path":"src"}`, "foo in src"},
		{"TodoWrite", `{}`, ""},
		{"Mystery", `{"a":1}`, `{"a":1}`},
	} {
		if got := summary(c.tool, []byte(c.in)); got != c.want {
			t.Errorf("summary(%s, %s) = %q, want %q", c.tool, c.in, got, c.want)
		}
	}
	if got := resultText([]byte(`[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]`)); got != "a\n[image]\nb" {
		t.Errorf("resultText blocks = %q", got)
	}
	if got := resultText([]byte(`"plain"`)); got != "plain" {
		t.Errorf("resultText string = %q", got)
	}
}

func TestOverlongRequestID(t *testing.T) {
	id, ok := overlongRequestID([]byte(`{"type":"control_request","request_id":"ab\"c-1","request":{"subtype":"can_use_tool","input":{"content":"xxxx`))
	if !ok || id != `ab"c-1` {
		t.Errorf("got %q %v", id, ok)
	}
	if _, ok := overlongRequestID([]byte(`{"type":"assistant","request_id":"x"`)); ok {
		t.Error("an assistant line is not a request")
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, lines := range transcripts(f) {
		for _, l := range lines {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"user","message":{"content":"x"}}`))
	f.Add([]byte(`{"type":"control_request","request_id":"r","request":{"subtype":"can_use_tool","input":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		l, err := decodeLine(raw)
		if err != nil {
			return
		}
		_ = l.items()
		if l.Result != nil {
			(&Session{}).result(l.Result, &turnState{})
		}
		if l.Control != nil {
			(&Session{}).call(l.Control)
		}
		overlongRequestID(raw)
	})
}
