package agenttest

import (
	"context"
	"sync"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// Recorder is an agent.Handler for tests: it keeps every item and call, and
// answers the gate with Gate, else from Answers by tool name ("*" for any),
// else Park (the call waits for a person, and never runs).
type Recorder struct {
	Gate    func(policy.Call) policy.Verdict
	Answers map[string]policy.Verdict
	// OnItem, when set, sees each item after it is recorded.
	OnItem func(agent.Item)
	// Decided, when set, gets each call as it is decided.
	Decided chan policy.Call

	// OnProgress, when set, sees each Progress report.
	OnProgress func(agent.Progress)

	mu       sync.Mutex
	items    []agent.Item
	calls    []policy.Call
	progress []agent.Progress
}

// Progress records a report of the running turn's use.
func (r *Recorder) Progress(p agent.Progress) { keep(&r.mu, &r.progress, &r.OnProgress, p) }

// Reports are the Progress reports so far.
func (r *Recorder) Reports() []agent.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agent.Progress(nil), r.progress...)
}

// Emit records an item.
func (r *Recorder) Emit(it agent.Item) { keep(&r.mu, &r.items, &r.OnItem, it) }

// keep appends v to list under mu, then shows it to the hook set then.
func keep[T any](mu *sync.Mutex, list *[]T, hook *func(T), v T) {
	mu.Lock()
	*list = append(*list, v)
	f := *hook
	mu.Unlock()
	if f != nil {
		f(v)
	}
}

// CancelAt runs a turn of message whose context is cancelled at the first
// item of type typ, as a run's deadline or a signal ends a turn, and
// returns what Turn returns.
func CancelAt(sess agent.Session, message, typ string) (agent.TurnResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &Recorder{OnItem: func(it agent.Item) {
		if it.Type() == typ {
			cancel()
		}
	}}
	return sess.Turn(ctx, message, h)
}

// Decide records a call and answers it.
func (r *Recorder) Decide(c policy.Call) policy.Verdict {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.Decided != nil {
		r.Decided <- c
	}
	if r.Gate != nil {
		return r.Gate(c)
	}
	if v, ok := r.Answers[c.Tool]; ok {
		return v
	}
	if v, ok := r.Answers["*"]; ok {
		return v
	}
	return policy.Verdict{Action: policy.Park}
}

// Items are the items emitted so far.
func (r *Recorder) Items() []agent.Item {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]agent.Item(nil), r.items...)
}

// Calls are the calls decided so far.
func (r *Recorder) Calls() []policy.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]policy.Call(nil), r.calls...)
}

// Types are the items' types, in order.
func (r *Recorder) Types() []string {
	var out []string
	for _, it := range r.Items() {
		out = append(out, it.Type())
	}
	return out
}

// OfType are the items of type typ, in order.
func (r *Recorder) OfType(typ string) []agent.Item {
	var out []agent.Item
	for _, it := range r.Items() {
		if it.Type() == typ {
			out = append(out, it)
		}
	}
	return out
}
