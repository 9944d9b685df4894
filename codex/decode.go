package codex

import (
	"encoding/json"
)

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

// rateLimitsNotification is account/rateLimits/updated: the account's
// limit windows, each with how much is used and when it resets.
type rateLimitsNotification struct {
	RateLimits struct {
		Primary   *rateLimitWindow `json:"primary"`
		Secondary *rateLimitWindow `json:"secondary"`
	} `json:"rateLimits"`
}

type rateLimitWindow struct {
	UsedPercent float64 `json:"usedPercent"`
	ResetsAt    int64   `json:"resetsAt"`
}
