package antigravity

import (
	"encoding/json"
	"strings"
)

// streamCase is one stream of agy's as a test feeds it to the decoder:
// the lines, whether the turn was gated and how often its hook was
// contacted. The translator conformance test (peer_test.go) feeds the same
// streams to blobhub-worker's translator.
type streamCase struct {
	name      string
	lines     []string
	gated     bool
	hookCalls int
}

func ev(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func initLine(id string) string {
	return ev(map[string]any{"event": "init", "conversation_id": id, "init": map[string]any{"tools": []string{"run_command"}}})
}

func reply(index any, state, delta string) string {
	return ev(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": index, "step_type": "agent_response",
		"state": state, "text_delta": delta}})
}

func toolStep(index any, state, name string, params map[string]any, output any, errMsg string) string {
	info := map[string]any{"name": name, "parameters": params}
	if output != nil {
		info["output"] = output
	}
	if errMsg != "" {
		info["error"] = map[string]any{"message": errMsg}
	}
	return ev(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": index, "step_type": "tool",
		"state": state, "tool_name": name, "tool_info": info}})
}

func resultLine(status, response, errText string, extra map[string]any) string {
	r := map[string]any{"status": status, "response": response, "error": errText, "conversation_id": "conv-short",
		"usage": map[string]any{"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 80}}
	for k, v := range extra {
		r[k] = v
	}
	return ev(map[string]any{"event": "result", "result": r})
}

// splitDeltas streams text as deltas cut at the given byte offsets, the
// last one DONE.
func splitDeltas(index any, text string, cuts ...int) []string {
	var out []string
	prev := 0
	for _, c := range append(cuts, len(text)) {
		state := "ACTIVE"
		if c == len(text) {
			state = "DONE"
		}
		out = append(out, reply(index, state, text[prev:c]))
		prev = c
	}
	return out
}

var (
	run1  = map[string]any{"CommandLine": "go test ./...", "Cwd": "/w"}
	write = map[string]any{"TargetFile": "/w/a.txt", "CodeContent": "hello"}
	read  = map[string]any{"AbsolutePath": "/w/README.md"}
)

func streamCases() []streamCase {
	denied := "Tool call denied by pre-tool hook: Denied by policy rule 'no-net'"
	return []streamCase{
		{name: "a reply in deltas split at odd places", lines: append(append([]string{initLine("conv-1")},
			splitDeltas(1, "Héllo, wörld!\nLABEL: done\n", 1, 3, 8, 11, 15, 27)...), resultLine("SUCCESS", "Héllo", "", nil))},
		{name: "tool calls ACTIVE, DONE, ERROR", gated: true, hookCalls: 3, lines: []string{initLine("conv-2"),
			reply(1, "ACTIVE", "Let me "), reply(1, "ACTIVE", "look."),
			toolStep(2, "ACTIVE", "view_file", read, nil, ""), toolStep(2, "DONE", "view_file", read, "# readme", ""),
			toolStep(3, "ACTIVE", "run_command", run1, nil, ""), toolStep(3, "ERROR", "run_command", run1, "", "exit status 1"),
			toolStep(4, "ACTIVE", "write_to_file", write, nil, ""), toolStep(4, "DONE", "write_to_file", write, "5 bytes written", ""),
			reply(5, "DONE", "Done."), resultLine("SUCCESS", "Done.", "", nil)}},
		{name: "an unknown event and a step of another type", lines: []string{initLine("conv-3"), reply(1, "ACTIVE", "before "),
			ev(map[string]any{"event": "telemetry", "telemetry": map[string]any{"x": 1}}), reply(1, "DONE", "after"),
			ev(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": 2, "step_type": "planner", "state": "DONE"}}),
			resultLine("SUCCESS", "after", "", nil)}},
		{name: "replies without an index join", lines: []string{initLine("conv-4"), reply(nil, "ACTIVE", "one "), reply(nil, "ACTIVE", "two "),
			reply(7, "ACTIVE", "three"), reply(8, "DONE", "four"), resultLine("SUCCESS", "four", "", nil)}},
		{name: "every call denied by the hook", gated: true, hookCalls: 2, lines: []string{initLine("conv-5"),
			toolStep(1, "ACTIVE", "read_url_content", map[string]any{"Url": "https://example.com"}, nil, ""),
			toolStep(1, "ERROR", "read_url_content", map[string]any{"Url": "https://example.com"}, nil, denied),
			toolStep(2, "ACTIVE", "run_command", run1, nil, ""), toolStep(2, "ERROR", "run_command", run1, nil, denied),
			reply(3, "DONE", "I was not allowed to."), resultLine("SUCCESS", "I was not allowed to.", "", nil)}},
		{name: "some calls denied", gated: true, hookCalls: 2, lines: []string{initLine("conv-6"),
			toolStep(1, "ACTIVE", "run_command", run1, nil, ""), toolStep(1, "ERROR", "run_command", run1, nil, denied),
			toolStep(2, "ACTIVE", "view_file", read, nil, ""), toolStep(2, "DONE", "view_file", read, "text", ""),
			resultLine("SUCCESS", "ok", "", nil)}},
		{name: "gated, hook never contacted", gated: true, hookCalls: 0, lines: []string{initLine("conv-7"),
			toolStep(1, "ACTIVE", "run_command", run1, nil, ""), toolStep(1, "DONE", "run_command", run1, "ok", ""),
			resultLine("SUCCESS", "ran it", "", nil)}},
		{name: "autonomous, no hook", lines: []string{initLine("conv-8"),
			toolStep(1, "ACTIVE", "run_command", run1, nil, ""), toolStep(1, "DONE", "run_command", run1, "ok", ""),
			resultLine("SUCCESS", "ran it", "", nil)}},
		{name: "denied_actions with no response", lines: []string{initLine("conv-9"),
			resultLine("SUCCESS", " ", "", map[string]any{"denied_actions": []any{map[string]any{"display_name": "Run make"}, map[string]any{"action": "write"}}})}},
		{name: "status ERROR", lines: []string{initLine("c10"), resultLine("ERROR", "", "model overloaded", nil)}},
		{name: "status CANCELED", lines: []string{initLine("c11"), resultLine("CANCELED", "", "", nil)}},
		{name: "status INTERRUPTED", lines: []string{initLine("c12"), reply(1, "ACTIVE", "half a rep"), resultLine("INTERRUPTED", "", "", nil)}},
		{name: "status INVALID", lines: []string{initLine("c13"), resultLine("INVALID", "", "", nil)}},
		{name: "status WAITING", lines: []string{initLine("c14"), resultLine("WAITING", "", "", nil)}},
		{name: "status RUNNING", lines: []string{initLine("c15"), resultLine("RUNNING", "", "", nil)}},
		{name: "status unknown", lines: []string{initLine("c16"), resultLine("EXPLODED", "", "", nil)}},
		{name: "no result at all", lines: []string{initLine("c17"), reply(1, "ACTIVE", "cut off")}},
		{name: "a line that is not JSON", lines: []string{initLine("c18"), "this is not json", reply(1, "DONE", "fine"), resultLine("SUCCESS", "fine", "", nil)}},
		{name: "a huge reply", lines: []string{initLine("c19"), reply(1, "DONE", strings.Repeat("é", 3<<20)), resultLine("SUCCESS", "big", "", nil)}},
	}
}
