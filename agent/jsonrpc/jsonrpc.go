// Package jsonrpc is one JSON-RPC 2.0 peer over a stream of lines, the
// protocol Codex's app-server speaks today and the ACP agents (Gemini CLI
// and others) speak too: requests whose ids may be strings or numbers (0
// included), responses in any order, the other side's own requests in their
// own id space, each of them answered (an unknown method with -32601), and
// notifications. It is a room of its own under agent/ because several
// adapters share it and it is protocol-neutral: it knows no method of
// anyone's, only the envelope of a message. It has no transport either: the
// adapter feeds it the lines it reads and gives it a function that writes
// one.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// Error codes of the JSON-RPC 2.0 specification.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// ID is a request id: a JSON string or number, kept as its canonical JSON
// text so that 7 and "7" stay different ids. The zero ID is "no id".
type ID struct{ raw string }

// Int is a numeric id.
func Int(n int64) ID { return ID{raw: strconv.FormatInt(n, 10)} }

// String is a string id.
func String(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: string(b)}
}

// IsZero reports whether the id is absent.
func (id ID) IsZero() bool { return id.raw == "" }

// String is the id as JSON text: 7 or "abc".
func (id ID) String() string { return id.raw }

// MarshalJSON writes the id as it came (null for the zero ID).
func (id ID) MarshalJSON() ([]byte, error) {
	if id.raw == "" {
		return []byte("null"), nil
	}
	return []byte(id.raw), nil
}

// UnmarshalJSON accepts a string, a number or null.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*id = ID{}
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = String(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("an id is a string or a number, not %s", b)
		}
		*id = ID{raw: n.String()}
	}
	return nil
}

// Kind of a Message.
type Kind int

const (
	Notification Kind = iota + 1 // method, no id
	Request                      // method and id: the peer asks us
	Response                     // id and result or error: the answer to our request
)

func (k Kind) String() string {
	switch k {
	case Notification:
		return "notification"
	case Request:
		return "request"
	case Response:
		return "response"
	}
	return "unknown"
}

// Message is one decoded line.
type Message struct {
	Kind   Kind
	ID     ID              // Request and Response
	Method string          // Request and Notification
	Params json.RawMessage // Request and Notification
	Result json.RawMessage // Response
	Error  *Error          // Response carrying an error
	Raw    []byte
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return e.Message + " (" + strconv.FormatInt(e.Code, 10) + ")"
}

// ErrNotJSONRPC is returned for a line that is JSON but not a JSON-RPC
// message.
var ErrNotJSONRPC = errors.New("not a JSON-RPC 2.0 message")

// Decode classifies one line. "jsonrpc" may be "2.0" or absent (Codex's
// app-server omits it); anything else is refused. It never panics: a bad
// line is an error the caller logs and skips.
func Decode(line []byte) (Message, error) {
	var w struct {
		Version *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"` // "null" when null, empty when absent
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   *Error          `json:"error"`
	}
	line = bytes.TrimSpace(line)
	if err := json.Unmarshal(line, &w); err != nil {
		return Message{}, err
	}
	if w.Version != nil && *w.Version != "2.0" {
		return Message{}, fmt.Errorf("%w: jsonrpc %q", ErrNotJSONRPC, *w.Version)
	}
	m := Message{Raw: line, Params: w.Params}
	if w.ID != nil {
		if err := m.ID.UnmarshalJSON(w.ID); err != nil {
			return Message{}, fmt.Errorf("%w: %v", ErrNotJSONRPC, err)
		}
	}
	switch {
	case w.Method != nil && !m.ID.IsZero():
		m.Kind, m.Method = Request, *w.Method
	case w.Method != nil:
		m.Kind, m.Method = Notification, *w.Method
	case w.ID != nil && (w.Result != nil || w.Error != nil):
		// An id of null answers a request the peer could not read.
		m.Kind, m.Result, m.Error = Response, w.Result, w.Error
	default:
		return Message{}, ErrNotJSONRPC
	}
	return m, nil
}

// headRegexps are compiled on first use (only an overlong line needs them):
// compiled at start they cost every bhw-run process, idle runs included.
var headRegexps = sync.OnceValues(func() (method, id *regexp.Regexp) {
	return regexp.MustCompile(`"method"\s*:\s*"((?:[^"\\]|\\.)*)"`),
		regexp.MustCompile(`"id"\s*:\s*(-?[0-9][0-9.eE+-]*|"(?:[^"\\]|\\.)*")`)
})

// RequestInHead looks at the first bytes of a line too long to decode and
// reports whether it is a request, so it can still be answered. Only what
// stands before "params" counts (an "id" inside params is some item's):
// both Codex and the ACP agents write id and method first.
func RequestInHead(head []byte) (id ID, method string, ok bool) {
	if i := bytes.Index(head, []byte(`"params"`)); i >= 0 {
		head = head[:i]
	}
	headMethod, headID := headRegexps()
	mm := headMethod.FindSubmatch(head)
	mi := headID.FindSubmatch(head)
	if mm == nil || mi == nil {
		return ID{}, "", false
	}
	if err := id.UnmarshalJSON(mi[1]); err != nil || id.IsZero() {
		return ID{}, "", false
	}
	if err := json.Unmarshal(append(append([]byte{'"'}, mm[1]...), '"'), &method); err != nil {
		return ID{}, "", false
	}
	return id, method, true
}
