package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// peer is the other side: it records what the Conn writes.
type peer struct {
	mu    sync.Mutex
	lines []string
	sent  chan string
}

func newPeer() *peer { return &peer{sent: make(chan string, 100)} }

func (p *peer) write(b []byte) error {
	p.mu.Lock()
	p.lines = append(p.lines, string(b))
	p.mu.Unlock()
	p.sent <- string(b)
	return nil
}

func (p *peer) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case l := <-p.sent:
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("the Conn wrote %q: %v", l, err)
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("the Conn wrote nothing")
		return nil
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		line   string
		kind   Kind
		id     string
		method string
		err    bool
	}{
		{`{"id":1,"result":{}}`, Response, "1", "", false},
		{`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}`, Request, "0", "session/request_permission", false},
		{`{"jsonrpc":"2.0","id":"abc","method":"fs/read_text_file"}`, Request, `"abc"`, "fs/read_text_file", false},
		{`{"method":"turn/started","params":{"x":1}}`, Notification, "", "turn/started", false},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, Response, "", "", false},
		{`{"id":"7","error":{"code":-32601,"message":"nope"}}`, Response, `"7"`, "", false},
		{`{"jsonrpc":"1.0","id":1,"result":{}}`, 0, "", "", true},
		{`{"id":{"x":1},"method":"m"}`, 0, "", "", true},
		{`{"id":1}`, 0, "", "", true},
		{`[1,2]`, 0, "", "", true},
		{`not json`, 0, "", "", true},
	} {
		m, err := Decode([]byte(tc.line))
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v", tc.line, err)
			continue
		}
		if err == nil && (m.Kind != tc.kind || m.ID.String() != tc.id || m.Method != tc.method) {
			t.Errorf("%s: %v id %s method %q", tc.line, m.Kind, m.ID, m.Method)
		}
	}
	// 7 and "7" are different ids.
	if Int(7) == String("7") {
		t.Error("7 and \"7\" are the same id")
	}
}

func TestRequestInHead(t *testing.T) {
	for _, tc := range []struct {
		in     string
		ok     bool
		id     ID
		method string
	}{
		{`{"method":"item/commandExecution/requestApproval","id":3,"params":{"command":"xxxx`, true, Int(3), "item/commandExecution/requestApproval"},
		{`{"id":12,"method":"item/tool/call","params":{`, true, Int(12), "item/tool/call"},
		{`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"toolCall":{"id":"x`, true, Int(0), "session/request_permission"},
		{`{"jsonrpc":"2.0","id":"r-\"1","method":"a\/b","params":`, true, String(`r-"1`), "a/b"},
		{`{"method":"item/completed","params":{"item":{"id":4,"type":"x"`, false, ID{}, ""},
		{`{"id":5,"result":{"thread":`, false, ID{}, ""},
		{`garbage`, false, ID{}, ""},
	} {
		id, method, ok := RequestInHead([]byte(tc.in))
		if ok != tc.ok || id != tc.id || method != tc.method {
			t.Errorf("%s: got %s %q %v", tc.in, id, method, ok)
		}
	}
}

