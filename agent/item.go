package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/blobhub/bhw-run/policy"
)

// Item types bhw-run posts, as metadata.type: the first five are what an
// adapter relays, the others run's own.
//
// What the blobhub-worker documentation shows of them, and what is a guess
// (worker/session-agent-harness/thread-items, interactive-prompts,
// worker-object; field names the pages read do not show are guesses,
// marked so here, and `make live-check` cannot settle them: the server
// stores any metadata):
//   - every item: content [{type: text, text: <brief>}] and metadata.type;
//     a person's item has no metadata.type. metadata.emission_id on every
//     item is bhw-run's own (its exactly-once journal), also on text, which
//     the documentation says carries nothing beyond type.
//   - text: nothing else. thinking: metadata.text (documented).
//   - tool_call: tool {name, invocation_id, input} (documented).
//   - tool_result: no tool name, brief "→ <first line> (N lines)"
//     (documented); tool {invocation_id, output, is_error}: a guess.
//   - status: "a machine-readable token" (documented); under
//     status.token, with the other fields beside it: a guess.
//   - turn_end: input_tokens (cached + uncached) and input_tokens_cached
//     (documented); under usage, with output_tokens, cost_usd, num_turns,
//     duration_ms and outcome: a guess.
//   - pending_prompt: metadata.prompt.kind (text | approval |
//     ask_user_question, documented); prompt.options, prompt.call,
//     prompt.payload: a guess (built by run's promptItem).
//   - pending_prompt_resolved: resolution answered | cancelled | failed
//     (documented); prompt_item_id, decision (approved | denied), answer: a
//     guess.
//   - thread_failed, in the worker thread: the documentation names the item;
//     alias, error {code, message}, instance_id: a guess.
//   - policy_applied, policy_denied, artifact_published: bhw-run's own; so
//     are parked and pending_prompt on the tool_result of a parked call
//     (ParkedResultItem).
const (
	ItemText                  = "text"
	ItemToolCall              = "tool_call"
	ItemToolResult            = "tool_result"
	ItemThinking              = "thinking"
	ItemStatus                = "status"
	ItemTurnEnd               = "turn_end"
	ItemPendingPrompt         = "pending_prompt"
	ItemPendingPromptResolved = "pending_prompt_resolved"
	ItemPolicyApplied         = "policy_applied"
	ItemPolicyDenied          = "policy_denied"
	ItemArtifactPublished     = "artifact_published"
	ItemThreadFailed          = "thread_failed"
)

// Item is one thread item bhw-run posts: a brief (the single text content
// block) and its metadata. Meta always carries "type"; run adds
// "emission_id" when it journals the item.
type Item struct {
	Brief string         `json:"brief"`
	Meta  map[string]any `json:"meta"`
}

// Type is metadata.type.
func (it Item) Type() string { s, _ := it.Meta["type"].(string); return s }

func newItem(typ, brief string, kv ...any) Item {
	m := map[string]any{"type": typ}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return Item{Brief: brief, Meta: m}
}

// TextItem is the agent's text.
func TextItem(text string) Item { return newItem(ItemText, text) }

// ThinkingItem is the agent's reasoning; the brief is its first ~120 characters.
func ThinkingItem(text string) Item {
	return newItem(ItemThinking, Shorten(text, 120), "text", text)
}

// ToolCallItem announces a call; it is posted before its result.
func ToolCallItem(name, invocationID string, input json.RawMessage, summary string) Item {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	brief := name
	if summary != "" {
		brief = name + " → " + summary
	}
	return newItem(ItemToolCall, Shorten(brief, 300), "tool", map[string]any{
		"name": name, "invocation_id": invocationID, "input": input,
	})
}

// ToolResultItem is a call's output, paired with its call by invocationID.
// output and is_error are guessed names (see the item types above).
func ToolResultItem(invocationID, output string, isError bool) Item {
	lines := strings.Count(strings.TrimRight(output, "\n"), "\n") + 1
	first, _, _ := strings.Cut(output, "\n")
	brief := fmt.Sprintf("→ %s (%d lines)", Shorten(first, 200), lines)
	if isError {
		brief = "✗ " + brief
	}
	return newItem(ItemToolResult, brief, "tool", map[string]any{
		"invocation_id": invocationID, "output": output, "is_error": isError,
	})
}

// WaitingText is the output of a parked call's result.
const WaitingText = "not run yet: waiting for a person"

