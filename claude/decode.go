package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/blobhub/bhw-run/agent"
)

// Line kinds the CLI prints on stdout (docs/agents.md, Claude Code stream).
const (
	kindSystem        = "system"
	kindAssistant     = "assistant"
	kindUser          = "user"
	kindResult        = "result"
	kindStreamEvent   = "stream_event"
	kindControlReq    = "control_request"
	kindControlResp   = "control_response"
	kindControlCancel = "control_cancel_request"
	// kindRateLimit reports the state of a claude.ai subscription's usage
	// limit (status allowed or rejected, resetsAt in Unix seconds).
	kindRateLimit = "rate_limit_event"
)

// head is what every line is peeked for.
type head struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
}

// line is one decoded stdout line: its kind plus the concrete message.
type line struct {
	Kind    string
	Subtype string
	Raw     []byte

	System    *systemMsg
	Assistant *assistantMsg
	User      *userMsg
	Result    *resultMsg
	Control   *controlRequest
	Cancel    *controlCancel
	RateLimit *rateLimitEvent
}

// rateLimitInfo is a subscription limit's state, in rate_limit_event and
// in the api_error_params of the request it refused.
type rateLimitInfo struct {
	Status        string `json:"status"`
	ResetsAt      int64  `json:"resetsAt"`
	RateLimitType string `json:"rateLimitType"`
}

type rateLimitEvent struct {
	Info rateLimitInfo `json:"rate_limit_info"`
}

type systemMsg struct {
	Subtype   string   `json:"subtype"`
	SessionID string   `json:"session_id"`
	Tools     []string `json:"tools"`
	Model     string   `json:"model"`
	// api_retry
	Attempt      int    `json:"attempt"`
	MaxRetries   int    `json:"max_retries"`
	RetryDelayMS int64  `json:"retry_delay_ms"`
	ErrorStatus  *int   `json:"error_status"`
	Error        string `json:"error"`
	// permission_denied
	ToolName  string `json:"tool_name"`
	ToolUseID string `json:"tool_use_id"`
	Message   string `json:"message"`
	// status
	Status *string `json:"status"`
	// compact_boundary
	CompactMetadata *struct {
		Trigger   string `json:"trigger"`
		PreTokens int64  `json:"pre_tokens"`
	} `json:"compact_metadata"`
	Content string `json:"content"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type assistantMsg struct {
	Message struct {
		ID      string         `json:"id"`
		Model   string         `json:"model"`
		Content []contentBlock `json:"content"`
	} `json:"message"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	SessionID       string  `json:"session_id"`
	IsAPIError      bool    `json:"is_api_error_message"`
	// Error classifies an API error message: authentication_failed,
	// rate_limit, …; APIErrorStatus is its HTTP status (none for a CLI
	// that is not logged in at all).
	Error          string `json:"error"`
	APIErrorStatus *int   `json:"api_error_status"`
	APIErrorParams *struct {
		RateLimitInfo *rateLimitInfo `json:"rate_limit_info"`
	} `json:"api_error_params"`
}

