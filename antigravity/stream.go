package antigravity

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
)

// The stream agy prints under --output-format stream-json: one JSON object
// a line, {"event": <name>, <name>: {…}}; init also carries the
// conversation id at the top level.
//
//	init         conversation_id: the id a later --conversation resumes
//	step_update  {step_index, step_type, state, text_delta, tool_name,
//	             tool_info {name, parameters, output, error {message}}}
//	result       {status, response, denied_actions, error, usage
//	             {input_tokens, output_tokens, cache_read_tokens},
//	             conversation_id}
//
// An agent_response step streams its reply as text deltas, which are
// joined into one text item per reply; a tool step is its call when ACTIVE
// and its result when DONE or ERROR. Any other event is skipped.

// event is one line of the stream.
type event struct {
	Event          string          `json:"event"`
	ConversationID string          `json:"conversation_id"`
	Step           *step           `json:"step_update"`
	Result         *resultPayload  `json:"result"`
	Init           json.RawMessage `json:"init"`
}

type step struct {
	Index    json.RawMessage `json:"step_index"`
	Type     string          `json:"step_type"`
	State    string          `json:"state"`
	Delta    delta           `json:"text_delta"`
	ToolName string          `json:"tool_name"`
	ToolInfo *toolInfo       `json:"tool_info"`
}

type toolInfo struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Output     json.RawMessage `json:"output"`
	Error      json.RawMessage `json:"error"`
}

type resultPayload struct {
	Status         string            `json:"status"`
	Response       string            `json:"response"`
	DeniedActions  []json.RawMessage `json:"denied_actions"`
	Error          string            `json:"error"`
	Usage          usage             `json:"usage"`
	ConversationID string            `json:"conversation_id"`
}

type usage struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens"`
}

// hookDenied is how agy words a call its PreToolUse hook refused, in the
// error of the call's ERROR step; the turn's every-call-denied rule counts
// these, as blobhub-worker does.
const hookDenied = "denied by pre-tool hook"

// maxReply bounds the text of one reply kept while its deltas stream in:
// what is past it is dropped (and said so at its end). An item is cut far
// shorter than this when it is posted; the bound is what keeps a reply
// streamed without end from growing bhw-run.
const maxReply = 4 << 20

// delta is a reply's text delta, decoded only up to maxReply bytes: a
// line of 64 MiB costs bhw-run its line buffer and no more, not a second
// copy of it as a string. over is how many bytes of JSON were not decoded.
type delta struct {
	text string
	over int
}

func (d *delta) UnmarshalJSON(raw []byte) error {
	if len(raw) <= maxReply+2 || raw[0] != '"' {
		var s *string
		if err := json.Unmarshal(raw, &s); err != nil || s == nil {
			return err
		}
		d.text = *s
		return nil
	}
	// Cut the JSON string at maxReply, backing off over an escape the cut
	// would split (\uXXXX is the longest), and decode what is before it.
	for k := maxReply; k > maxReply-8; k-- {
		var s string
		if json.Unmarshal(append(raw[:k:k], '"'), &s) == nil {
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "")
			}
			d.text, d.over = s, len(raw)-1-k
			return nil
		}
	}
	return errors.New("text_delta does not decode")
}

// decoder turns the stream into items, joining a reply's deltas, and
// counts what the turn's outcome rules need. It holds no process: the
// translator conformance test feeds it lines directly.
type decoder struct {
	conversationID string // pinned from init, else the result's

	// joining says a reply is being joined; step is its step_index as
	// written (null and a missing one alike), which a reply of another
	// index ends. A reply without an index joins whatever follows it, as
	// in the worker's translator.
	joining bool
	step    string
	buf     strings.Builder
	dropped int // bytes of the reply past maxReply

	replies     int
	toolCalls   int // tool steps seen ACTIVE
	hookDenials int // tool steps whose error says the hook denied them
	sawInit     bool

	result *resultPayload
}

// feed decodes one line and returns the items it completes. A line that
// is not a JSON object is an error the caller logs; an unknown event is
// skipped (known false), though like any other event it ends the reply
// being joined.
func (d *decoder) feed(line []byte) (items []agent.Item, known bool, err error) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, false, err
	}
	switch e.Event {
	case "init":
		// The worker posts agy's init as a status item "init"; so does
		// bhw-run, so a thread reads the same whichever runs it.
		items = append(d.flush(), agent.Item{Brief: "init", Meta: map[string]any{"type": agent.ItemStatus, "status": "init"}})
		d.sawInit = true
		if d.conversationID == "" && e.ConversationID != "" {
			d.conversationID = e.ConversationID
		}
	case "step_update":
		if e.Step == nil {
			return d.flush(), true, nil
		}
		return d.step1(e.Step), true, nil
	case "result":
		items = d.flush()
		r := e.Result
		if r == nil {
			r = &resultPayload{}
		}
		d.result = r
		if d.conversationID == "" {
			d.conversationID = r.ConversationID
		}
	default:
		return d.flush(), false, nil
	}
	return items, true, nil
}

