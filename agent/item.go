package agent

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/policy"
)

// Item types bhw-run posts, as metadata.type: the first five are what an
// adapter relays, the others run's own. Each has the shape blobhub-worker
// gives the item of that type, so a reader of a thread cannot tell which of
// the two posted it; where bhw-run knows more than the worker says, the
// extra fields sit beside the worker's. docs/wire.md ("Items in a thread")
// lists every field, and which are bhw-run's own.
//   - every item: content [{type: text, text: <brief>}] and metadata.type;
//     a person's item has no metadata.type. metadata.post_id ("pst_<ULID>")
//     and metadata.emission_id, bhw-run's journal key, are stamped by run.
//   - text: nothing else. thinking: text, full_text_length.
//   - tool_call: tool {name, invocation_id, input}.
//   - tool_result: tool {invocation_id, is_error, output}.
//   - status: status (the token), detail (the line a person reads).
//   - turn_end: status, stats {input_tokens, input_tokens_cached,
//     output_tokens, duration_ms}, error on a failed turn.
//   - pending_prompt, pending_prompt_resolved: prompt {prompt_id, kind,
//     prompt_state, questions | answers | reason}, built by run.
//   - artifacts_published: aliases, skipped, counts, built by run.
//   - thread_failed, in the worker thread: thread {alias, error}.
//   - policy_applied, policy_denied: the worker's shapes, built by run
//     (run/policyitems.go), bhw-run's fields beside; bhw-run's own: parked
//     and pending_prompt on the tool_result of a parked call
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
	ItemArtifactsPublished    = "artifacts_published"
	ItemThreadFailed          = "thread_failed"
)

// Item is one thread item bhw-run posts: a brief (the single text content
// block) and its metadata. Meta always carries "type"; run adds
// "emission_id" when it journals the item.
type Item struct {
	Brief string         `json:"brief"`
	Meta  map[string]any `json:"meta"`
	// Files are file blocks posted after the text block: session files
	// the item points at (artifacts_published).
	Files []FileBlock `json:"files,omitempty"`
}

// FileBlock is a content block of type file: a session file by its
// alias, with its name, content type and size.
type FileBlock struct {
	Alias       string `json:"alias"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
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

// ThinkingItem is the agent's reasoning; the brief is its first ~120
// characters, full_text_length the length of text in characters.
func ThinkingItem(text string) Item {
	return newItem(ItemThinking, Shorten(text, 120), "text", text, "full_text_length", utf8.RuneCountInString(text))
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

// StatusItem is a status line: token (api_retry, turn_timeout, …) is
// metadata.status, text both the brief and metadata.detail, and extra's
// fields sit beside them; an extra field never replaces type, status or
// detail.
func StatusItem(token, text string, extra map[string]any) Item {
	it := newItem(ItemStatus, text)
	for k, v := range extra {
		it.Meta[k] = v
	}
	it.Meta["type"], it.Meta["status"], it.Meta["detail"] = ItemStatus, token, text
	return it
}

// TurnEndItem closes a turn. metadata.status is outcome in the worker's
// words (TurnEndStatus), stats the turn's tokens and duration, error the
// failed turn's text; outcome (bhw-run's finer word for how the turn
// ended), cost_usd, num_turns and tools (ToolCounts) are bhw-run's own.
func TurnEndItem(outcome string, r TurnResult, tools ToolCounts) Item {
	brief := "— turn end —"
	if tools.Calls > 0 || tools.DeniedByPerson > 0 {
		brief = "— turn end: " + tools.String() + " —"
	}
	it := newItem(ItemTurnEnd, brief,
		"status", TurnEndStatus(outcome),
		"stats", map[string]any{
			"input_tokens": r.Usage.InputTokens, "input_tokens_cached": r.Usage.InputTokensCached,
			"output_tokens": r.Usage.OutputTokens, "duration_ms": r.DurationMS,
		},
		"cost_usd", r.CostUSD, "num_turns", r.NumTurns, "outcome", outcome, "tools", tools)
	if r.ErrorText != "" && outcome != "completed" {
		it.Meta["error"] = r.ErrorText
	}
	return it
}

// TurnEndStatus is a turn_end's outcome in blobhub-worker's vocabulary
// (completed, failed, aborted, timeout, cancelled): a turn stopped at the
// budget was aborted, one stalled or without progress failed. A parked
// turn, which the worker closes with no turn_end, was cut off at its
// question: cancelled (its outcome, beside, says parked).
func TurnEndStatus(outcome string) string {
	switch outcome {
	case "completed", "timeout":
		return outcome
	case "parked":
		return "cancelled"
	case "budget":
		return "aborted"
	}
	return "failed"
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

// NewPostID is a new metadata.post_id, "pst_" and a ULID, as blobhub-worker
// stamps one on every item it posts.
func NewPostID() string { return "pst_" + newULID(time.Now()) }

// NewPromptID is a new prompt.prompt_id, "prm_" and a ULID.
func NewPromptID() string { return "prm_" + newULID(time.Now()) }

// crockford is the alphabet of a ULID.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newULID is a ULID: 48 bits of milliseconds since the epoch, then 80
// random bits, as 26 characters of Crockford's base 32, the first ten the
// time, so that ids sort by when they were made.
func newULID(at time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(at.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	// 128 bits as 26 groups of five from the last, the first holding three.
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// Image is a picture a person attached, to be given to the agent as a
// picture with the next message (by a Session that is an ImageTaker).
type Image struct {
	MediaType string // image/png, image/jpeg, image/gif or image/webp
	Data      []byte
	// Path is where the image lies (the inbox), for an agent that reads
	// pictures from disk itself.
	Path string
}

// ImageTaker is a Session whose agent takes pictures with a message: the
// images given are sent with the next Turn's message, then forgotten.
type ImageTaker interface {
	AttachImages(imgs []Image)
}
