package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
)

// Options configure a Conn.
type Options struct {
	// Write sends one line (without its newline) to the peer.
	Write func(line []byte) error
	// Version adds "jsonrpc":"2.0" to every message sent. The ACP agents
	// want it; Codex's app-server does without.
	Version bool
	// ZeroBased numbers our requests from 0, as the ACP agents and Codex
	// number theirs (a fake agent plays them with it); else from 1.
	ZeroBased bool
	// OnRequest gets each of the peer's requests, on the goroutine that
	// called Receive. It must answer every one, at once or later, with Reply
	// or ReplyError: a peer may wait for an answer forever. Nil: each is
	// answered -32601.
	OnRequest func(Message)
	// OnNotification gets each notification, on Receive's goroutine. Nil:
	// they are dropped.
	OnNotification func(Message)
	// OnResponse sees each response to a request of ours, on Receive's
	// goroutine, before the caller gets it: an adapter that queues the
	// peer's messages for a turn marks there where the answer stands among
	// them. Nil: nothing sees it first.
	OnResponse func(Message)
	// OnTooLong answers a request found in the head of a line too long to
	// read. Nil: -32600, request too large.
	OnTooLong func(id ID, method string)
	// Logf notes what the Conn skips (undecodable lines, responses to no
	// request). Nil: nothing is noted.
	Logf func(format string, args ...any)
}

// Conn is one side of a JSON-RPC connection: it numbers our requests
// (1, 2, …, or from 0; the peer numbers its own in its own space), matches the
// responses in whatever order they come, hands the peer's requests and
// notifications over, and keeps the peer's requests not yet answered.
type Conn struct {
	o    Options
	next atomic.Int64

	mu       sync.Mutex
	pending  map[string]chan Message // our requests awaiting a response
	open     map[string]Message      // the peer's requests not yet answered
	order    []string                // keys of open, oldest first
	done     chan struct{}
	closeErr error
}

// ErrClosed is what calls return once the peer is gone, when Close was
// given no error of its own.
var ErrClosed = errors.New("the connection is closed")

// NewConn is a connection that writes with o.Write.
func NewConn(o Options) *Conn {
	return &Conn{o: o, pending: map[string]chan Message{}, open: map[string]Message{}, done: make(chan struct{})}
}

func (c *Conn) logf(format string, args ...any) {
	if c.o.Logf != nil {
		c.o.Logf(format, args...)
	}
}

// Receive handles one line from the peer.
func (c *Conn) Receive(line []byte) {
	m, err := Decode(line)
	if err != nil {
		c.logf("skipped a line that is not JSON-RPC: %v", err)
		return
	}
	switch m.Kind {
	case Response:
		c.mu.Lock()
		ch := c.pending[m.ID.String()]
		delete(c.pending, m.ID.String())
		c.mu.Unlock()
		if ch == nil {
			c.logf("skipped a response to no request of ours (id %s)", m.ID)
			return
		}
		if c.o.OnResponse != nil {
			c.o.OnResponse(m)
		}
		ch <- m
	case Request:
		c.mu.Lock()
		if _, dup := c.open[m.ID.String()]; !dup {
			c.order = append(c.order, m.ID.String())
		}
		c.open[m.ID.String()] = m
		c.mu.Unlock()
		if c.o.OnRequest == nil {
			_ = c.ReplyError(m.ID, CodeMethodNotFound, "method not found: "+m.Method)
			return
		}
		c.o.OnRequest(m)
	case Notification:
		if c.o.OnNotification != nil {
			c.o.OnNotification(m)
		}
	}
}

// ReceiveTooLong handles a line too long to read, of which head is the
// start: a request in it is answered all the same.
func (c *Conn) ReceiveTooLong(head []byte) {
	id, method, ok := RequestInHead(head)
	if !ok {
		c.logf("skipped a line over the limit")
		return
	}
	c.logf("skipped a request over the limit (id %s, %s): answering it", id, method)
	c.mu.Lock()
	c.open[id.String()] = Message{Kind: Request, ID: id, Method: method}
	c.order = append(c.order, id.String())
	c.mu.Unlock()
	if c.o.OnTooLong != nil {
		c.o.OnTooLong(id, method)
		return
	}
	_ = c.ReplyError(id, CodeInvalidRequest, "request too large")
}

