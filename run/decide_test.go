package run

import (
	"testing"
	"time"

	"github.com/blobhub/bhw-run/envelope"
)

// local builds a thread.yaml for the decision table: agent state, then
// options that set the session, the turn and the prompt.
func local(state string, opts ...func(*envelope.Thread)) *envelope.Thread {
	t := &envelope.Thread{Alias: "a", Workspace: envelope.Workspace{AgentType: testAgent, WorkFolder: "/w"}}
	t.Agent.State = state
	t.Agent.AgentSessionID = "sess-1"
	t.Turn.State = envelope.TurnStateIdle
	for _, o := range opts {
		o(t)
	}
	return t
}

func noSession(t *envelope.Thread) { t.Agent.AgentSessionID = "" }
func parked(t *envelope.Thread) {
	t.Prompt = &envelope.Prompt{Kind: "approval", ItemID: "itm_p", CreatedAt: "2026-01-01T00:00:00.000000+00:00"}
}
func turnState(st string, ids ...string) func(*envelope.Thread) {
	return func(t *envelope.Thread) { t.Turn.State, t.Turn.InboundIDs = st, ids }
}

// TestDecide walks every row of the decision table (wire × local × prompt × turn ×
// inbound × unfinished), including the first row running before the next.
func TestDecide(t *testing.T) {
	const (
		pending, active, completed, failed = envelope.StatePending, envelope.StateActive, envelope.StateCompleted, envelope.StateFailed
		running, interrupted               = envelope.TurnStateRunning, envelope.TurnStateInterrupted
	)
	type want struct {
		row     Row
		acts    bool
		spawns  bool
		outcome string
	}
	tests := []struct {
		name string
		f    Facts
		want want
	}{
		// no instance, or an unknown state: nothing.
		{"no instance, no local", Facts{}, want{RowNoInstance, false, false, OutcomeIdle}},
		{"no instance, local active with inbound", Facts{Local: local(active), Inbound: 3}, want{RowNoInstance, false, false, OutcomeIdle}},
		{"unknown state", Facts{WireState: "paused", HasInstance: true, Local: local(active), Inbound: 1}, want{RowNoInstance, false, false, OutcomeIdle}},
		{"instance.state not a string", Facts{WireState: "", HasInstance: true}, want{RowNoInstance, false, false, OutcomeIdle}},
		{"a state without an instance block", Facts{WireState: active, HasInstance: false, Local: local(active), Inbound: 1}, want{RowNoInstance, false, false, OutcomeIdle}},
		{"no instance, unfinished work still finished", Facts{Local: local(active), Unfinished: true}, want{RowNoInstance, true, false, OutcomeIdle}},

		// completed/failed on the wire.
		{"completed, local active: stop", Facts{WireState: completed, HasInstance: true, Local: local(active)}, want{RowStop, true, false, OutcomeStopped}},
		{"failed, local active: stop", Facts{WireState: failed, HasInstance: true, Local: local(active)}, want{RowStop, true, false, OutcomeStopped}},
		{"completed, local active parked: stop", Facts{WireState: completed, HasInstance: true, Local: local(active, parked), Answered: true}, want{RowStop, true, false, OutcomeStopped}},
		{"failed, local active turn running: stop, no spawn", Facts{WireState: failed, HasInstance: true, Local: local(active, turnState(running, "i1")), Inbound: 2}, want{RowStop, true, false, OutcomeStopped}},
		{"completed, no local", Facts{WireState: completed, HasInstance: true}, want{RowFinal, false, false, OutcomeIdle}},
		{"completed, local completed", Facts{WireState: completed, HasInstance: true, Local: local(completed)}, want{RowFinal, false, false, OutcomeIdle}},
		{"failed, local failed with inbound", Facts{WireState: failed, HasInstance: true, Local: local(failed), Inbound: 4}, want{RowFinal, false, false, OutcomeIdle}},
		{"failed, local failed, unfinished", Facts{WireState: failed, HasInstance: true, Local: local(failed), Unfinished: true}, want{RowFinal, true, false, OutcomeIdle}},
		{"completed, local pending", Facts{WireState: completed, HasInstance: true, Local: local(pending)}, want{RowFinal, false, false, OutcomeIdle}},

		// pending: checklist, activate; a spawn only with something to say.
		{"pending, no local, no inbound", Facts{WireState: pending, HasInstance: true}, want{RowActivate, true, false, OutcomeIdle}},
		{"pending, no local, inbound", Facts{WireState: pending, HasInstance: true, Inbound: 1}, want{RowActivate, true, true, OutcomeIdle}},
		{"pending, local failed, crashed turn's inbound again", Facts{WireState: pending, HasInstance: true, Local: local(failed, turnState(running, "i1"))}, want{RowActivate, true, true, OutcomeIdle}},
		{"pending, local active, interrupted turn's inbound", Facts{WireState: pending, HasInstance: true, Local: local(active, turnState(interrupted, "i1", "i2"))}, want{RowActivate, true, true, OutcomeIdle}},
		{"pending, interrupted turn without inbound", Facts{WireState: pending, HasInstance: true, Local: local(active, turnState(interrupted))}, want{RowActivate, true, false, OutcomeIdle}},
		{"pending, local active idle, parked", Facts{WireState: pending, HasInstance: true, Local: local(active, parked), Answered: true}, want{RowActivate, true, false, OutcomeIdle}},
		{"pending, unfinished and inbound", Facts{WireState: pending, HasInstance: true, Local: local(failed), Unfinished: true, Inbound: 2}, want{RowActivate, true, true, OutcomeIdle}},

		// active on the wire.
		{"active, no thread.yaml: not here", Facts{WireState: active, HasInstance: true, Inbound: 5}, want{RowNotHere, false, false, OutcomeNotHere}},
		{"active, local pending: not here", Facts{WireState: active, HasInstance: true, Local: local(pending)}, want{RowNotHere, false, false, OutcomeNotHere}},
		{"active, local empty state: not here", Facts{WireState: active, HasInstance: true, Local: local("")}, want{RowNotHere, false, false, OutcomeNotHere}},
		{"active, parked, no answer", Facts{WireState: active, HasInstance: true, Local: local(active, parked), Inbound: 1}, want{RowParked, false, false, OutcomeParked}},
		{"active, parked, answered", Facts{WireState: active, HasInstance: true, Local: local(active, parked), Inbound: 1, Answered: true}, want{RowParked, true, true, OutcomeParked}},
		{"active, prompt beats a running turn", Facts{WireState: active, HasInstance: true, Local: local(active, parked, turnState(running, "i1"))}, want{RowParked, false, false, OutcomeParked}},
		{"active, prompt beats a running turn, answered", Facts{WireState: active, HasInstance: true, Local: local(active, parked, turnState(running, "i1")), Answered: true, Inbound: 1}, want{RowParked, true, true, OutcomeParked}},
		{"active, turn running", Facts{WireState: active, HasInstance: true, Local: local(active, turnState(running, "i1"))}, want{RowRecover, true, true, ""}},
		{"active, turn interrupted, new inbound", Facts{WireState: active, HasInstance: true, Local: local(active, turnState(interrupted, "i1")), Inbound: 2}, want{RowRecover, true, true, ""}},
		{"active, turn running, no session yet", Facts{WireState: active, HasInstance: true, Local: local(active, noSession, turnState(running, "i1"))}, want{RowRecover, true, true, ""}},
		{"active, no session, no inbound", Facts{WireState: active, HasInstance: true, Local: local(active, noSession)}, want{RowFresh, false, false, OutcomeIdle}},
		{"active, no session, inbound", Facts{WireState: active, HasInstance: true, Local: local(active, noSession), Inbound: 2}, want{RowFresh, true, true, OutcomeIdle}},
		{"active, session, no inbound", Facts{WireState: active, HasInstance: true, Local: local(active)}, want{RowTurn, false, false, OutcomeIdle}},
		{"active, session, inbound", Facts{WireState: active, HasInstance: true, Local: local(active), Inbound: 1}, want{RowTurn, true, true, OutcomeIdle}},
		{"active, session, unfinished, no inbound", Facts{WireState: active, HasInstance: true, Local: local(active), Unfinished: true}, want{RowTurn, true, false, OutcomeIdle}},
		{"active, local completed", Facts{WireState: active, HasInstance: true, Local: local(completed), Inbound: 3}, want{RowLocalDone, false, false, OutcomeIdle}},
		{"active, local failed", Facts{WireState: active, HasInstance: true, Local: local(failed), Inbound: 1}, want{RowLocalDone, false, false, OutcomeIdle}},
		{"active, local failed not on the wire: unfinished", Facts{WireState: active, HasInstance: true, Local: local(failed), Unfinished: true}, want{RowLocalDone, true, false, OutcomeIdle}},
	}
	if len(tests) < 25 {
		t.Fatalf("only %d rows", len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.f)
			got := want{d.Row, d.Acts, d.Spawns, d.Outcome}
			if got != tc.want {
				t.Fatalf("Decide = row %s acts %v spawns %v outcome %q, want row %s acts %v spawns %v outcome %q",
					got.row, got.acts, got.spawns, got.outcome, tc.want.row, tc.want.acts, tc.want.spawns, tc.want.outcome)
			}
			if d.Unfinished != tc.f.Unfinished {
				t.Fatalf("Unfinished = %v, want %v (the first row runs before the next)", d.Unfinished, tc.f.Unfinished)
			}
			if d.Spawns && !d.Acts {
				t.Fatal("a decision that spawns must act")
			}
		})
	}
}

