package run

import (
	"slices"
	"time"

	"github.com/blobhub/bhw-run/envelope"
)

// Row is the row of the decision table (docs/run.md) that decides a run.
type Row int

const (
	RowNoInstance Row = iota // wire has no instance or an unknown state: nothing
	RowStop                  // wire completed/failed, local active: stop
	RowFinal                 // wire completed/failed, local other: nothing
	RowActivate              // wire pending: checklist, activate
	RowNotHere               // wire active, no local record: not ours
	RowParked                // wire active, parked on a person
	RowRecover               // wire active, a turn running or interrupted
	RowFresh                 // wire active, no agent session yet
	RowTurn                  // wire active, local active
	RowLocalDone             // wire active, local completed/failed: nothing
)

var rowNames = [...]string{"no_instance", "stop", "final", "activate", "not_here", "parked", "recover", "fresh", "turn", "local_done"}

func (r Row) String() string { return rowNames[r] }

// Facts are what the decision is computed from: the envelope, thread.yaml,
// the journal and the items read. ls --runnable feeds it the same facts.
type Facts struct {
	WireState   string // instance.state; "" when there is none
	HasInstance bool
	Local       *envelope.Thread // nil when there is no thread.yaml
	Unfinished  bool             // journaled emissions not confirmed (items and artifact upload intents), local failed not yet on the wire
	Inbound     int              // person items not yet delivered (pending_inbound + read now)
	Answered    bool             // a person item after the open prompt
	Now         time.Time        // ledger.limited_until is compared with it
	// Budget is the thread's budget (agent.budget under the machine's
	// ceiling), compared with the ledger's total.
	Budget envelope.Budget
}

// Decision is the table's answer.
type Decision struct {
	Unfinished bool // the first row: finish unfinished work first
	Row        Row
	Acts       bool   // the run has something to do (and needs identity, worker object)
	Spawns     bool   // the run would start the agent (needs a slot)
	Outcome    string // the outcome when the row does nothing more
	// Held says why a run that would start the agent does not: HeldLimit
	// (a provider's limit has not reset), HeldBudget; "" none. A held run
	// writes nothing (Acts only for unfinished work).
	Held string
}

// Decide is the decision table of docs/run.md, one pure function. The first
// row (unfinished work) runs before whichever row matches next.
func Decide(f Facts) Decision {
	d := Decision{Unfinished: f.Unfinished, Acts: f.Unfinished}
	local := ""
	if f.Local != nil {
		local = f.Local.Agent.State
	}
	switch f.WireState {
	case envelope.StatePending, envelope.StateActive, envelope.StateCompleted, envelope.StateFailed:
	default:
		d.Row, d.Outcome = RowNoInstance, OutcomeIdle
		return d
	}
	if !f.HasInstance {
		d.Row, d.Outcome = RowNoInstance, OutcomeIdle
		return d
	}
	switch f.WireState {
	case envelope.StateCompleted, envelope.StateFailed:
		if local == envelope.StateActive {
			d.Row, d.Acts, d.Outcome = RowStop, true, OutcomeStopped
			return d
		}
		d.Row, d.Outcome = RowFinal, OutcomeIdle
		return d
	case envelope.StatePending:
		d.Row, d.Acts = RowActivate, true
		d.Spawns = f.Inbound > 0 || (f.Local != nil && f.Local.Turn.State != "" && f.Local.Turn.State != envelope.TurnStateIdle && len(f.Local.Turn.InboundIDs) > 0)
		d.Outcome = OutcomeIdle
		return d
	}
	// wire active
	switch {
	case local == "" || local == envelope.StatePending:
		d.Row, d.Outcome = RowNotHere, OutcomeNotHere
	case local != envelope.StateActive:
		d.Row, d.Outcome = RowLocalDone, OutcomeIdle
	case f.Local.Prompt != nil:
		d.Row, d.Outcome = RowParked, OutcomeParked
		if f.Answered {
			d.Acts, d.Spawns = true, true
		}
	case f.Local.Turn.State == envelope.TurnStateRunning || f.Local.Turn.State == envelope.TurnStateInterrupted:
		d.Row, d.Acts, d.Spawns = RowRecover, true, true
	case f.Local.Agent.AgentSessionID == "":
		d.Row, d.Outcome = RowFresh, OutcomeIdle
		if f.Inbound > 0 {
			d.Acts, d.Spawns = true, true
		}
	default:
		d.Row, d.Outcome = RowTurn, OutcomeIdle
		if f.Inbound > 0 {
			d.Acts, d.Spawns = true, true
		}
	}
	if d.Spawns {
		if until := limitedUntil(f.Local); !until.IsZero() && f.Now.Before(until) {
			d.Spawns, d.Acts, d.Held = false, f.Unfinished, HeldLimit
		} else if spent := spentCaps(f.Budget, f.Local); len(spent) > 0 {
			// Parked until a person raises the budget; the run that finds
			// it spent first tells the thread (a write), the later ones
			// write nothing.
			told := f.Local.Ledger != nil && slices.Equal(spent, f.Local.Ledger.BudgetSpent)
			d.Spawns, d.Acts, d.Held, d.Outcome = false, f.Unfinished || !told, HeldBudget, OutcomeParked
		}
	}
	return d
}