type userMsg struct {
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // string or blocks
	} `json:"message"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	IsReplay        bool    `json:"isReplay"`
}

type resultMsg struct {
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	Errors         []string `json:"errors"`
	NumTurns       int      `json:"num_turns"`
	DurationMS     int64    `json:"duration_ms"`
	TotalCostUSD   float64  `json:"total_cost_usd"`
	SessionID      string   `json:"session_id"`
	TerminalReason string   `json:"terminal_reason"`
	APIErrorStatus *int     `json:"api_error_status"`
	Usage          struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

type controlRequest struct {
	RequestID string `json:"request_id"`
	Request   struct {
		Subtype                 string          `json:"subtype"`
		ToolName                string          `json:"tool_name"`
		Input                   json.RawMessage `json:"input"`
		ToolUseID               string          `json:"tool_use_id"`
		Description             string          `json:"description"`
		BlockedPath             string          `json:"blocked_path"`
		RequiresUserInteraction bool            `json:"requires_user_interaction"`
	} `json:"request"`
}

type controlCancel struct {
	RequestID string `json:"request_id"`
}

// decodeLine peeks at type/subtype and decodes the concrete message. An
// unknown type is not an error (the line is returned with Kind set); a line
// that is not a JSON object, or whose known type does not decode, is.
func decodeLine(raw []byte) (line, error) {
	raw = bytes.TrimSpace(raw)
	var h head
	if err := json.Unmarshal(raw, &h); err != nil {
		return line{Raw: raw}, fmt.Errorf("not a JSON object: %w", err)
	}
	l := line{Kind: h.Type, Subtype: h.Subtype, Raw: raw}
	// The message a known type decodes into: Unmarshal allocates it.
	target, known := map[string]any{
		kindSystem: &l.System, kindAssistant: &l.Assistant, kindUser: &l.User, kindResult: &l.Result,
		kindControlReq: &l.Control, kindControlCancel: &l.Cancel, kindRateLimit: &l.RateLimit,
	}[h.Type]
	if !known {
		return l, nil
	}
	if err := json.Unmarshal(raw, target); err != nil {
		return line{Kind: h.Type, Subtype: h.Subtype, Raw: raw}, fmt.Errorf("decoding %s line: %w", h.Type, err)
	}
	return l, nil
}

// knownKind reports whether the adapter understands a line type (others
// are logged and skipped).
func knownKind(k string) bool {
	switch k {
	case kindSystem, kindAssistant, kindUser, kindResult, kindStreamEvent,
		kindControlReq, kindControlResp, kindControlCancel, kindRateLimit:
		return true
	}
	return false
}

// items maps an assistant, user or system line to thread items: text,
// tool_use, tool_result, thinking, and the system lines worth a status.
func (l line) items() []agent.Item {
	var out []agent.Item
	switch {
	case l.Assistant != nil:
		if l.Assistant.IsAPIError {
			// The synthetic "API Error: …" message repeats what the error
			// result says; it is reported once, as the turn's ErrorText.
			return nil
		}
		for _, b := range l.Assistant.Message.Content {
			switch b.Type {
			case "text":
				if strings.TrimSpace(b.Text) != "" {
					out = append(out, agent.TextItem(b.Text))
				}
			case "thinking":
				if strings.TrimSpace(b.Thinking) != "" {
					out = append(out, agent.ThinkingItem(b.Thinking))
				}
			case "tool_use":
				out = append(out, agent.ToolCallItem(b.Name, b.ID, b.Input, summary(b.Name, b.Input)))
			}
		}
	case l.User != nil:
		if l.User.IsReplay {
			return nil
		}
		var blocks []contentBlock
		if json.Unmarshal(l.User.Message.Content, &blocks) != nil {
			return nil // a plain string: the CLI's own user text, not a result
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, agent.ToolResultItem(b.ToolUseID, resultText(b.Content), b.IsError))
			}
		}
	case l.System != nil:
		if it, ok := l.System.status(); ok {
			out = append(out, it)
		}
	}
	return out
}

// status maps the meaningful system subtypes to a status item.
func (m *systemMsg) status() (agent.Item, bool) {
	switch m.Subtype {
	case "api_retry":
		st := 0
		if m.ErrorStatus != nil {
			st = *m.ErrorStatus
		}
		text := fmt.Sprintf("API error %d (%s), retry %d of %d in %.1f s", st, m.Error, m.Attempt, m.MaxRetries, float64(m.RetryDelayMS)/1000)
		return agent.StatusItem("api_retry", text, map[string]any{
			"attempt": m.Attempt, "max_retries": m.MaxRetries, "retry_delay_ms": m.RetryDelayMS,
			"error_status": st, "error": m.Error,
		}), true
	case "compact_boundary", "compaction":
		extra := map[string]any{}
		text := "conversation compacted"
		if m.CompactMetadata != nil {
			extra["trigger"] = m.CompactMetadata.Trigger
			extra["pre_tokens"] = m.CompactMetadata.PreTokens
			text = fmt.Sprintf("conversation compacted (%s, %d tokens before)", m.CompactMetadata.Trigger, m.CompactMetadata.PreTokens)
		}
		return agent.StatusItem("compaction", text, extra), true
	case "permission_denied":
		text := fmt.Sprintf("Claude refused %s", m.ToolName)
		if m.Message != "" {
			text += ": " + m.Message
		}
		return agent.StatusItem("permission_denied", text, map[string]any{
			"tool": m.ToolName, "invocation_id": m.ToolUseID,
		}), true
	case "status":
		// "requesting" accompanies every API call and null clears a status:
		// noise. "compacting" and the like are worth a line.
		if m.Status == nil || *m.Status == "" || *m.Status == "requesting" {
			return agent.Item{}, false
		}
		return agent.StatusItem("agent_status", "Claude is "+*m.Status, map[string]any{"agent_status": *m.Status}), true
	}
	return agent.Item{}, false
}

// resultText flattens a tool_result content (a string or text blocks).
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				parts = append(parts, b.Text)
			case "":
			default:
				parts = append(parts, "["+b.Type+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}

// summary is the one-line description of a call: Bash → its command, file
// tools → the path, anything else → its input, shortened.
func summary(tool string, input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch tool {
	case "Bash":
		return oneLine(str("command"))
	case "Read", "Write", "Edit", "MultiEdit":
		return str("file_path")
	case "NotebookEdit", "NotebookRead":
		return str("notebook_path")
	case "Glob", "Grep":
		p := str("pattern")
		if d := str("path"); d != "" {
			p += " in " + d
		}
		return p
	case "WebFetch":
		return str("url")
	case "WebSearch":
		return str("query")
	}
	s := oneLine(string(bytes.TrimSpace(input)))
	if s == "{}" || s == "null" {
		return ""
	}
	return agent.Shorten(s, 120)
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// requestRegexps are compiled on first use: only a line that cannot be
// decoded needs them, and compiling them at start cost every bhw-run process
// (an idle run, ls) a quarter of a millisecond.
var requestRegexps = sync.OnceValues(func() (control, id *regexp.Regexp) {
	return regexp.MustCompile(`"type"\s*:\s*"control_request"`),
		regexp.MustCompile(`"request_id"\s*:\s*"((?:[^"\\]|\\.){1,200})"`)
})

// overlongRequestID finds the request_id of a control_request line that
// cannot be decoded: the first bytes of a line too long to read, or a line
// whose body does not decode.
func overlongRequestID(prefix []byte) (string, bool) {
	reControlRequest, reRequestID := requestRegexps()
	if !reControlRequest.Match(prefix) {
		return "", false
	}
	m := reRequestID.FindSubmatch(prefix)
	if m == nil {
		return "", false
	}
	var id string
	if json.Unmarshal([]byte(`"`+string(m[1])+`"`), &id) != nil {
		return "", false
	}
	return id, true
}
