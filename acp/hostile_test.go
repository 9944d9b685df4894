package acp

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// TestFakeLongMessageBounded: a message streamed in chunks far past what
// an item carries (8 MiB) is gathered bounded: one text item of about
// agent.MaxGathered, its head and its tail, saying it was cut and how long
// it was whole.
func TestFakeLongMessageBounded(t *testing.T) {
	const size = 8 << 20
	r := startFake(t, TypeGeneric, agenttest.Turn(agenttest.Step{Stream: size}), nil)
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

// TestFakeNothingFoldedAfterTheEnd: what the agent sends after its
// end_turn answer is not the turn's: its text is not added to the turn's
// text, and its permission request is never judged (nor counted) but
// cancelled, so the completed turn stays completed. The turn is held (on
// its first item) until bhw-run has read all of it, so folding it could
// not be missed.
func TestFakeNothingFoldedAfterTheEnd(t *testing.T) {
	var sentAll, answered sync.Once
	sent, told := make(chan struct{}), make(chan string, 1)
	r := startFake(t, TypeGeneric, agenttest.Turn(
		agenttest.Step{Text: "before the end"},
		agenttest.Step{Tool: agenttest.Exec("true")},
		agenttest.Step{AfterEnd: true},
	), func(l *agent.Launch) {
		log := &agenttest.LogBuffer{OnLine: func(stream, text string) {
			switch {
			case stream == agent.StreamStdout && strings.Contains(text, `"last":"after the end"`):
				sentAll.Do(func() { close(sent) })
			case stream == agent.StreamStderr && strings.Contains(text, "after the end was"):
				answered.Do(func() { told <- text })
			}
		}}
		l.Log = log.Log()
	})
	var once sync.Once
	h := &agenttest.Recorder{
		Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Deny, Message: "judged"} },
		OnItem: func(agent.Item) {
			once.Do(func() {
				select {
				case <-sent:
				case <-time.After(30 * time.Second):
					t.Error("the agent's updates after the end never came")
				}
			})
		},
	}
	res := runTurn(t, r.s, "go", h)
	if res.Outcome != agent.TurnCompleted {
		t.Fatalf("outcome %s (%s), want completed", res.Outcome, res.ErrorText)
	}
	if got := texts(h); len(got) != 1 || got[0] != "before the end" || len(h.OfType(agent.ItemStatus)) != 0 {
		t.Fatalf("texts %q: what came after the end was folded in", got)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Fatalf("the gate judged %d calls after the end", len(calls))
	}
	select {
	case text := <-told:
		if !strings.HasSuffix(text, "refused") {
			t.Fatalf("the agent says %q", text)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request after the end was never answered")
	}
}
