package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// initTools2_1_332 is system/init.tools of the pinned Claude Code 2.1.332 in
// every configuration captured when it was measured: the default set,
// with the Task* todo tools, with --tools Glob,Grep, and with Bash
// disallowed.
var initTools2_1_332 = []string{
	"Task", "AskUserQuestion", "Bash", "CronCreate", "CronDelete", "CronList", "Edit", "EnterPlanMode",
	"EnterWorktree", "ExitPlanMode", "ExitWorktree", "ListAgents", "Monitor", "NotebookEdit", "Read",
	"ReportFindings", "ScheduleWakeup", "SendMessage", "Skill", "TaskStop", "ToolSearch", "WebFetch",
	"WebSearch", "Workflow", "Write", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate", "Glob", "Grep",
}

func TestKnownClaudeToolsCoverInitTools(t *testing.T) {
	for _, tool := range initTools2_1_332 {
		if !slices.Contains(KnownClaudeTools, tool) {
			t.Errorf("%s from system/init.tools of 2.1.332 is not in KnownClaudeTools", tool)
		}
	}
	if !slices.IsSorted(KnownClaudeTools) {
		t.Error("KnownClaudeTools is not sorted")
	}
}

func TestClaudeEffect(t *testing.T) {
	want := map[string][]string{
		EffectRead:    {"Read", "Glob", "Grep", "LS", "NotebookRead"},
		EffectWrite:   {"Write", "Edit", "MultiEdit", "NotebookEdit"},
		EffectExec:    {"Bash", "BashOutput", "KillShell", "KillBash", "PowerShell", "Monitor", "CronCreate", "CronDelete", "Skill", "Workflow"},
		EffectNetwork: {"WebFetch", "WebSearch"},
		"":            {"Task", "Agent", "mcp__github__create_issue", "EnterWorktree", "AskUserQuestion", "CronList", "ToolSearch", "bash", "Unknown"},
	}
	for effect, tools := range want {
		for _, tool := range tools {
			if got := ClaudeEffect(tool); got != effect {
				t.Errorf("ClaudeEffect(%q) = %q, want %q", tool, got, effect)
			}
		}
	}
}

func TestClaudeTarget(t *testing.T) {
	cases := []struct {
		tool, input string
		want        Target
	}{
		{"Read", `{"file_path":"/abs/a.go","offset":3}`, Target{Paths: []string{"/abs/a.go"}}},
		{"Write", `{"file_path":"/abs/x.txt","content":"hi"}`, Target{Paths: []string{"/abs/x.txt"}}},
		{"Edit", `{"file_path":"/abs/x.txt","old_string":"a","new_string":"b"}`, Target{Paths: []string{"/abs/x.txt"}}},
		{"MultiEdit", `{"file_path":"/abs/x.txt","edits":[]}`, Target{Paths: []string{"/abs/x.txt"}}},
		{"NotebookEdit", `{"notebook_path":"/abs/n.ipynb","new_source":"x"}`, Target{Paths: []string{"/abs/n.ipynb"}}},
		{"LS", `{"path":"/etc"}`, Target{Paths: []string{"/etc"}}},
		{"Grep", `{"pattern":"TODO","path":"/src"}`, Target{Paths: []string{"/src"}}},
		{"Grep", `{"pattern":"TODO"}`, Target{}},
		{"Glob", `{"pattern":"/etc/**/*.conf"}`, Target{Paths: []string{"/etc"}}},
		{"Glob", `{"pattern":"**/*.go"}`, Target{}},
		{"Glob", `{"pattern":"../other/*.go","path":"/w"}`, Target{Paths: []string{"/w", "/other"}}},
		{"Bash", `{"command":"rm -rf build","description":"clean"}`, Target{Command: "rm -rf build"}},
		{"PowerShell", `{"command":"Get-ChildItem"}`, Target{Command: "Get-ChildItem"}},
		{"KillShell", `{"shell_id":"b1"}`, Target{}},
		{"WebFetch", `{"url":"https://example.com","prompt":"sum"}`, Target{URL: "https://example.com"}},
		{"WebSearch", `{"query":"go fuzzing"}`, Target{URL: "go fuzzing"}},
		{"Task", `{"description":"x","prompt":"y"}`, Target{}},
		{"Read", `not json`, Target{}},
		{"Read", `{"file_path":42}`, Target{}},
	}
	for _, c := range cases {
		if got := ClaudeTarget(c.tool, json.RawMessage(c.input)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ClaudeTarget(%s, %s) = %+v, want %+v", c.tool, c.input, got, c.want)
		}
	}
}

func TestClaudeQuestions(t *testing.T) {
	qs, err := ClaudeQuestions(json.RawMessage(`{"questions":[{"question":"Which target?","header":"Target","options":[{"label":"staging","description":"safe"},{"label":"production"}],"multiSelect":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Question{{Question: "Which target?", Header: "Target", Options: []Option{{"staging", "safe"}, {"production", ""}}}}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("got %+v", qs)
	}
	if _, err := ClaudeQuestions(json.RawMessage(`[`)); err == nil {
		t.Error("bad input gave no error")
	}
}

func TestSummary(t *testing.T) {
	if got := Summary("Bash", Target{Command: "rm  -rf\nbuild"}); got != "Bash → rm -rf build" {
		t.Errorf("got %q", got)
	}
	if got := Summary("Write", Target{Paths: []string{"/abs/x.txt"}}); got != "Write → /abs/x.txt" {
		t.Errorf("got %q", got)
	}
	if got := Summary("Task", Target{}); got != "Task" {
		t.Errorf("got %q", got)
	}
}