// TestDecidePure checks Decide does not change its input (ls --runnable
// feeds it the same facts a run uses).
func TestDecidePure(t *testing.T) {
	l := local(envelope.StateActive, parked, turnState(envelope.TurnStateRunning, "i1"))
	before := *l
	before.Turn.InboundIDs = append([]string(nil), l.Turn.InboundIDs...)
	for range 3 {
		Decide(Facts{WireState: envelope.StateActive, HasInstance: true, Local: l, Inbound: 1, Answered: true})
	}
	if l.Prompt == nil || l.Turn.State != envelope.TurnStateRunning || len(l.Turn.InboundIDs) != 1 || l.Agent.State != before.Agent.State {
		t.Fatal("Decide changed the thread it was given")
	}
}

// TestDecideHeldByLimit: before ledger.limited_until a run that would
// start the agent holds (writing nothing but unfinished work); at and
// after it, the row runs as before.
func TestDecideHeldByLimit(t *testing.T) {
	reset := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	limited := func(th *envelope.Thread) {
		th.Ledger = &envelope.Ledger{LimitedUntil: reset.Format(time.RFC3339), Limit: "429"}
	}
	for _, c := range []struct {
		name       string
		f          Facts
		held, acts bool
	}{
		{"turn before", Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, limited), Inbound: 1, Now: reset.Add(-time.Second)}, true, false},
		{"unfinished before", Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, limited), Inbound: 1, Unfinished: true, Now: reset.Add(-time.Second)}, true, true},
		{"recover before", Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, limited, turnState(envelope.TurnStateInterrupted, "i1")), Now: reset.Add(-time.Hour)}, true, false},
		{"turn at the reset", Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, limited), Inbound: 1, Now: reset}, false, true},
		{"nothing to say", Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, limited), Now: reset.Add(-time.Hour)}, false, false},
	} {
		d := Decide(c.f)
		if (d.Held == HeldLimit) != c.held || d.Acts != c.acts || (c.held && d.Spawns) {
			t.Errorf("%s: %+v, want held %v acts %v", c.name, d, c.held, c.acts)
		}
	}
}

