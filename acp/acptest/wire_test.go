package acptest

// The JSON-RPC message and the transcript line, as the probes (realcli)
// write them and the transcript check reads them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s %s", e.Code, e.Message, e.Data)
}

type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`

	at time.Duration // since spawn
}

func (m *rpcMsg) isRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// update is a session/update notification's update kind ("" otherwise).
func (m *rpcMsg) update() (kind string, u map[string]any) {
	if m.Method != "session/update" {
		return "", nil
	}
	var p struct {
		Update map[string]any `json:"update"`
	}
	_ = json.Unmarshal(m.Params, &p)
	kind, _ = p.Update["sessionUpdate"].(string)
	return kind, p.Update
}

func (m *rpcMsg) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// line is one transcript entry.
type line struct {
	Dir string          `json:"dir"` // "send": client → agent, "recv": agent → client
	T   float64         `json:"t"`   // seconds since spawn
	Msg json.RawMessage `json:"msg"`
	// Trimmed is the message's real size when its availableCommands list
	// was cut to keep the transcript small (Qwen Code sends ~570 KB).
	Trimmed int `json:"trimmed,omitempty"`
}

// sameJSON: a and b marshal to the same JSON.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
