package jsonrpc

import (
	"fmt"
	"sync"
)

// DefaultMaxQueued bounds what a Queue holds, in bytes as queuedSize
// counts them: room for a few of the longest lines an adapter reads
// (agent/proc's 64 MiB, each held twice: the raw line and its params)
// beside a backlog of small ones, for a turn held up by a slow post.
const DefaultMaxQueued = 256 << 20

// messageOverhead is what one queued message costs beyond its bytes (the
// Message itself, the slices' headers), so a flood of tiny messages is
// bounded too.
const messageOverhead = 256

// queuedSize is what m holds while queued.
func queuedSize(m Message) int {
	return len(m.Raw) + len(m.Params) + len(m.Result) + messageOverhead
}

// Queue hands the peer's requests and notifications from the goroutine
// that reads them to the one running a turn. Push never waits, so the
// reader never waits on the gate (and responses, which the reader also
// delivers, keep flowing); it is bounded instead: a peer that sends
// faster than the turn handles what it sent fills it, and from then on
// every message is refused (Full says why) until the queue is opened
// again. It is open while a turn runs; Push refuses a message while it
// is closed or full, so the reader can answer a request itself.
type Queue struct {
	mu    sync.Mutex
	open  bool
	items []Message
	size  int // what items hold (queuedSize)
	max   int
	full  *QueueFullError
	ready chan struct{}
}

// QueueFullError is why a Queue refused a message: what it held was at
// its bound.
type QueueFullError struct {
	Max int // the bound, in bytes
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("more than %s of messages waited to be handled", sizeText(e.Max))
}

// sizeText is n bytes in the largest whole unit.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// NewQueue is a closed queue holding at most DefaultMaxQueued.
func NewQueue() *Queue { return &Queue{ready: make(chan struct{}, 1), max: DefaultMaxQueued} }

// SetMax sets the most the queue holds, in bytes as counted with each
// message's overhead (0 or less: DefaultMaxQueued).
func (q *Queue) SetMax(n int) {
	if n <= 0 {
		n = DefaultMaxQueued
	}
	q.mu.Lock()
	q.max = n
	q.mu.Unlock()
}

// Push queues m; false when the queue is closed or full. A message that
// would take the queue past its bound fills it (an empty queue takes any
// one message: the reader bounds a line already): that one and every later
// one are refused, and Ready is signalled so the turn sees Full.
func (q *Queue) Push(m Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.open || q.full != nil {
		return false
	}
	n := queuedSize(m)
	if len(q.items) > 0 && q.size+n > q.max {
		q.full = &QueueFullError{Max: q.max}
		q.signal()
		return false
	}
	q.items = append(q.items, m)
	q.size += n
	q.signal()
	return true
}

func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Full is a *QueueFullError once the queue refused a message for want of
// room, nil otherwise: the turn reading it has lost part of what the peer
// sent and must end. Opening or closing the queue clears it.
func (q *Queue) Full() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.full == nil {
		return nil
	}
	return q.full
}

// Ready gets a value when messages may be waiting; Take them.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Take returns the queued messages, oldest first, and empties the queue.
func (q *Queue) Take() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items, q.size = nil, 0
	return out
}

// SetOpen opens or closes the queue, empty and not full, and returns what
// was still queued.
func (q *Queue) SetOpen(open bool) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open = open
	out := q.items
	q.items, q.size, q.full = nil, 0, nil
	return out
}

// Drain takes what is queued for a turn that ends at the response to our
// request end, and hands it over in the order it came: each message before
// that response to handle, each after it to after (once ended is true,
// everything goes to after). A response to another request is skipped: its
// caller has it. The turn's end, when it was among them, is returned.
func (q *Queue) Drain(end ID, ended bool, handle, after func(Message)) (answer *Message) {
	for _, m := range q.Take() {
		switch {
		case ended:
			after(m)
		case m.Kind == Response && m.ID == end:
			answer, ended = &m, true
		case m.Kind == Response:
		default:
			handle(m)
		}
	}
	return answer
}