// TestDecideHeldByBudget: a spent budget holds a run that would start the
// agent; the first such run acts (it tells the thread), the later ones
// write nothing; a raised budget runs the turn.
func TestDecideHeldByBudget(t *testing.T) {
	spentTurns := func(told bool) func(*envelope.Thread) {
		return func(th *envelope.Thread) {
			th.Ledger = &envelope.Ledger{Total: envelope.Spend{AgentTurns: 2}}
			if told {
				th.Ledger.BudgetSpent = []string{"max_turns"}
			}
		}
	}
	facts := func(b envelope.Budget, told bool) Facts {
		return Facts{WireState: envelope.StateActive, HasInstance: true, Local: local(envelope.StateActive, spentTurns(told)), Inbound: 1, Budget: b}
	}
	for _, c := range []struct {
		name       string
		f          Facts
		held, acts bool
	}{
		{"spent, not told", facts(envelope.Budget{MaxTurns: 2}, false), true, true},
		{"spent, told", facts(envelope.Budget{MaxTurns: 2}, true), true, false},
		{"raised", facts(envelope.Budget{MaxTurns: 3}, true), false, true},
		{"no budget", facts(envelope.Budget{}, true), false, true},
	} {
		d := Decide(c.f)
		if (d.Held == HeldBudget) != c.held || d.Acts != c.acts || (c.held && (d.Spawns || d.Outcome != OutcomeParked)) {
			t.Errorf("%s: %+v, want held %v acts %v", c.name, d, c.held, c.acts)
		}
	}
}
