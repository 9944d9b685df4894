package run

import (
	"fmt"
	"strings"
	"sync"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// toolTally follows a turn's tool calls, so its turn_end and the run's
// summary say what the agent tried and what came of it, and a turn whose
// every call was refused does not pass for a completed one (NO_PROGRESS).
// A call is known by its invocation id, from its tool_call item or from
// the gate's decision, whichever comes first (an agent may ask before it
// announces the call).
type toolTally struct {
	mu      sync.Mutex
	order   []string          // invocation ids, as first seen
	state   map[string]string // id → allowed | denied | parked ("" seen only)
	failed  map[string]bool   // ran, and its result is an error
	denials []string          // what was refused and by which rule, in order
	parked  bool              // the gate parked a call: later refusals are the park's
	person  int               // calls a person refused, delivered with this turn
}

const (
	callAllowed = "allowed"
	callDenied  = "denied"
	callParked  = "parked"
)

func (t *toolTally) see(id string) {
	if t.state == nil {
		t.state, t.failed = map[string]string{}, map[string]bool{}
	}
	if _, ok := t.state[id]; !ok {
		t.order = append(t.order, id)
		t.state[id] = ""
	}
}

// emitted notes a tool_call or tool_result item.
func (t *toolTally) emitted(it agent.Item) {
	if t == nil { // a handler outside a turn (tests)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tool, ok := it.Meta["tool"].(map[string]any)
	if !ok {
		return
	}
	id := toolID(it)
	switch it.Type() {
	case agent.ItemToolCall:
		t.see(id)
	case agent.ItemToolResult:
		if _, parked := agent.IsParkedResult(it); parked {
			return
		}
		t.see(id)
		isErr, _ := tool["is_error"].(bool)
		// A refused call's result is the refusal, and the calls an agent
		// drops once one of them is parked were never run.
		if isErr && t.state[id] != callDenied && t.state[id] != callParked && !(t.parked && t.state[id] == "") {
			t.failed[id] = true
		}
	}
}

// decided notes the gate's verdict on a call; d is the gate's decision
// (nil when none was asked: a question, autonomous, a call refused because
// another waits).
func (t *toolTally) decided(c policy.Call, v policy.Verdict, d *policy.Decision) {
	if t == nil { // a handler outside a turn (tests)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.see(c.InvocationID)
	switch v.Action {
	case policy.Allow:
		t.state[c.InvocationID] = callAllowed
	case policy.Park:
		t.state[c.InvocationID] = callParked
		t.parked = true
	default:
		t.state[c.InvocationID] = callDenied
		why := v.Message
		if d != nil {
			why = d.Reason
		}
		t.denials = append(t.denials, fmt.Sprintf("%s — %s", c.Brief(), why))
	}
}

// counts are the turn's ToolCounts.
func (t *toolTally) counts() agent.ToolCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := agent.ToolCounts{Calls: len(t.order), DeniedByPerson: t.person}
	for _, id := range t.order {
		switch t.state[id] {
		case callDenied:
			c.DeniedByRule++
		case callParked:
		default:
			c.Allowed++
			if t.failed[id] {
				c.Failed++
			}
		}
	}
	return c
}

// noProgress reports a turn that made calls and had every one refused by
// a rule, and says which and why.
func (t *toolTally) noProgress() (string, bool) {
	c := t.counts()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.Calls == 0 || c.DeniedByRule != c.Calls {
		return "", false
	}
	return fmt.Sprintf("no progress: every tool call of this turn was refused (%d): %s; change the rule, or the task, and post again",
		c.Calls, strings.Join(t.denials, "; ")), true
}