// TestConn: responses out of order reach their calls; the peer's requests
// live in their own id space (its id 1 is not our id 1, its id 0 is
// valid); a request nobody handles is answered -32601; notifications are
// handed over; with Version every message says "jsonrpc":"2.0".
func TestConn(t *testing.T) {
	for _, version := range []bool{false, true} {
		p := newPeer()
		var got []Message
		var mu sync.Mutex
		var c *Conn
		c = NewConn(Options{Write: p.write, Version: version,
			OnRequest: func(m Message) {
				mu.Lock()
				got = append(got, m)
				mu.Unlock()
				if m.Method == "ask" {
					_ = c.Reply(m.ID, map[string]any{"answer": "yes"})
				} else {
					_ = c.ReplyError(m.ID, CodeMethodNotFound, "unknown "+m.Method)
				}
			},
			OnNotification: func(m Message) {
				mu.Lock()
				got = append(got, m)
				mu.Unlock()
			}})
		type res struct {
			r   json.RawMessage
			err error
		}
		first, second := make(chan res, 1), make(chan res, 1)
		go func() { r, err := c.Call(context.Background(), "one", map[string]int{"n": 1}); first <- res{r, err} }()
		m1 := p.next(t)
		go func() { r, err := c.Call(context.Background(), "two", nil); second <- res{r, err} }()
		m2 := p.next(t)
		if _, has := m1["jsonrpc"]; has != version {
			t.Errorf("version %v: %v", version, m1)
		}
		if m1["method"] != "one" || m1["id"] != float64(1) || m2["id"] != float64(2) {
			t.Fatalf("requests %v %v", m1, m2)
		}
		if _, has := m2["params"]; has {
			t.Errorf("nil params were sent: %v", m2)
		}
		// The peer's own request 1, then its id 0, then our answers in reverse.
		c.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"ask","params":{}}`))
		if a := p.next(t); a["id"] != float64(1) || a["result"].(map[string]any)["answer"] != "yes" {
			t.Fatalf("answer %v", a)
		}
		c.Receive([]byte(`{"id":0,"method":"craft/drainMidTurnQueue"}`))
		if a := p.next(t); a["id"] != float64(0) || a["error"].(map[string]any)["code"] != float64(CodeMethodNotFound) {
			t.Fatalf("answer to id 0 %v", a)
		}
		c.Receive([]byte(`{"id":2,"result":"second"}`))
		c.Receive([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"k":1}}`))
		c.Receive([]byte(`{"id":1,"error":{"code":-32000,"message":"first failed"}}`))
		c.Receive([]byte(`{"id":99,"result":{}}`)) // to no request: skipped
		if r := <-second; r.err != nil || string(r.r) != `"second"` {
			t.Fatalf("second call %s %v", r.r, r.err)
		}
		var rpcErr *Error
		if r := <-first; !errors.As(r.err, &rpcErr) || rpcErr.Code != -32000 {
			t.Fatalf("first call %s %v", r.r, r.err)
		}
		mu.Lock()
		if len(got) != 3 || got[0].Method != "ask" || got[1].ID != Int(0) || got[2].Kind != Notification {
			t.Fatalf("handed over %+v", got)
		}
		mu.Unlock()
		if u := c.Unanswered(); len(u) != 0 {
			t.Fatalf("unanswered %+v", u)
		}
	}
}