// ParkedResultItem is the tool_result of the call the gate parked for a
// person: the call did not run and waits for the person's answer, which
// is neither an error nor the call's output. Whatever the agent was told
// to stop it there (Claude's "The user doesn't want to proceed… STOP",
// Codex's "aborted by user") is an artefact of parking: an adapter relays
// this item instead, and leaves that text to thread.log. run adds the
// prompt the call waits on (metadata.pending_prompt {item_id,
// emission_id}); metadata.parked marks the item. Both are bhw-run's own.
func ParkedResultItem(invocationID string) Item {
	return newItem(ItemToolResult, "⏸ "+WaitingText, "tool", map[string]any{
		"invocation_id": invocationID, "output": WaitingText, "is_error": false,
	}, "parked", true)
}

// IsParkedResult reports whether it is a ParkedResultItem, and for which
// call.
func IsParkedResult(it Item) (invocationID string, ok bool) {
	if p, _ := it.Meta["parked"].(bool); !p || it.Type() != ItemToolResult {
		return "", false
	}
	tool, _ := it.Meta["tool"].(map[string]any)
	invocationID, _ = tool["invocation_id"].(string)
	return invocationID, true
}

// StatusItem is a human status line with its token (api_retry, turn_timeout, …)
// and extra fields, under metadata.status (a guessed nesting).
func StatusItem(token, text string, extra map[string]any) Item {
	st := map[string]any{"token": token}
	for k, v := range extra {
		st[k] = v
	}
	return newItem(ItemStatus, text, "status", st)
}

// TurnEndItem closes a turn. usage {input_tokens, input_tokens_cached} is
// documented; the usage block around them and the other fields are
// guesses; tools (the turn's tool calls, ToolCounts) is bhw-run's own.
func TurnEndItem(outcome string, r TurnResult, tools ToolCounts) Item {
	brief := "— turn end —"
	if tools.Calls > 0 || tools.DeniedByPerson > 0 {
		brief = "— turn end: " + tools.String() + " —"
	}
	return newItem(ItemTurnEnd, brief,
		"usage", r.Usage, "cost_usd", r.CostUSD, "num_turns", r.NumTurns,
		"duration_ms", r.DurationMS, "outcome", outcome, "tools", tools)
}

// ToolCounts are a turn's tool calls: how many it made, how many ran (the
// gate allowed them, or the agent ran them without asking), how many a
// rule refused (or the posture's default), how many a person refused (the
// call of the question a person answered no, counted in the turn that
// delivers the answer), and how many of those that ran failed.
type ToolCounts struct {
	Calls          int `json:"calls"`
	Allowed        int `json:"allowed"`
	DeniedByRule   int `json:"denied_by_rule"`
	DeniedByPerson int `json:"denied_by_person"`
	Failed         int `json:"failed"`
}

// Add is c plus o.
func (c ToolCounts) Add(o ToolCounts) ToolCounts {
	return ToolCounts{Calls: c.Calls + o.Calls, Allowed: c.Allowed + o.Allowed, DeniedByRule: c.DeniedByRule + o.DeniedByRule,
		DeniedByPerson: c.DeniedByPerson + o.DeniedByPerson, Failed: c.Failed + o.Failed}
}

// String reads "3 tool calls: 1 ran, 2 denied by rule, 1 failed".
func (c ToolCounts) String() string {
	parts := []string{fmt.Sprintf("%d ran", c.Allowed)}
	if c.DeniedByRule > 0 {
		parts = append(parts, fmt.Sprintf("%d denied by rule", c.DeniedByRule))
	}
	if c.DeniedByPerson > 0 {
		parts = append(parts, fmt.Sprintf("%d denied by a person", c.DeniedByPerson))
	}
	if c.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", c.Failed))
	}
	noun := "tool calls"
	if c.Calls == 1 {
		noun = "tool call"
	}
	return fmt.Sprintf("%d %s: %s", c.Calls, noun, strings.Join(parts, ", "))
}

// CallMeta describes a call inside item metadata (pending_prompt,
// policy_denied): bhw-run's own shape, {tool, effect, invocation_id,
// input, target}.
func CallMeta(c policy.Call) map[string]any {
	in := c.Input
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	return map[string]any{
		"tool": c.Tool, "effect": c.Effect, "invocation_id": c.InvocationID,
		"input": in, "target": c.Target,
	}
}

// Shorten cuts s to about n bytes on a rune boundary, marking the cut with "…".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := 0
	for i := range s {
		if i > n {
			break
		}
		cut = i
	}
	return s[:cut] + "…"
}
