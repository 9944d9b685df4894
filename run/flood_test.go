package run

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// shrinkPending sets the bounds of pending_inbound for one test.
func shrinkPending(t *testing.T, items, bytes int) {
	t.Helper()
	oldItems, oldBytes := PendingItems, PendingBytes
	PendingItems, PendingBytes = items, bytes
	t.Cleanup(func() { PendingItems, PendingBytes = oldItems, oldBytes })
}

// TestFloodIsDeliveredInBoundedTurns: a flood of person messages is
// delivered over several turns of at most the bound each, every message
// once and in order, the rest staying on BlobHub meanwhile; and no turn
// leaves its messages in thread.yaml once it is over (a flood of 20,000
// used to stay in turn.inbound, read and written by every idle run).
func TestFloodIsDeliveredInBoundedTurns(t *testing.T) {
	for _, tc := range []struct {
		name         string
		items, bytes int
		turns        []int
	}{
		{"by count", 10, 1 << 20, []int{10, 10, 5}},
		// Each message costs its id, time, user and text (about 80 bytes,
		// inboundSize): 8 of them reach 600, the eighth kept.
		{"by bytes", 1000, 600, []int{8, 8, 8, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shrinkPending(t, tc.items, tc.bytes)
			const alias = "flood/t"
			h := newActiveIdle(t, false, alias)
			var posted []string
			for i := range 25 {
				it := h.srv.PersonPost(alias, fmt.Sprintf("message %02d", i))
				if n := inboundSize(inboundOf(it)); tc.name == "by bytes" && (n*7 >= tc.bytes || n*8 < tc.bytes) {
					t.Fatalf("setup: a message costs %d bytes, not between 600/8 and 600/7", n)
				}
				posted = append(posted, it.ID)
			}
			var delivered []string
			for i, n := range tc.turns {
				h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ok"}}}})
				want(t, h.run(alias), OutcomeTurnCompleted, 0)
				th := h.thread(alias)
				if len(th.Turn.InboundIDs) != n {
					t.Fatalf("turn %d delivered %d messages, want %d", i, len(th.Turn.InboundIDs), n)
				}
				if len(th.Turn.Inbound) != 0 {
					t.Fatalf("turn %d left %d messages in turn.inbound", i, len(th.Turn.Inbound))
				}
				if p := len(th.Items.PendingInbound); p > tc.items {
					t.Fatalf("pending_inbound holds %d, over the bound %d", p, tc.items)
				}
				delivered = append(delivered, th.Turn.InboundIDs...)
			}
			want(t, h.run(alias), OutcomeIdle, 0)
			if !slices.Equal(delivered, posted) {
				t.Fatalf("delivered %v\nwant %v", delivered, posted)
			}
			h.noneTwice(alias)
		})
	}
}

// TestParkedThreadReadsPastTheBoundForItsAnswer: messages posted while a
// turn ran, before it parked, fill pending_inbound to its bound; the
// answer posted after the question lies past it. The run looks past the
// bound for the answer (else the thread would wait for ever) and resumes;
// the messages it did not keep are delivered by the next run, every one
// once, and the answer is not delivered again as a message.
func TestParkedThreadReadsPastTheBoundForItsAnswer(t *testing.T) {
	shrinkPending(t, 5, 1<<20)
	const alias = "flood/parked"
	h := newActiveIdle(t, false, alias)
	h.srv.PersonPost(alias, "run it")
	call := &agenttest.Tool{Effect: policy.EffectExec, Target: policy.Target{Command: "make deploy"}, Result: "deployed"}
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: call}}}})
	var during []string
	h.runner = func(r *Runner) {
		r.Client = &hookClient{Client: r.Client, onPost: func(_ string, p blobhub.NewItem) {
			var m struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(p.Metadata, &m) == nil && m.Type == agent.ItemPendingPrompt && during == nil {
				for i := range 8 {
					during = append(during, h.srv.PersonPost(alias, fmt.Sprintf("meanwhile %d", i)).ID)
				}
			}
		}}
	}
	want(t, h.run(alias), OutcomeParked, 0)
	h.runner = nil
	if p := h.thread(alias).Items.PendingInbound; len(p) != 5 {
		t.Fatalf("pending_inbound holds %d after the parked turn, want the bound 5", len(p))
	}
	answer := h.srv.PersonPost(alias, "yes")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: call}, {Text: "done"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	th := h.thread(alias)
	if !slices.Equal(th.Turn.InboundIDs, during[:5]) {
		t.Fatalf("the resumed turn delivered %v, want the first 5 messages posted meanwhile %v", th.Turn.InboundIDs, during[:5])
	}
	if th.Items.LastConsumed.ItemID != answer.ID {
		t.Fatalf("last consumed %q, want the answer %s", th.Items.LastConsumed.ItemID, answer.ID)
	}
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "and the rest"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, during[5:]) {
		t.Fatalf("the next turn delivered %v, want the other 3 %v (and not the answer)", got, during[5:])
	}
	var resolved int
	for _, it := range h.srv.Items(alias) {
		if strings.Contains(string(it.Metadata), `"decision":"approved"`) {
			resolved++
		}
	}
	if resolved != 1 {
		t.Fatalf("%d approvals resolved, want 1", resolved)
	}
	want(t, h.run(alias), OutcomeIdle, 0)
	h.noneTwice(alias)
}

