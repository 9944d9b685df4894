package antigravity

// agy's tools as the gate sees them: the effect of each, what a call acts
// on, its grant fingerprint and key, and how `policy explain` describes a
// call. The names and their PascalCase argument keys are blobhub-worker
// 0.11.0's table for agy; the policy package names no agent.

import (
	"encoding/json"
	"strings"

	"github.com/blobhub/bhw-run/policy"
)

var (
	writeTools   = []string{"write_to_file", "replace_file_content", "multi_replace_file_content", "sed_file", "notebook_edit"}
	execTools    = []string{"run_command", "command_status", "send_command_input", "notebook_execution"}
	readTools    = []string{"view_file", "list_dir", "grep_search", "find_by_name", "read_resource", "list_resources"}
	networkTools = []string{"read_url_content", "search_web", "open_browser_url", "read_browser_page", "list_browser_pages",
		"click_browser_pixel", "execute_browser_javascript", "capture_browser_console_logs", "capture_browser_screenshot"}
	// unmappedTools have no single honest effect (bookkeeping, control
	// flow, subagents, MCP calls, images, messages): only the thread's
	// default answers them. browser_subagent is named here so the browser
	// wildcard below never sweeps it into network, where a rule allowing
	// the network would allow a subagent that can do anything.
	unmappedTools = []string{"ask_custom_permission", "ask_permission", "ask_question", "browser_subagent", "call_mcp_tool",
		"define_subagent", "delete_knowledge", "finish", "generate_image", "invoke_subagent", "list_permissions",
		"manage_inbox", "manage_subagents", "manage_task", "schedule", "send_message", "wait", "wait_5_seconds"}
)

// pathKeys name a call's path, first found wins; detailKeys what a grant
// key and a question name the call by.
var (
	pathKeys   = []string{"TargetFile", "AbsolutePath", "DirectoryPath", "SearchPath"}
	detailKeys = []string{"CommandLine", "TargetFile", "AbsolutePath", "DirectoryPath", "SearchPath"}
)

var toolEffects = func() map[string]string {
	m := map[string]string{}
	for effect, names := range map[string][]string{policy.EffectWrite: writeTools, policy.EffectExec: execTools,
		policy.EffectRead: readTools, policy.EffectNetwork: networkTools} {
		for _, n := range names {
			m[n] = effect
		}
	}
	return m
}()

// toolEffect is the effect of an agy tool: the table's, network for a
// browser tool it does not name (browser_…, capture_browser_…) unless it
// is one of the unmapped, else "" (only the default answers it).
func toolEffect(tool string) string {
	if e, ok := toolEffects[tool]; ok {
		return e
	}
	for _, u := range unmappedTools {
		if tool == u {
			return ""
		}
	}
	if strings.HasPrefix(tool, "browser_") || strings.HasPrefix(tool, "capture_browser_") {
		return policy.EffectNetwork
	}
	return ""
}

// toolTarget is what a call acts on: its first path, its command line (and
// folder), its URL.
func toolTarget(tool string, args map[string]any) policy.Target {
	var t policy.Target
	switch toolEffect(tool) {
	case policy.EffectWrite, policy.EffectRead:
		if p := firstString(args, pathKeys...); p != "" {
			t.Paths = []string{p}
		}
	case policy.EffectExec:
		t.Command = firstString(args, "CommandLine")
		t.Cwd = firstString(args, "Cwd")
	case policy.EffectNetwork:
		t.URL = firstString(args, "Url", "URL", "url")
	}
	return t
}

// grantKey is how blobhub-worker names a call in an approval question's
// grant_key: "<tool>:<detail>", or the tool alone when no argument names
// what it acts on.
func grantKey(tool string, args map[string]any) string {
	if d := firstString(args, detailKeys...); d != "" {
		return tool + ":" + d
	}
	return tool
}

// fingerprint is a call's one-shot grant fingerprint: the canonical JSON
// of {tool, input}; ids are never part of it.
func fingerprint(tool string, input json.RawMessage) string {
	var in any
	if len(input) > 0 && json.Valid(input) {
		in = input
	}
	return policy.Fingerprint(map[string]any{"tool": tool, "input": in})
}

func firstString(args map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := args[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// summary is a call's target in a line, for its tool_call item.
func summary(tool string, input json.RawMessage) string {
	var args map[string]any
	_ = json.Unmarshal(input, &args)
	return policy.Summary(tool, toolTarget(tool, args))
}

// describe is a call of effect on target as agy makes it: run_command,
// read_url_content, view_file or write_to_file with their arguments.
func describe(effect string, t policy.Target) policy.Call {
	c := policy.Call{Effect: effect, Target: t, Kind: policy.KindApproval}
	in := map[string]string{}
	switch effect {
	case policy.EffectExec:
		c.Tool, in["CommandLine"] = "run_command", t.Command
		if t.Cwd != "" {
			in["Cwd"] = t.Cwd
		}
	case policy.EffectNetwork:
		c.Tool, in["Url"] = "read_url_content", t.URL
	case policy.EffectRead:
		c.Tool = "view_file"
		if len(t.Paths) > 0 {
			in["AbsolutePath"] = t.Paths[0]
		}
	case policy.EffectWrite:
		c.Tool = "write_to_file"
		if len(t.Paths) > 0 {
			in["TargetFile"] = t.Paths[0]
		}
	}
	c.Input, _ = json.Marshal(in)
	c.Fingerprint = fingerprint(c.Tool, c.Input)
	return c
}
