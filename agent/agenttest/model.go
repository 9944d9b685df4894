package agenttest

import (
	"context"
	"fmt"
	"sync"
)

// The scripted fake model servers the real CLIs are tested against
// (claudetest's Messages API, codextest's Responses API, acptest's Gemini
// and chat-completions APIs) differ only in their wire format. What they
// keep alike is here, for them to embed: RequestLog, the requests answered
// and a wait for one, and ModelScript, the steps still to play and the one
// API key the server takes.

// RequestLog is the log of the requests a fake model server answered, in
// the order it took them. Safe for concurrent use; the zero value is ready.
type RequestLog[Req any] struct {
	mu      sync.Mutex
	reqs    []Req
	changed chan struct{} // closed and replaced when a request is logged
}

// Record logs the request made from its number n (1 for the first), and
// wakes WaitFor; it returns n.
func (l *RequestLog[Req]) Record(made func(n int) Req) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.reqs) + 1
	l.reqs = append(l.reqs, made(n))
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return n
}

// Requests are the requests logged so far, in order (a copy).
func (l *RequestLog[Req]) Requests() []Req {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Req(nil), l.reqs...)
}

// WaitFor blocks until a request (already logged or new) satisfies ok, and
// returns it; it fails when ctx ends first.
func (l *RequestLog[Req]) WaitFor(ctx context.Context, ok func(Req) bool) (Req, error) {
	seen := 0
	for {
		l.mu.Lock()
		reqs := l.reqs[seen:]
		seen = len(l.reqs)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		for _, r := range reqs {
			if ok(r) {
				return r, nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			var none Req
			return none, fmt.Errorf("no such model request after %d requests: %w", seen, ctx.Err())
		}
	}
}

// ModelScript is a RequestLog with a script of steps, each answering one
// request, and the one API key the server takes. Safe for concurrent use;
// the zero value is ready.
type ModelScript[Req, Step any] struct {
	RequestLog[Req]

	mu      sync.Mutex
	steps   []Step
	next    int
	key     string
	refused int
}

// Push appends steps to the script (e.g. for the next process of a test).
func (m *ModelScript[Req, Step]) Push(steps ...Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, steps...)
}

// Remaining is the number of steps not played yet.
func (m *ModelScript[Req, Step]) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.steps) - m.next
}

// Take logs req and takes the step that answers it; n is its number (1
// for the first request logged), ok is false when the script is played
// out.
func (m *ModelScript[Req, Step]) Take(req Req) (step Step, n int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n = m.Record(func(int) Req { return req })
	if m.next < len(m.steps) {
		step, ok = m.steps[m.next], true
		m.next++
	}
	return step, n, ok
}

// RequireKey makes the server take only key; "" takes any.
func (m *ModelScript[Req, Step]) RequireKey(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.key = key
}

// Refuse reports whether a request carrying the API key got is refused (a
// key is required and got is not it), and counts it if so.
func (m *ModelScript[Req, Step]) Refuse(got string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.key == "" || got == m.key {
		return false
	}
	m.refused++
	return true
}

// Refused is how many requests the server refused for their key.
func (m *ModelScript[Req, Step]) Refused() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}
