package run

import (
	"sync/atomic"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// TestStopBetweenReadAndWrite: a person's stop written after the run read
// the envelope it decided on, before it writes active, survives: the run
// reads the envelope again just before writing and leaves a changed state
// to the next run. (BlobHub has no conditional write: a stop landing
// inside that last read and write is the one window left, docs/state.md.)
func TestStopBetweenReadAndWrite(t *testing.T) {
	h := newHarness(t, false)
	const alias = "race/stop"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Turn(agenttest.Step{Text: "hi"}))
	// A first run's folder exists already, so the run's first download
	// is the one under the lock it decides on.
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.setWireState(alias, envelope.StatePending) // handed off again
	h.srv.PersonPost(alias, "more")
	var n atomic.Int32
	h.srv.RewriteAnswers("download_session_object", func(body []byte) []byte {
		if n.Add(1) == 1 {
			h.setWireState(alias, envelope.StateCompleted) // thread stop
		}
		return body
	})
	sum := h.run(alias)
	h.srv.RewriteAnswers("download_session_object", nil)
	if sum.ExitCode != exit.TempFail || sum.Error == nil || sum.Error.Code != exit.CodeStateChanged || h.wireState(alias) != envelope.StateCompleted {
		t.Fatalf("exit %d (%+v), wire %q: want the stop kept and the run leaving it to the next", sum.ExitCode, sum.Error, h.wireState(alias))
	}
	want(t, h.run(alias), OutcomeStopped, exit.OK)
	if h.wireState(alias) != envelope.StateCompleted {
		t.Fatalf("wire %q after the next run", h.wireState(alias))
	}
}
