package claude

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/policy"
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
		if !slices.Contains(KnownTools, tool) {
			t.Errorf("%s from system/init.tools of 2.1.332 is not in KnownTools", tool)
		}
	}
	if !slices.IsSorted(KnownTools) {
		t.Error("KnownTools is not sorted")
	}
}

func TestClaudeEffect(t *testing.T) {
	want := map[string][]string{
		policy.EffectRead:    {"Read", "Glob", "Grep", "LS", "NotebookRead"},
		policy.EffectWrite:   {"Write", "Edit", "MultiEdit", "NotebookEdit"},
		policy.EffectExec:    {"Bash", "BashOutput", "KillShell", "KillBash", "PowerShell", "Monitor", "CronCreate", "CronDelete", "Skill", "Workflow"},
		policy.EffectNetwork: {"WebFetch", "WebSearch"},
		"":                   {"Task", "Agent", "mcp__github__create_issue", "EnterWorktree", "AskUserQuestion", "CronList", "ToolSearch", "bash", "Unknown"},
	}
	for effect, tools := range want {
		for _, tool := range tools {
			if got := toolEffect(tool); got != effect {
				t.Errorf("toolEffect(%q) = %q, want %q", tool, got, effect)
			}
		}
	}
}

func TestClaudeTarget(t *testing.T) {
	cases := []struct {
		tool, input string
		want        policy.Target
	}{
		{"Read", `{"file_path":"/abs/a.go","offset":3}`, policy.Target{Paths: []string{"/abs/a.go"}}},
		{"Write", `{"file_path":"/abs/x.txt","content":"hi"}`, policy.Target{Paths: []string{"/abs/x.txt"}}},
		{"Edit", `{"file_path":"/abs/x.txt","old_string":"a","new_string":"b"}`, policy.Target{Paths: []string{"/abs/x.txt"}}},
		{"MultiEdit", `{"file_path":"/abs/x.txt","edits":[]}`, policy.Target{Paths: []string{"/abs/x.txt"}}},
		{"NotebookEdit", `{"notebook_path":"/abs/n.ipynb","new_source":"x"}`, policy.Target{Paths: []string{"/abs/n.ipynb"}}},
		{"LS", `{"path":"/etc"}`, policy.Target{Paths: []string{"/etc"}}},
		{"Grep", `{"pattern":"TODO","path":"/src"}`, policy.Target{Paths: []string{"/src"}}},
		{"Grep", `{"pattern":"TODO"}`, policy.Target{}},
		{"Glob", `{"pattern":"/etc/**/*.conf"}`, policy.Target{Paths: []string{"/etc"}}},
		{"Glob", `{"pattern":"**/*.go"}`, policy.Target{}},
		{"Glob", `{"pattern":"../other/*.go","path":"/w"}`, policy.Target{Paths: []string{"/w", "/other"}}},
		{"Bash", `{"command":"rm -rf build","description":"clean"}`, policy.Target{Command: "rm -rf build"}},
		{"PowerShell", `{"command":"Get-ChildItem"}`, policy.Target{Command: "Get-ChildItem"}},
		{"KillShell", `{"shell_id":"b1"}`, policy.Target{}},
		{"WebFetch", `{"url":"https://example.com","prompt":"sum"}`, policy.Target{URL: "https://example.com"}},
		{"WebSearch", `{"query":"go fuzzing"}`, policy.Target{URL: "go fuzzing"}},
		{"Task", `{"description":"x","prompt":"y"}`, policy.Target{}},
		{"Read", `not json`, policy.Target{}},
		{"Read", `{"file_path":42}`, policy.Target{}},
	}
	for _, c := range cases {
		if got := toolTarget(c.tool, json.RawMessage(c.input)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("toolTarget(%s, %s) = %+v, want %+v", c.tool, c.input, got, c.want)
		}
	}
}

func TestClaudeQuestions(t *testing.T) {
	qs, err := toolQuestions(json.RawMessage(`{"questions":[{"question":"Which target?","header":"Target","options":[{"label":"staging","description":"safe"},{"label":"production"}],"multiSelect":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.Question{{Question: "Which target?", Header: "Target", Options: []policy.Option{{Label: "staging", Description: "safe"}, {Label: "production"}}}}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("got %+v", qs)
	}
	if _, err := toolQuestions(json.RawMessage(`[`)); err == nil {
		t.Error("bad input gave no error")
	}
}

func TestClaudeFingerprint(t *testing.T) {
	base := Fingerprint("Bash", json.RawMessage(`{"command":"rm -rf build","description":"clean up"}`))
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("fingerprint %q", base)
	}
	same := []string{
		`{"description":"clean up","command":"rm -rf build"}`,             // key order
		"{\n  \"command\" : \"rm -rf build\",\n  \"description\":\"x\" }", // whitespace, another description
		`{"command":"rm -rf build"}`,                                      // no description
		`{"command":"rm -rf build","description":""}`,
	}
	for _, in := range same {
		if got := Fingerprint("Bash", json.RawMessage(in)); got != base {
			t.Errorf("%s: fingerprint differs", in)
		}
	}
	differ := map[string]string{
		"another command": `{"command":"rm -rf buildx"}`,
		"a timeout":       `{"command":"rm -rf build","timeout":1000}`,
		"background":      `{"command":"rm -rf build","run_in_background":true}`,
	}
	for name, in := range differ {
		if got := Fingerprint("Bash", json.RawMessage(in)); got == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	// The tool is part of it, and description is dropped only where it is
	// purely descriptive.
	if Fingerprint("PowerShell", json.RawMessage(`{"command":"rm -rf build"}`)) == base {
		t.Error("tool name is not part of the fingerprint")
	}
	a := Fingerprint("Task", json.RawMessage(`{"description":"a","prompt":"p"}`))
	b := Fingerprint("Task", json.RawMessage(`{"description":"b","prompt":"p"}`))
	if a == b {
		t.Error("Task description dropped")
	}
	// Numbers stay as written.
	if Fingerprint("Read", json.RawMessage(`{"file_path":"/a","limit":10}`)) == Fingerprint("Read", json.RawMessage(`{"file_path":"/a","limit":1e1}`)) {
		t.Error("numbers were normalised")
	}
	// Empty and null inputs are one thing; the fingerprint is stable.
	if Fingerprint("Task", nil) != Fingerprint("Task", json.RawMessage(`null`)) {
		t.Error("nil and null differ")
	}
	// Two separately built inputs of one call give one fingerprint.
	in1, in2 := json.RawMessage(`{"command":"ls"}`), json.RawMessage(`{ "command" : "ls" }`)
	if Fingerprint("Bash", in1) != Fingerprint("Bash", in2) {
		t.Error("unstable")
	}
}
