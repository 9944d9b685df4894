package run

import (
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

func toolItem(typ, id string, isErr bool) agent.Item {
	tool := map[string]any{"invocation_id": id}
	if typ == agent.ItemToolResult {
		tool["is_error"] = isErr
	}
	return agent.Item{Meta: map[string]any{"type": typ, "tool": tool}}
}

func TestToolTallyCounts(t *testing.T) {
	var tt toolTally
	call := func(id string) policy.Call {
		return policy.Call{InvocationID: id, Tool: "Bash", Effect: policy.EffectExec, Target: policy.Target{Command: "rm " + id}}
	}
	// a ran and failed, b was refused by a rule, c ran without asking.
	tt.emitted(toolItem(agent.ItemToolCall, "a", false))
	tt.decided(call("a"), policy.Verdict{Action: policy.Allow}, nil)
	tt.emitted(toolItem(agent.ItemToolResult, "a", true))
	tt.decided(call("b"), policy.Verdict{Action: policy.Deny}, &policy.Decision{Reason: "denied by worker rule 2"})
	tt.emitted(toolItem(agent.ItemToolCall, "b", false))
	tt.emitted(toolItem(agent.ItemToolResult, "b", true))
	tt.emitted(toolItem(agent.ItemToolCall, "c", false))
	tt.emitted(toolItem(agent.ItemToolResult, "c", false))
	want := agent.ToolCounts{Calls: 3, Allowed: 2, DeniedByRule: 1, Failed: 1}
	if got := tt.counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if _, none := tt.noProgress(); none {
		t.Error("a turn with calls that ran is not no progress")
	}
	if s := want.String(); s != "3 tool calls: 2 ran, 1 denied by rule, 1 failed" {
		t.Errorf("String %q", s)
	}
}

func TestToolTallyNoProgress(t *testing.T) {
	var tt toolTally
	for _, id := range []string{"a", "b"} {
		tt.decided(policy.Call{InvocationID: id, Tool: "Bash", Effect: policy.EffectExec, Target: policy.Target{Command: "rm -rf " + id}},
			policy.Verdict{Action: policy.Deny}, &policy.Decision{Reason: "denied by worker rule 1"})
		tt.emitted(toolItem(agent.ItemToolResult, id, true))
	}
	msg, none := tt.noProgress()
	if !none || !strings.Contains(msg, "denied by worker rule 1") || !strings.Contains(msg, "rm -rf b") {
		t.Fatalf("noProgress %v %q", none, msg)
	}
	if c := tt.counts(); c != (agent.ToolCounts{Calls: 2, DeniedByRule: 2}) {
		t.Errorf("counts %+v", c)
	}

	// A turn that parked on a call is waiting for a person, not stuck.
	var parked toolTally
	parked.decided(policy.Call{InvocationID: "a"}, policy.Verdict{Action: policy.Deny}, &policy.Decision{Reason: "r"})
	parked.decided(policy.Call{InvocationID: "b"}, policy.Verdict{Action: policy.Park}, nil)
	if _, none := parked.noProgress(); none {
		t.Error("a parked call is not no progress")
	}
}
