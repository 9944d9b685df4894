package run

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
)

// journalWrites runs one activation of alias in-process, as handOff and
// play left it, and returns the journal's last record after each journal
// write (the i-th is what a run killed at KillAt i+1 left last): the kill
// tests pick the step to kill at from it.
func (h *harness) journalWrites(alias string) []journalRecord {
	h.t.Helper()
	path := h.journalPath(alias)
	var recs []journalRecord
	testHookAfterJournal = func() {
		var rec journalRecord
		if b, err := os.ReadFile(path); err == nil {
			lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
			_ = json.Unmarshal(lines[len(lines)-1], &rec)
		}
		recs = append(recs, rec)
	}
	defer func() { testHookAfterJournal = nil }()
	h.run(alias)
	return recs
}

// killPoints are the journal writes (KillAt values) after which a tool
// call of the turn is on record without its result: its emission
// appended, and its posted record.
func killPoints(t *testing.T, recs []journalRecord, typ string) []int {
	t.Helper()
	var points []int
	id := ""
	for i, rec := range recs {
		switch {
		case rec.Emission != nil && rec.Emission.Item.Type() == typ && id == "":
			id = rec.Emission.ID
			points = append(points, i+1)
		case id != "" && rec.Posted == id && len(points) == 1:
			points = append(points, i+1)
		}
	}
	if len(points) != 2 {
		t.Fatalf("%s: kill points %v, want its emission and its posted record", typ, points)
	}
	return points
}

// toolResult is a tool_result item's metadata.
type toolResult struct {
	Type string `json:"type"`
	Tool struct {
		InvocationID string `json:"invocation_id"`
		IsError      bool   `json:"is_error"`
	} `json:"tool"`
	Interrupted bool `json:"interrupted"`
	Parked      bool `json:"parked"`
}

// wantCallsClosed fails unless every tool_call on the thread is followed
// by one tool_result of its invocation id (the test agent numbers its
// calls per process, so an id may come again after its result), and
// returns the results in order.
func (h *harness) wantCallsClosed(alias string) []toolResult {
	h.t.Helper()
	open := map[string]int{}
	var results []toolResult
	for _, it := range h.srv.Items(alias) {
		var m toolResult
		_ = json.Unmarshal(it.Metadata, &m)
		switch m.Type {
		case agent.ItemToolCall:
			open[m.Tool.InvocationID]++
		case agent.ItemToolResult:
			if open[m.Tool.InvocationID] == 0 {
				h.t.Fatalf("a tool_result of %s without its call before it; items %v", m.Tool.InvocationID, h.items(alias))
			}
			open[m.Tool.InvocationID]--
			results = append(results, m)
		}
	}
	for id, n := range open {
		if n > 0 {
			h.t.Fatalf("tool call %s has no tool_result; items %v", id, h.items(alias))
		}
	}
	return results
}

// TestKill9WhileToolRuns: bhw-run killed with SIGKILL while a tool call
// runs — right after its tool_call is journaled, and after it is posted —
// and a real agent's resumed session does not replay the call: the next
// run posts an interrupted result for it, before anything else of the
// resumed turn, exactly once; the thread goes on and its journal compacts.
func TestKill9WhileToolRuns(t *testing.T) {
	const alias = "killtool/t"
	script := agenttest.Turn(agenttest.Step{Text: "hello"},
		agenttest.Step{Tool: &agenttest.Tool{Effect: policy.EffectRead, Target: policy.Target{Paths: []string{"/etc/hostname"}}, Result: "host"}},
		agenttest.Step{Text: "bye"})
	clean := newHarness(t, true)
	clean.handOff(alias, "approval", "start")
	clean.play(script)
	for _, n := range killPoints(t, clean.journalWrites(alias), agent.ItemToolCall) {
		h := newHarness(t, true)
		h.handOff(alias, "approval", "start")
		h.play(script)
		if killed, exitCode := h.runKilled(alias, n); !killed {
			t.Fatalf("kill at %d: the run was not killed (exit %d)", n, exitCode)
		}
		h.play(agenttest.Turn(agenttest.Step{Text: "resumed"}))
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		h.noneTwice(alias)
		results := h.wantCallsClosed(alias)
		if len(results) != 1 || !results[0].Interrupted || !results[0].Tool.IsError {
			t.Fatalf("kill at %d: results %+v, want one, interrupted", n, results)
		}
		got := h.items(alias)
		if i := slices.Index(got, "tool_result"); i < 0 || i+1 >= len(got) || got[i+1] != "status" {
			t.Fatalf("kill at %d: items %v, want the interrupted result before the resumed turn's status", n, got)
		}
		want(t, h.run(alias), OutcomeIdle, exit.OK)
		if r := h.journalRecords(alias); r != 2 {
			t.Errorf("kill at %d: the journal holds %d records after the runs, want 2 (compacted)", n, r)
		}
	}
}