// TestLongPersonMessageIsCut: a person's message longer than
// MaxPersonItemBytes reaches the agent cut to about that, keeping its head
// and tail around a note of what was left out; a cut JSON block becomes
// text; shorter messages are left alone.
func TestLongPersonMessageIsCut(t *testing.T) {
	head, tail := "HEAD-"+strings.Repeat("a", 100), strings.Repeat("z", 100)+"-TAIL"
	long := head + strings.Repeat("m", 1<<20) + tail
	for _, tc := range []struct {
		name    string
		content []blobhub.Block
		cut     bool
	}{
		{"short", []blobhub.Block{{Type: "text", Text: "hello"}}, false},
		{"one long text", []blobhub.Block{{Type: "text", Text: long}}, true},
		{"a long JSON block and a short text", []blobhub.Block{{Type: "text", Text: "see"}, {Type: "json", JSON: json.RawMessage(`"` + long + `"`)}}, true},
		{"two halves", []blobhub.Block{{Type: "text", Text: long[:len(long)/2]}, {Type: "text", Text: long[len(long)/2:]}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := inboundOf(blobhub.Item{ID: "itm_1", CreatedAt: "2026-01-01T00:00:00.000000+00:00", UserID: "usr_p", Content: tc.content})
			text := inboundText(in)
			n := 0
			for _, b := range in.Content {
				n += len(b.Text) + len(b.JSON)
			}
			switch {
			case !tc.cut && (n != len(tc.content[0].Text) || strings.Contains(text, "bhw-run:")):
				t.Fatalf("a short message was changed: %q", text)
			case tc.cut && n > MaxPersonItemBytes:
				t.Fatalf("%d bytes reach the agent, more than %d", n, MaxPersonItemBytes)
			case tc.cut && (!strings.Contains(text, "HEAD-") || !strings.Contains(text, "-TAIL") || !strings.Contains(text, "bytes were left out here")):
				t.Fatalf("the cut message lost its head, tail or note: %.200q … %.200q", text, text[max(len(text)-200, 0):])
			}
			for _, b := range in.Content {
				if b.JSON != "" && !json.Valid([]byte(b.JSON)) {
					t.Fatalf("a cut JSON block is still given as JSON: %.100q", b.JSON)
				}
			}
		})
	}
}

// bigEnvelope is alias's envelope as it is, with a value of size bytes
// more under metadata.notes.
func bigEnvelope(t *testing.T, h *harness, alias string, size int) (big, small string) {
	t.Helper()
	o, ok := h.srv.Get(alias)
	if !ok {
		t.Fatalf("no %s", alias)
	}
	var v map[string]any
	if err := json.Unmarshal(o.Value, &v); err != nil {
		t.Fatal(err)
	}
	v["thread"].(map[string]any)["metadata"].(map[string]any)["notes"] = strings.Repeat("n", size)
	b, _ := json.Marshal(v)
	return string(b), string(o.Value)
}

// TestEnvelopeTooLarge: an envelope larger than envelope.MaxSize is never
// read whole. The idle run of a thread this tree runs is not failed for it
// (nothing needs the envelope then); a run that must act on it — a
// person's message — fails it ENVELOPE_TOO_LARGE once, locally and with its
// thread_failed item, leaving the wire alone (failed there would mean
// rewriting the value); once the envelope is small again the failure
// reaches the wire and retry hands the thread off again. An object this
// tree holds no record of is not a job bhw-run can read (65), and ls skips
// it.
func TestEnvelopeTooLarge(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "file"}[local], func(t *testing.T) {
			const alias = "big/t"
			h := newActiveIdle(t, local, alias)
			big, small := bigEnvelope(t, h, alias, envelope.MaxSize+1)
			h.srv.Put(alias, big)
			want(t, h.run(alias), OutcomeIdle, 0)
			if th := h.thread(alias); th.Agent.State != envelope.StateActive {
				t.Fatalf("the idle run changed the local state to %q", th.Agent.State)
			}

			h.srv.PersonPost(alias, "please work")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "must not run"}}}})
			sum := h.run(alias)
			want(t, sum, OutcomeFailed, exit.Failed)
			if sum.Error == nil || sum.Error.Code != exit.CodeEnvelopeTooLarge || !strings.Contains(sum.Error.Message, "shrink it") {
				t.Fatalf("error %+v", sum.Error)
			}
			if o, _ := h.srv.Get(alias); string(o.Value) != big {
				t.Fatal("the run rewrote the envelope it refuses to read")
			}
			if got := h.items(alias); slices.Contains(got, agent.ItemText) {
				t.Fatalf("the agent ran: %v", got)
			}
			failed := func() int {
				n := 0
				for _, it := range h.srv.Items("worker") {
					if strings.Contains(string(it.Metadata), exit.CodeEnvelopeTooLarge) {
						n++
					}
				}
				return n
			}
			if failed() != 1 {
				t.Fatalf("%d thread_failed items, want 1", failed())
			}
			want(t, h.run(alias), OutcomeIdle, 0) // failed already: not again
			if failed() != 1 {
				t.Fatalf("%d thread_failed items after another run, want 1", failed())
			}

			h.srv.Put(alias, small)
			want(t, h.run(alias), OutcomeFailed, exit.Failed) // the failure reaches the wire
			if st := h.wireState(alias); st != envelope.StateFailed {
				t.Fatalf("wire state %q, want failed", st)
			}
			h.setWireState(alias, envelope.StatePending) // thread retry
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "working"}}}})
			want(t, h.run(alias), OutcomeTurnCompleted, 0)

			// An object this tree holds no record of.
			h.srv.Put("big/other", `{"type":"thread","thread":{"metadata":{"notes":"`+strings.Repeat("n", envelope.MaxSize)+`"}}}`)
			wantCode(t, h.run("big/other"), exit.NotJob, exit.CodeNotJob)
			if _, err := os.Stat(setup.ThreadDir(h.setup().JobDir, "big/other") + "/thread.yaml"); !os.IsNotExist(err) {
				t.Fatalf("a record was made for it: %v", err)
			}
		})
	}
}