// Close marks the peer gone: calls waiting for a response, and every later
// one, return err (ErrClosed when nil). The peer's unanswered requests stay
// listed.
func (c *Conn) Close(err error) {
	if err == nil {
		err = ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	c.closeErr = err
	close(c.done)
}

// Done is closed by Close.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// Go sends a request and returns its id and the channel its response
// arrives on (it gets exactly one message, unless the Conn closes first or
// Forget is called).
func (c *Conn) Go(method string, params any) (ID, <-chan Message, error) {
	n := c.next.Add(1)
	if c.o.ZeroBased {
		n--
	}
	id := Int(n)
	ch := make(chan Message, 1)
	c.mu.Lock()
	c.pending[id.String()] = ch
	c.mu.Unlock()
	if err := c.send(wire{ID: &id, Method: method, Params: params}); err != nil {
		c.Forget(id)
		return ID{}, nil, err
	}
	return id, ch, nil
}

// Forget stops waiting for the response to id; a late one is skipped.
func (c *Conn) Forget(id ID) {
	c.mu.Lock()
	delete(c.pending, id.String())
	c.mu.Unlock()
}

// Call sends a request and waits for its result. A response carrying an
// error returns it as an *Error.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, ch, err := c.Go(method, params)
	if err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return result(m)
	case <-c.done:
		c.Forget(id)
		// The response may have come just before the end.
		select {
		case m := <-ch:
			return result(m)
		default:
		}
		return nil, c.err()
	case <-ctx.Done():
		c.Forget(id)
		return nil, ctx.Err()
	}
}

func result(m Message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, m.Error
	}
	return m.Result, nil
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	return c.send(wire{Method: method, Params: params})
}

// Reply answers the peer's request id with result.
func (c *Conn) Reply(id ID, result any) error {
	b, err := Marshal(result)
	if err != nil {
		return err
	}
	raw := json.RawMessage(b)
	c.answered(id)
	return c.send(wire{ID: &id, Result: &raw})
}

// ReplyError answers the peer's request id with an error.
func (c *Conn) ReplyError(id ID, code int64, message string) error {
	return c.ReplyErrorData(id, code, message, nil)
}

// ReplyErrorData answers the peer's request id with an error carrying data
// (nil: none).
func (c *Conn) ReplyErrorData(id ID, code int64, message string, data any) error {
	e := &Error{Code: code, Message: message}
	if data != nil {
		b, err := Marshal(data)
		if err != nil {
			return err
		}
		e.Data = b
	}
	c.answered(id)
	return c.send(wire{ID: &id, Error: e})
}

func (c *Conn) answered(id ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.open[id.String()]; !ok {
		return
	}
	delete(c.open, id.String())
	for i, k := range c.order {
		if k == id.String() {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// Unanswered lists the peer's requests not answered yet, oldest first.
func (c *Conn) Unanswered() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Message, 0, len(c.order))
	for _, k := range c.order {
		out = append(out, c.open[k])
	}
	return out
}

type wire struct {
	Version string           `json:"jsonrpc,omitempty"`
	ID      *ID              `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  any              `json:"params,omitempty"`
	Result  *json.RawMessage `json:"result,omitempty"`
	Error   *Error           `json:"error,omitempty"`
}

func (c *Conn) send(w wire) error {
	if c.o.Version {
		w.Version = "2.0"
	}
	b, err := Marshal(w)
	if err != nil {
		return err
	}
	return c.o.Write(b)
}

// Marshal is json.Marshal without HTML escaping (prompts hold <, > and &,
// and thread.log is read by people): one line of JSON for an agent that
// reads lines, whether it speaks JSON-RPC or not.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
