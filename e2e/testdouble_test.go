package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/run"
)

// doubleEnv is an env whose test_double plays script (JSON), written to a
// file the agent's TEST_DOUBLE_SCRIPT names.
func doubleEnv(t *testing.T, script any) *e2eEnv {
	e := newE2E(t)
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.root, "double.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.agentConfig("test_double").Env = map[string]string{"TEST_DOUBLE_SCRIPT": path}
	e.writeConfig()
	return e
}

// TestTestDoubleGatedLikeAnAgent: blobhub-worker's scripted agent type
// runs under bhw-run with the worker's script format, and its tool calls
// go through the gate as Claude Code's do: under approval its Write
// parks on a person, the person's yes resumes it (the turn whose message
// says so is the script's next entry), and the repeated Write runs on the
// grant; its text, usage and the files it writes arrive.
func TestTestDoubleGatedLikeAnAgent(t *testing.T) {
	x := "/tmp/bhw-double-never-written"
	write := map[string]any{"name": "Write", "input": map[string]any{"file_path": x, "content": "c"}, "output": "written"}
	e := doubleEnv(t, map[string]any{"turns": []any{
		map[string]any{"match": "approved", "tools": []any{write}, "text": "DONE", "files": map[string]string{"out/result.txt": "result"},
			"usage": map[string]int{"input_tokens": 10, "output_tokens": 5}},
		map[string]any{"thinking": "planning", "tools": []any{write}, "text": "NEVER"},
	}})
	const alias = "double/gated"
	e.handOff(alias, "test_double", "approval", "write please")
	e.activate(alias, 0, run.OutcomeParked)
	if n := len(e.itemsOfType(alias, "pending_prompt")); n != 1 {
		t.Fatalf("%d pending_prompt items, want 1: %v", n, e.itemTypes(alias))
	}
	e.post(alias, "yes")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	var texts, results []string
	for _, it := range e.items(alias) {
		switch meta(t, it).Type {
		case "text":
			texts = append(texts, it.Content[0].Text)
		case "tool_result":
			results = append(results, it.Content[0].Text)
		}
	}
	if len(texts) != 1 || texts[0] != "DONE" {
		t.Errorf("texts %q, want DONE only", texts)
	}
	if got := strings.Join(results, "|"); !strings.Contains(got, "written") {
		t.Errorf("tool results %q, want the granted Write's", got)
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "out", "result.txt")); err != nil || string(b) != "result" {
		t.Errorf("the script's file: %q, %v", b, err)
	}
	ends := e.itemsOfType(alias, "turn_end")
	if len(ends) != 2 || meta(t, ends[1]).Status != "completed" {
		t.Errorf("turn_end items %v", e.itemTypes(alias))
	}
}

// TestTestDoubleBadScriptFailsTheThread: a script that matches nothing
// fails the thread AGENT_CRASHED naming the script, as the worker does.
func TestTestDoubleBadScriptFailsTheThread(t *testing.T) {
	e := doubleEnv(t, map[string]any{"turns": []any{map[string]any{"match": "something else", "text": "x"}}})
	const alias = "double/bad"
	e.handOff(alias, "test_double", "approval", "hello")
	code, out, stderr := e.run("--json", alias)
	s := parseSummary(t, out)
	if code != exit.Failed || s.Error == nil || s.Error.Code != exit.CodeAgentCrashed || !strings.Contains(s.Error.Message, "TEST_DOUBLE_SCRIPT") {
		t.Fatalf("exit %d summary %+v, want 1 AGENT_CRASHED naming the script\n%s", code, s, stderr)
	}
}