// TestKill9WhileParked: killed after the prompt of a parked call is
// journaled, and after it is posted, before the call's parked result: the
// call gets that parked result, not an interrupted one, once, whether the
// next run finishes the prompt's post or the answering run comes first.
func TestKill9WhileParked(t *testing.T) {
	const alias = "killparked/t"
	clean := newHarness(t, true)
	write := &agenttest.Tool{Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{filepath.Join(clean.work, "x.txt")}}, Result: "File created"}
	script := agenttest.Turn(agenttest.Step{Call: write})
	clean.handOff(alias, "approval", "write x")
	clean.play(script)
	for _, n := range killPoints(t, clean.journalWrites(alias), agent.ItemPendingPrompt) {
		h := newHarness(t, true)
		write.Target.Paths = []string{filepath.Join(h.work, "x.txt")}
		h.handOff(alias, "approval", "write x")
		h.play(script)
		if killed, exitCode := h.runKilled(alias, n); !killed {
			t.Fatalf("kill at %d: the run was not killed (exit %d)", n, exitCode)
		}
		h.run(alias)
		h.srv.PersonPost(alias, "yes")
		h.play(agenttest.Turn(agenttest.Step{Call: write}, agenttest.Step{Text: "written"}))
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		h.noneTwice(alias)
		results := h.wantCallsClosed(alias)
		if len(results) != 2 || !results[0].Parked || results[0].Interrupted || results[1].Parked {
			t.Fatalf("kill at %d: results %+v, want the parked one, then the approved call's", n, results)
		}
		if got := h.items(alias); count(got, "pending_prompt") != 1 || count(got, "pending_prompt_resolved") != 1 {
			t.Fatalf("kill at %d: items %v", n, got)
		}
	}
}

// TestToolCallOpenAtTimeout: a turn stopped at --max-duration while a
// call runs posts an interrupted result for it before the turn_end.
func TestToolCallOpenAtTimeout(t *testing.T) {
	h := newHarness(t, false)
	const alias = "opencall/t"
	h.handOff(alias, "approval", "build")
	h.play(agenttest.Turn(agenttest.Step{Tool: &agenttest.Tool{Effect: policy.EffectExec, Target: policy.Target{Command: "make"}, Running: true}}))
	h.tune = func(r *Runner) { r.MaxDuration = 300 * time.Millisecond }
	sum := h.run(alias)
	want(t, sum, OutcomeTurnFailed, exit.TurnFailed)
	wantCode(t, sum, exit.TurnFailed, exit.CodeTurnTimeout)
	results := h.wantCallsClosed(alias)
	if len(results) != 1 || !results[0].Interrupted {
		t.Fatalf("results %+v, want one, interrupted", results)
	}
	got := h.items(alias)
	if i := slices.Index(got, "tool_result"); i > slices.Index(got, "turn_end") {
		t.Fatalf("items %v: the result after the turn_end", got)
	}
}
