package run

import (
	"github.com/blobhub/bhw-run/agent"
)

// interruptedOutput is the output of the result bhw-run posts for a call
// whose turn was cut short before the agent reported it.
const interruptedOutput = "interrupted: the turn was cut short before this call's result arrived; the call may or may not have run"

// closeOpenCalls posts a result for every tool call the journal holds
// without one, so no call on the thread is left hanging. A tool runs
// between its tool_call and its tool_result, often for minutes: a run
// killed then (kill -9, the machine going down), an agent that crashes, or
// a turn stopped at a signal, a timeout or a limit never relays that
// result, and the resumed session does not replay the call. It is called
// only when no agent of this thread runs: after a turn that did not end
// normally, and before a run acts on what an earlier run left. The call
// the open prompt waits on gets the parked result it would have had; every
// other one an error result marked interrupted. tally, when a turn is
// ending, counts them with its calls.
func (a *activation) closeOpenCalls(tally *toolTally) {
	a.rec.mu.Lock()
	calls := append([]unresultedCall(nil), a.rec.j.calls...)
	p := a.rec.t.Prompt
	a.rec.mu.Unlock()
	for _, c := range calls {
		it := interruptedResult(c)
		if p != nil && p.Call.InvocationID == c.InvocationID {
			it = agent.ParkedResultItem(c.InvocationID)
			ref := map[string]any{"emission_id": p.EmissionID}
			if p.ItemID != "" {
				ref["item_id"] = p.ItemID
			}
			it.Meta["pending_prompt"] = ref
		}
		a.logf("closing tool call %s (%s): its turn ended before its result", c.InvocationID, c.Name)
		tally.emitted(it)
		a.emit(it)
	}
}

// interruptedResult is the tool_result of call c, cut short: an error,
// marked interrupted (bhw-run's own metadata).
func interruptedResult(c unresultedCall) agent.Item {
	it := agent.ToolResultItem(c.InvocationID, interruptedOutput, true)
	name := c.Name
	if name == "" {
		name = "the call"
	}
	it.Brief = "✗ " + name + " interrupted: no result (the turn was cut short while it ran)"
	it.Meta["interrupted"] = true
	return it
}
