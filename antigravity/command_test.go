package antigravity

import (
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// TestCommand: agy's argv as blobhub-worker builds it after -p <message>:
// model wins over effort, --conversation only to resume, and the flags the
// worker blocks dropped from extra_args in both their forms.
func TestCommand(t *testing.T) {
	base := []string{"--output-format", "stream-json", "--print-timeout", "168h", "--dangerously-skip-permissions", "--add-dir", "/w"}
	for _, tc := range []struct {
		name string
		l    agent.Launch
		want []string
	}{
		{"plain", agent.Launch{}, base},
		{"model wins over effort", agent.Launch{Model: "gemini-3-pro-high", Effort: "low"}, append(slices.Clone(base), "--model", "gemini-3-pro-high")},
		{"effort alone", agent.Launch{Effort: "high"}, append(slices.Clone(base), "--effort", "high")},
		{"resume", agent.Launch{SessionID: "c1", Resume: true}, append(slices.Clone(base), "--conversation", "c1")},
		{"a new session takes no id", agent.Launch{SessionID: "c1"}, base},
		{"blocked extra arguments", agent.Launch{ExtraArgs: []string{"--verbose", "-p", "x", "--model=m", "--conversation", "other",
			"-c", "--continue", "--add-dir", "/etc", "--print-timeout=1s", "--output-format", "json", "--input-format=x",
			"--prompt", "y", "--print", "z", "--dangerously-skip-permissions", "--effort", "max", "--keep", "--model"}},
			append(slices.Clone(base), "--verbose", "--keep")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.l.Executable, tc.l.WorkFolder, tc.l.Permissions = "/usr/bin/agy", "/w", "guarded"
			got, err := command(tc.l)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("command = %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []agent.Launch{{Model: "-x"}, {Effort: "a\nb"}, {ExtraArgs: []string{"a\x00"}}, {Permissions: "yolo"}} {
		bad.Executable, bad.WorkFolder = "/usr/bin/agy", "/w"
		if bad.Permissions == "" {
			bad.Permissions = "approval"
		}
		if _, err := command(bad); err == nil || !strings.Contains(err.Error(), agent.CodeAgentSpawnFailed) {
			t.Errorf("command(%+v) = %v, want %s", bad, err, agent.CodeAgentSpawnFailed)
		}
	}
}

// TestToolTable: the worker's table for agy: each tool's effect, the
// browser wildcard that never takes an unmapped name, the grant key.
func TestToolTable(t *testing.T) {
	for tool, want := range map[string]string{
		"write_to_file": "write", "sed_file": "write", "run_command": "exec", "send_command_input": "exec",
		"view_file": "read", "grep_search": "read", "read_url_content": "network", "search_web": "network",
		"browser_press_key": "network", "capture_browser_dom": "network", "browser_subagent": "", "ask_question": "",
		"call_mcp_tool": "", "invoke_subagent": "", "something_new": "",
	} {
		if got := toolEffect(tool); got != want {
			t.Errorf("toolEffect(%s) = %q, want %q", tool, got, want)
		}
	}
	args := map[string]any{"CommandLine": "make test", "TargetFile": "/w/a"}
	if got := grantKey("run_command", args); got != "run_command:make test" {
		t.Errorf("grant key %q", got)
	}
	if got := grantKey("list_permissions", map[string]any{}); got != "list_permissions" {
		t.Errorf("grant key %q", got)
	}
	if tg := toolTarget("view_file", map[string]any{"AbsolutePath": "/w/b", "TargetFile": "/w/a"}); len(tg.Paths) != 1 || tg.Paths[0] != "/w/a" {
		t.Errorf("target %+v: the first path key wins (TargetFile)", tg)
	}
}
