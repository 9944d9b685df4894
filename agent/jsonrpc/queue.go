package jsonrpc

import "sync"

// Queue hands the peer's requests and notifications from the goroutine
// that reads them to the one running a turn: unbounded, so the reader
// never waits on the gate (and responses, which the reader also delivers,
// keep flowing). It is open while a turn runs; Push refuses a message
// while it is closed, so the reader can answer a request itself.
type Queue struct {
	mu    sync.Mutex
	open  bool
	items []Message
	ready chan struct{}
}

// NewQueue is a closed queue.
func NewQueue() *Queue { return &Queue{ready: make(chan struct{}, 1)} }

// Push queues m; false when the queue is closed.
func (q *Queue) Push(m Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open {
		return false
	}
	q.items = append(q.items, m)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// Ready gets a value when messages may be waiting; Take them.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Take returns the queued messages, oldest first, and empties the queue.
func (q *Queue) Take() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

// SetOpen opens or closes the queue and returns what was still queued.
func (q *Queue) SetOpen(open bool) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open = open
	out := q.items
	q.items = nil
	return out
}
