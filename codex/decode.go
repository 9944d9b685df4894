package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
)

// Message is one JSON-RPC line from the app-server, classified by which of
// id/method/result/error it has. The server omits "jsonrpc" (codex.md §3).
type Message struct {
	Kind   Kind
	ID     int64           // KindResponse and KindRequest (separate id spaces)
	Method string          // KindNotification and KindRequest
	Params json.RawMessage // KindNotification and KindRequest
	Result json.RawMessage // KindResponse
	Error  *RPCError       // KindResponse carrying an error
	Raw    []byte
}

// Kind of a Message.
type Kind int

const (
	KindNotification Kind = iota + 1 // method, no id
	KindRequest                      // method and id: the server asks the client
	KindResponse                     // id, result or error: the answer to our request
)

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string {
	return "codex: " + e.Message + " (" + strconv.FormatInt(e.Code, 10) + ")"
}

// ErrNotJSONRPC is returned for a line that is JSON but not a JSON-RPC message.
var ErrNotJSONRPC = errors.New("codex: not a json-rpc message")

// DecodeLine classifies one protocol line. It never panics; a bad line is an
// error the caller logs and skips.
func DecodeLine(line []byte) (Message, error) {
	var w struct {
		ID     *json.RawMessage `json:"id"`
		Method *string          `json:"method"`
		Params json.RawMessage  `json:"params"`
		Result json.RawMessage  `json:"result"`
		Error  *RPCError        `json:"error"`
	}
	line = bytes.TrimSpace(line)
	if err := json.Unmarshal(line, &w); err != nil {
		return Message{}, err
	}
	m := Message{Raw: line, Params: w.Params}
	var id int64
	hasID := false
	if w.ID != nil && string(*w.ID) != "null" {
		if err := json.Unmarshal(*w.ID, &id); err != nil {
			return Message{}, ErrNotJSONRPC // we only ever use integer ids
		}
		hasID = true
	}
	switch {
	case w.Method != nil && hasID:
		m.Kind, m.ID, m.Method = KindRequest, id, *w.Method
	case w.Method != nil:
		m.Kind, m.Method = KindNotification, *w.Method
	case hasID && (w.Result != nil || w.Error != nil):
		m.Kind, m.ID, m.Result, m.Error = KindResponse, id, w.Result, w.Error
	default:
		return Message{}, ErrNotJSONRPC
	}
	return m, nil
}

var (
	prefixMethod = regexp.MustCompile(`"method"\s*:\s*"([^"\\]*)"`)
	prefixID     = regexp.MustCompile(`"id"\s*:\s*(\d+)`)
)

// requestInPrefix looks at the first bytes of a line too long to decode and
// reports whether it is a server request, so it can still be answered. The
// app-server serialises method and id before params, so both are found
// before "params"; an "id" inside params (item ids are strings) is ignored.
func requestInPrefix(prefix []byte) (id int64, method string, ok bool) {
	head := prefix
	if i := bytes.Index(prefix, []byte(`"params"`)); i >= 0 {
		head = prefix[:i]
	}
	mm := prefixMethod.FindSubmatch(head)
	mi := prefixID.FindSubmatch(head)
	if mm == nil || mi == nil {
		return 0, "", false
	}
	id, err := strconv.ParseInt(string(mi[1]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	return id, string(mm[1]), true
}

// Wire shapes of the notifications and requests the adapter reads
// (v2 schema of codex 0.171.0, `codex app-server generate-json-schema`).

type threadResult struct {
	Thread struct {
		ID string `json:"id"`
	} `json:"thread"`
}

type turnResult struct {
	Turn wireTurn `json:"turn"`
}

type wireTurn struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Message           string          `json:"message"`
		CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
		AdditionalDetails *string         `json:"additionalDetails"`
	} `json:"error"`
	DurationMS *int64 `json:"durationMs"`
}

type turnNotification struct {
	ThreadID string   `json:"threadId"`
	Turn     wireTurn `json:"turn"`
}

type itemNotification struct {
	ThreadID string   `json:"threadId"`
	TurnID   string   `json:"turnId"`
	Item     wireItem `json:"item"`
}

// wireItem is the union of the ThreadItem variants the adapter maps.
type wireItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// agentMessage, plan
	Text string `json:"text"`
	// reasoning
	Summary []json.RawMessage `json:"summary"`
	Content []json.RawMessage `json:"content"`
	// commandExecution
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	CommandActions   []commandAction `json:"commandActions"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Status           string          `json:"status"`
	// fileChange
	Changes json.RawMessage `json:"changes"`
	// mcpToolCall
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
	// webSearch
	Query string `json:"query"`
}

type commandAction struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

type fileUpdateChange struct {
	Path string `json:"path"`
	Kind struct {
		Type     string  `json:"type"`
		MovePath *string `json:"move_path"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

type errorNotification struct {
	Error struct {
		Message           string          `json:"message"`
		CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
		AdditionalDetails *string         `json:"additionalDetails"`
	} `json:"error"`
	WillRetry bool   `json:"willRetry"`
	ThreadID  string `json:"threadId"`
	TurnID    string `json:"turnId"`
}

type tokenUsageNotification struct {
	ThreadID   string `json:"threadId"`
	TurnID     string `json:"turnId"`
	TokenUsage struct {
		Total tokenCounts `json:"total"`
		Last  tokenCounts `json:"last"`
	} `json:"tokenUsage"`
}

type tokenCounts struct {
	TotalTokens           int64 `json:"totalTokens"`
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}

func (a tokenCounts) minus(b tokenCounts) tokenCounts {
	return tokenCounts{
		TotalTokens:           a.TotalTokens - b.TotalTokens,
		InputTokens:           a.InputTokens - b.InputTokens,
		CachedInputTokens:     a.CachedInputTokens - b.CachedInputTokens,
		OutputTokens:          a.OutputTokens - b.OutputTokens,
		ReasoningOutputTokens: a.ReasoningOutputTokens - b.ReasoningOutputTokens,
	}
}

func (a tokenCounts) plus(b tokenCounts) tokenCounts {
	return tokenCounts{
		TotalTokens:           a.TotalTokens + b.TotalTokens,
		InputTokens:           a.InputTokens + b.InputTokens,
		CachedInputTokens:     a.CachedInputTokens + b.CachedInputTokens,
		OutputTokens:          a.OutputTokens + b.OutputTokens,
		ReasoningOutputTokens: a.ReasoningOutputTokens + b.ReasoningOutputTokens,
	}
}

type commandApprovalParams struct {
	ThreadID       string          `json:"threadId"`
	TurnID         string          `json:"turnId"`
	ItemID         string          `json:"itemId"`
	Command        *string         `json:"command"`
	Cwd            *string         `json:"cwd"`
	CommandActions []commandAction `json:"commandActions"`
	Reason         *string         `json:"reason"`
	// Kind is "command" (or absent), "writeStdin" (input to a running
	// terminal) or "humanCommand".
	Kind                   *string         `json:"kind"`
	NetworkApprovalContext json.RawMessage `json:"networkApprovalContext"`
}

type fileChangeApprovalParams struct {
	ThreadID  string  `json:"threadId"`
	TurnID    string  `json:"turnId"`
	ItemID    string  `json:"itemId"`
	Reason    *string `json:"reason"`
	GrantRoot *string `json:"grantRoot"`
}