// TestConnEveryRequestAnswered: without a handler every request is
// answered -32601; a request too long to read is answered from its head;
// a request kept for later stays listed until answered.
func TestConnEveryRequestAnswered(t *testing.T) {
	p := newPeer()
	c := NewConn(Options{Write: p.write})
	c.Receive([]byte(`{"id":"x","method":"fs/write_text_file","params":{}}`))
	if a := p.next(t); a["id"] != "x" || a["error"].(map[string]any)["code"] != float64(CodeMethodNotFound) {
		t.Fatalf("answer %v", a)
	}
	c.ReceiveTooLong([]byte(`{"id":4,"method":"session/request_permission","params":{"x":"` + strings.Repeat("y", 100)))
	if a := p.next(t); a["id"] != float64(4) || a["error"].(map[string]any)["code"] != float64(CodeInvalidRequest) {
		t.Fatalf("answer to the long request %v", a)
	}

	var kept []Message
	c = NewConn(Options{Write: p.write, OnRequest: func(m Message) { kept = append(kept, m) }})
	c.Receive([]byte(`{"id":5,"method":"later","params":{}}`))
	c.Receive([]byte(`{"id":6,"method":"later","params":{}}`))
	if u := c.Unanswered(); len(u) != 2 || u[0].ID != Int(5) {
		t.Fatalf("unanswered %+v", u)
	}
	_ = c.Reply(Int(6), nil)
	if a := p.next(t); string(mustJSON(a["result"])) != "null" || a["id"] != float64(6) {
		t.Fatalf("a nil result %v", a)
	}
	if u := c.Unanswered(); len(u) != 1 || u[0].ID != Int(5) {
		t.Fatalf("unanswered after one reply %+v", u)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestConnClose: a call waiting when the peer goes returns Close's error;
// a response that came just before still wins; later calls fail at once.
func TestConnClose(t *testing.T) {
	p := newPeer()
	c := NewConn(Options{Write: p.write})
	gone := errors.New("the agent exited (exit status 3)")
	errs := make(chan error, 1)
	go func() { _, err := c.Call(context.Background(), "slow", nil); errs <- err }()
	p.next(t)
	c.Close(gone)
	if err := <-errs; !errors.Is(err, gone) {
		t.Fatalf("call after close: %v", err)
	}
	if _, err := c.Call(context.Background(), "later", nil); !errors.Is(err, gone) {
		t.Fatalf("a later call: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c2 := NewConn(Options{Write: p.write})
	go func() { _, err := c2.Call(ctx, "x", nil); errs <- err }()
	p.next(t)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"id":1,"result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"m","params":[1]}`))
	f.Add([]byte(`{"id":null,"error":{"code":1,"message":"x"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := Decode(line)
		RequestInHead(line)
		if err == nil && m.Kind == 0 {
			t.Fatal("decoded without a kind")
		}
	})
}

// TestQueue: closed it refuses, open it keeps order and signals, closing
// hands back what is left.
func TestQueue(t *testing.T) {
	q := NewQueue()
	if q.Push(Message{Method: "early"}) {
		t.Fatal("a closed queue took a message")
	}
	q.SetOpen(true)
	for _, m := range []string{"a", "b"} {
		if !q.Push(Message{Method: m}) {
			t.Fatalf("an open queue refused %s", m)
		}
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("no signal after a push")
	}
	if got := q.Take(); len(got) != 2 || got[0].Method != "a" || got[1].Method != "b" {
		t.Fatalf("took %+v", got)
	}
	q.Push(Message{Method: "c"})
	if left := q.SetOpen(false); len(left) != 1 || left[0].Method != "c" {
		t.Fatalf("left %+v", left)
	}
	if q.Push(Message{Method: "late"}) || len(q.Take()) != 0 {
		t.Fatal("the closed queue took a message")
	}
}

// TestConnZeroBased: a peer that numbers its requests from 0, as the ACP
// agents do, sends id 0 first.
func TestConnZeroBased(t *testing.T) {
	p := newPeer()
	c := NewConn(Options{Write: p.write, ZeroBased: true})
	if _, _, err := c.Go("first", nil); err != nil {
		t.Fatal(err)
	}
	if m := p.next(t); m["id"] != float64(0) {
		t.Fatalf("first request %v, want id 0", m)
	}
	c.Receive([]byte(`{"id":0,"result":{}}`))
	if _, _, err := c.Go("second", nil); err != nil {
		t.Fatal(err)
	}
	if m := p.next(t); m["id"] != float64(1) {
		t.Fatalf("second request %v, want id 1", m)
	}
}

// TestQueueBounded: a queue takes messages up to its bound and no more,
// whatever the peer sends; the one that does not fit fills it, and every
// later one is refused too (a reader answers a refused request itself),
// Full says so and Ready wakes the turn; an empty queue takes any one
// message; opening it again clears it.
func TestQueueBounded(t *testing.T) {
	const max = 64 << 10
	q := NewQueue()
	q.SetMax(max)
	q.SetOpen(true)
	msg := Message{Kind: Notification, Method: "update", Raw: make([]byte, 100), Params: make([]byte, 80)}
	took := 0
	for i := 0; i < 100_000 && q.Push(msg); i++ {
		took++
	}
	if want := max / queuedSize(msg); took != want {
		t.Fatalf("took %d messages of %d bytes under a bound of %d, want %d", took, queuedSize(msg), max, want)
	}
	var full *QueueFullError
	if err := q.Full(); !errors.As(err, &full) || full.Max != max || err.Error() != "more than 64 KiB of messages waited to be handled" {
		t.Fatalf("Full = %v", q.Full())
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("no signal once full")
	}
	if got := q.Take(); len(got) != took {
		t.Fatalf("took back %d, want %d", len(got), took)
	}
	if q.Push(msg) {
		t.Fatal("a full queue took a message once emptied: what came between is lost, so nothing more may be taken")
	}
	q.SetOpen(true)
	if q.Full() != nil {
		t.Fatalf("Full after opening again: %v", q.Full())
	}
	big := Message{Kind: Notification, Raw: make([]byte, 2*max)}
	if !q.Push(big) {
		t.Fatal("an empty queue refused one message larger than its bound")
	}
	if q.Push(msg) || q.Full() == nil {
		t.Fatal("a queue past its bound took another message")
	}
}

// TestQueueDrain: what came before the turn's end is handled, the end is
// returned, what came after it goes elsewhere (in later drains too), and
// the answers to other requests are skipped.
func TestQueueDrain(t *testing.T) {
	q := NewQueue()
	q.SetOpen(true)
	for _, m := range []Message{{Kind: Notification, Method: "a"}, {Kind: Response, ID: Int(7)},
		{Kind: Request, ID: Int(1), Method: "b"}, {Kind: Response, ID: Int(3)}, {Kind: Notification, Method: "c"}} {
		q.Push(m)
	}
	var handled, after []string
	handle := func(m Message) { handled = append(handled, m.Method) }
	later := func(m Message) { after = append(after, m.Method) }
	end := q.Drain(Int(3), false, handle, later)
	if end == nil || end.ID != Int(3) || !slices.Equal(handled, []string{"a", "b"}) || !slices.Equal(after, []string{"c"}) {
		t.Fatalf("end %v, handled %q, after %q", end, handled, after)
	}
	q.Push(Message{Kind: Request, ID: Int(2), Method: "d"})
	if end := q.Drain(Int(3), true, handle, later); end != nil || !slices.Equal(after, []string{"c", "d"}) {
		t.Fatalf("a drain after the end: end %v, after %q", end, after)
	}
}