func (d *decoder) step1(s *step) []agent.Item {
	index := indexString(s.Index)
	if s.Type == "agent_response" {
		var out []agent.Item
		raw := string(s.Index)
		if raw == "null" {
			raw = ""
		}
		if d.joining && d.step != "" && raw != d.step {
			out = d.flush()
		}
		d.joining, d.step = true, raw
		d.add(s.Delta.text)
		d.dropped += s.Delta.over
		if s.State == "DONE" || s.State == "ERROR" {
			out = append(out, d.flush()...)
		}
		return out
	}
	out := d.flush()
	if s.Type != "tool" {
		return out
	}
	info := s.ToolInfo
	if info == nil {
		info = &toolInfo{}
	}
	tool := s.ToolName
	if tool == "" {
		tool = info.Name
	}
	if s.State == "ACTIVE" {
		d.toolCalls++
		in := info.Parameters
		if !isObject(in) {
			in = json.RawMessage("{}")
		}
		return append(out, agent.ToolCallItem(tool, index, in, summary(tool, in)))
	}
	msg, failed := errorMessage(info.Error)
	failed = failed || s.State == "ERROR"
	out = append(out, agent.ToolResultItem(index, text(info.Output), failed))
	if failed {
		if msg == "" {
			msg = "tool failed"
		}
		if strings.Contains(strings.ToLower(msg), hookDenied) {
			d.hookDenials++
		}
		out = append(out, agent.Item{Brief: "[error] " + msg, Meta: map[string]any{"type": agent.ItemStatus, "status": "error", "detail": msg}})
	}
	return out
}

func (d *decoder) add(delta string) {
	room := maxReply - d.buf.Len()
	if len(delta) > room {
		d.dropped += len(delta) - max(room, 0)
		delta = delta[:max(room, 0)]
	}
	d.buf.WriteString(delta)
}

// flush ends the reply being joined: its text item, if it said anything.
func (d *decoder) flush() []agent.Item {
	text := d.buf.String()
	if d.dropped > 0 {
		text += "\n[bhw-run: " + strconv.Itoa(d.dropped) + " more bytes of this reply were not kept]"
	}
	d.buf.Reset()
	d.joining, d.step, d.dropped = false, "", 0
	if text == "" {
		return nil
	}
	d.replies++
	return []agent.Item{agent.TextItem(text)}
}

// indexString is a step index as the worker spells it: str() of the JSON
// value (a number as written, a string as it is, none as ""), which is how
// text reads any value.
func indexString(raw json.RawMessage) string { return text(raw) }

// text is a tool's output as a string: a string as it is, anything else
// as its JSON, none as "".
func text(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// errorMessage reads a tool_info.error: its message, and whether it says
// anything (a non-empty object or string).
func errorMessage(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" || string(raw) == `""` {
		return "", false
	}
	var e struct {
		Message any `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil {
		if e.Message == nil {
			return "", true
		}
		if s, ok := e.Message.(string); ok {
			return s, true
		}
		b, _ := json.Marshal(e.Message)
		return string(b), true
	}
	return text(raw), true
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) > 0 && json.Unmarshal(raw, &m) == nil && m != nil
}

// Outcomes of a result status. SUCCESS is the only completed one; the
// states agy reports for a run it did not finish (INVALID, WAITING,
// RUNNING) and any unknown one are failures, as blobhub-worker maps them.
func statusOutcome(status string) string {
	switch status {
	case "SUCCESS":
		return agent.TurnCompleted
	case "CANCELED", "INTERRUPTED":
		return agent.TurnInterrupted
	}
	return agent.TurnFailed
}

// outcome is the turn's end from the result and what the stream showed,
// with blobhub-worker's two silent failures made loud: a turn whose every
// call the hook denied did nothing, and a gated turn whose calls ran with
// the hook never contacted was not gated. gated says the turn ran with the
// hook installed; hookCalls counts the hook's contacts.
func (d *decoder) outcome(gated bool, hookCalls int) agent.TurnResult {
	r := d.result
	out := agent.TurnResult{Outcome: statusOutcome(r.Status), ErrorText: r.Error, NumTurns: d.replies}
	out.Usage = agent.Usage{
		InputTokens:       r.Usage.InputTokens + r.Usage.CacheReadTokens,
		InputTokensCached: r.Usage.CacheReadTokens,
		OutputTokens:      r.Usage.OutputTokens,
	}
	if out.Outcome == agent.TurnCompleted && len(r.DeniedActions) > 0 && strings.TrimSpace(r.Response) == "" {
		out.Outcome = agent.TurnFailed
		if out.ErrorText == "" {
			out.ErrorText = "every action was denied and nothing was produced: " + deniedNames(r.DeniedActions)
		}
	}
	if out.Outcome == agent.TurnCompleted && d.toolCalls > 0 && d.hookDenials >= d.toolCalls {
		out.Outcome = agent.TurnFailed
		if out.ErrorText == "" {
			out.ErrorText = "every tool call was denied by the gate (" + strconv.Itoa(d.hookDenials) + "/" + strconv.Itoa(d.toolCalls) +
				"); nothing the agent attempted actually ran"
		}
	}
	if out.Outcome == agent.TurnCompleted && gated && d.toolCalls > 0 && hookCalls == 0 {
		out.Outcome = agent.TurnFailed
		out.ErrorText = NeverContacted + ": tool calls ran but the permission hook was never consulted, so this turn was not gated"
	}
	if out.Outcome == agent.TurnCompleted {
		out.ErrorText = ""
	}
	return out
}

// NeverContacted starts the error of a gated turn whose calls ran while
// the hook was never contacted (the work folder's hooks.json was not read,
// or was changed under the turn).
const NeverContacted = "agy_gate_never_contacted"

func deniedNames(denied []json.RawMessage) string {
	var names []string
	for _, raw := range denied {
		var d struct {
			DisplayName string `json:"display_name"`
			Action      string `json:"action"`
		}
		_ = json.Unmarshal(raw, &d)
		names = append(names, cmpOr(d.DisplayName, d.Action, "?"))
	}
	return strings.Join(names, ", ")
}

func cmpOr(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
