package acp

import (
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestFakeLongMessageBounded: a message streamed in chunks far past what
// an item carries (8 MiB) is gathered bounded: one text item of about
// agent.MaxGathered, its head and its tail, saying it was cut and how long
// it was whole.
func TestFakeLongMessageBounded(t *testing.T) {
	const size = 8 << 20
	r := startFake(t, TypeGeneric, agenttest.Turn(agenttest.Step{Stream: size}), nil)
	// The message comes in many chunks: a pause of a loaded machine
	// between two must not be taken for its end (the idle flush), which
	// would split it in two items.
	r.s.TextIdle = time.Minute
	h := &agenttest.Recorder{}
	if res := runTurn(t, r.s, "go", h); res.Outcome != agent.TurnCompleted {
		t.Fatalf("outcome %s", res.Outcome)
	}
	items := h.OfType(agent.ItemText)
	if len(items) != 1 {
		t.Fatalf("%d text items, want 1", len(items))
	}
	it := items[0]
	if n := len(it.Brief); n > agent.MaxGathered+200 {
		t.Fatalf("the text item holds %d bytes, over the bound of %d", n, agent.MaxGathered)
	}
	if !strings.HasPrefix(it.Brief, "BEGIN") || !strings.HasSuffix(it.Brief, "END") || !strings.Contains(it.Brief, "bytes cut") {
		t.Fatalf("the item does not keep head and tail around a cut: %.80q … %q", it.Brief, it.Brief[max(0, len(it.Brief)-80):])
	}
	if it.Meta["truncated"] != true || it.Meta["original_bytes"] != size {
		t.Fatalf("metadata %v, want truncated and original_bytes %d", it.Meta, size)
	}
}

// What the agent sends after its end_turn answer is not the turn's: the
// conformance suite's "nothing after the end" holds every preset to it.
