package run

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
)

// oneTurn is a turn with a text and a tool call.
func oneTurn() agenttest.Script {
	return agenttest.Script{Turns: [][]agenttest.Step{{
		{Text: "hello"},
		{Tool: &agenttest.Tool{Effect: policy.EffectRead, Target: policy.Target{Paths: []string{"/etc/hostname"}}, Result: "host"}},
	}}}
}

var oneTurnItems = []string{"person", "text", "tool_call", "tool_result", "turn_end"}

// TestFlakyReads: 500s, 429 with Retry-After and truncated answers on reads
// are retried; the run ends as a clean one does.
func TestFlakyReads(t *testing.T) {
	faults := map[string]func(s *bhtest.Server){
		"500 on download": func(s *bhtest.Server) { s.FailNext("download_session_object", 3, http.StatusInternalServerError, "") },
		"503 on list":     func(s *bhtest.Server) { s.FailNext("list_session_thread_items", 2, http.StatusServiceUnavailable, "") },
		"429 Retry-After": func(s *bhtest.Server) { s.FailNext("list_session_thread_items", 1, http.StatusTooManyRequests, "1") },
		"500 on upload":   func(s *bhtest.Server) { s.FailNext("upload_session_object", 2, http.StatusBadGateway, "") },
		"500 on me":       func(s *bhtest.Server) { s.FailNext(bhtest.CmdMe, 2, http.StatusInternalServerError, "") },
		"truncated download": func(s *bhtest.Server) {
			s.TruncateNext("download_session_object", 2)
		},
		"truncated list": func(s *bhtest.Server) { s.TruncateNext("list_session_thread_items", 1) },
		"dropped list":   func(s *bhtest.Server) { s.DropBefore("list_session_thread_items", 2) },
		"slow bodies":    func(s *bhtest.Server) { s.SlowBody(20 * time.Millisecond) },
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "flaky/t"
			h.handOff(alias, "approval", "start")
			h.play(oneTurn())
			fault(h.srv)
			want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
			if got := h.items(alias); !slices.Equal(got, oneTurnItems) {
				t.Fatalf("items %v", got)
			}
			h.noneTwice(alias)
			if h.wireState(alias) != envelope.StateActive {
				t.Fatal("wire not active")
			}
			want(t, h.run(alias), OutcomeIdle, exit.OK)
		})
	}
}

// TestPostsDropped: BlobHub drops the connection on posts during a turn. The
// items stay journaled, the run exits 75 ITEMS_UNPOSTED, and the next run
// posts them, none twice.
func TestPostsDropped(t *testing.T) {
	h := newHarness(t, false)
	const alias = "drop/t"
	h.handOff(alias, "approval", "start")
	h.play(oneTurn())
	// The first post and the post after the search for it are both cut:
	// the run goes offline and journals the rest.
	h.srv.DropBefore("post_session_thread_item", 2)
	sum := h.run(alias)
	wantCode(t, sum, exit.TempFail, exit.CodeUnposted)
	if got := h.items(alias); !slices.Equal(got, []string{"person"}) {
		t.Fatalf("items %v", got)
	}
	if n := h.journalOpen(alias); n != 4 {
		t.Fatalf("%d emissions journaled, want 4", n)
	}
	if st := h.thread(alias).Turn.State; st != envelope.TurnStateIdle {
		t.Fatalf("turn %q", st)
	}
	h.nextRunPostsTheRest(alias)
	h.srv.ResetCounts()
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if n, cmds := h.srv.Requests(); n != 2 {
		t.Fatalf("idle run after recovery made %d requests: %v", n, cmds)
	}
}

// nextRunPostsTheRest: after a run that left oneTurn's items journaled, an
// idle run posts them all, none twice, and closes the journal.
func (h *harness) nextRunPostsTheRest(alias string) {
	h.t.Helper()
	want(h.t, h.run(alias), OutcomeIdle, exit.OK)
	if got := h.items(alias); !slices.Equal(got, oneTurnItems) {
		h.t.Fatalf("items after the next run %v", got)
	}
	h.noneTwice(alias)
	if n := h.journalOpen(alias); n != 0 {
		h.t.Fatalf("%d emissions still open", n)
	}
}

// TestPostStoredThenDropped: the server stores an item and drops the
// connection; the item is found by emission_id and not posted again.
func TestPostStoredThenDropped(t *testing.T) {
	for _, n := range []int{1, 3} {
		h := newHarness(t, false)
		const alias = "stored/t"
		h.handOff(alias, "approval", "start")
		h.play(oneTurn())
		h.srv.DropAfterStore(n)
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		if got := h.items(alias); !slices.Equal(got, oneTurnItems) {
			t.Fatalf("DropAfterStore(%d): items %v", n, got)
		}
		h.noneTwice(alias)
		if open := h.journalOpen(alias); open != 0 {
			t.Fatalf("%d emissions open", open)
		}
	}
}

// TestThreadFailedPostDropped: the thread_failed item on worker survives a
// dropped post after store, once.
func TestThreadFailedPostDropped(t *testing.T) {
	h := newHarness(t, false)
	const alias = "failpost/t"
	h.srv.Put(alias, envelopeWith("relative", nil))
	h.srv.DropAfterStore(1)
	sum := h.run(alias)
	wantCode(t, sum, exit.Failed, exit.CodeWorkFolderNotAbsolute)
	h.wantThreadFailed(alias, exit.CodeWorkFolderNotAbsolute)
}

// TestEqualTimestampsAcrossPages: person items that share a created_at
// with each other across a page boundary, or with the cursor left by the
// last run, are each delivered exactly once. (At most PageSize−1 items may
// share one instant: the API has no page cursor, see blobhub.Tail.)
func TestEqualTimestampsAcrossPages(t *testing.T) {
	for _, local := range []bool{false, true} {
		h := newHarness(t, local)
		const alias = "eq/t"
		h.srv.PageSize(3)
		h.handOff(alias, "approval", "")
		post := func(equal bool, text string) string {
			h.srv.EqualTimestamps(equal)
			defer h.srv.EqualTimestamps(false)
			return h.srv.PersonPost(alias, text).ID
		}
		// m1=m2 on page one; m3=m4 straddle the boundary of pages one and two.
		first := []string{post(false, "m1"), post(true, "m2"), post(false, "m3"), post(true, "m4"), post(false, "m5")}
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ok"}}}})
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, first) {
			t.Fatalf("first turn delivered %v, want %v", got, first)
		}
		// m6 shares the instant of the run's own last item, the cursor.
		// (With PageSize(2) the tail wedges here for good: the page
		// [own item, m6] repeats and m7, m8 are never read — reported.)
		second := []string{post(true, "m6"), post(false, "m7"), post(true, "m8")}
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, second) {
			t.Fatalf("second turn delivered %v, want %v", got, second)
		}
		want(t, h.run(alias), OutcomeIdle, exit.OK)
		h.noneTwice(alias)
		if got := count(h.items(alias), "person"); got != 8 {
			t.Fatalf("%d person items", got)
		}
	}
}

// TestPersonPostsDuringTurn: an item a person posts while the turn runs is
// kept in pending_inbound and delivered by the next run, once.
func TestPersonPostsDuringTurn(t *testing.T) {
	h := newHarness(t, false)
	const alias = "during/t"
	h.handOff(alias, "approval", "start")
	h.play(oneTurn())
	var during string
	h.runner = func(r *Runner) {
		wrapStart(r, testAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				if during == "" {
					during = h.srv.PersonPost(alias, "posted during the turn").ID
				}
				return next(ctx, l)
			}
		})
	}
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	th := h.thread(alias)
	if slices.Contains(th.Turn.InboundIDs, during) {
		t.Fatal("the item posted during the turn was delivered to the turn that was already running")
	}
	if len(th.Items.PendingInbound) != 1 || th.Items.PendingInbound[0].ID != during {
		t.Fatalf("pending_inbound %v, want [%s]", th.Items.PendingInbound, during)
	}
	h.runner = nil
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "second"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, []string{during}) {
		t.Fatalf("second turn delivered %v", got)
	}
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	h.noneTwice(alias)
}

// tooLargeClient answers thread_item_too_large for every item of type text
// that is not a truncated stub, and cuts the first stub post before it
// reaches the server (an ambiguous failure).
type tooLargeClient struct {
	blobhub.Client
	cutStub bool
}

func (c *tooLargeClient) Post(ctx context.Context, alias string, p blobhub.NewItem) (blobhub.Item, error) {
	var m struct {
		Type      string `json:"type"`
		Truncated bool   `json:"truncated"`
	}
	_ = json.Unmarshal(p.Metadata, &m)
	switch {
	case m.Type == agent.ItemText && !m.Truncated:
		return blobhub.Item{}, &blobhub.APIError{Status: http.StatusRequestEntityTooLarge, Code: blobhub.CodeThreadItemTooLarge}
	case m.Truncated && !c.cutStub:
		c.cutStub = true
		return blobhub.Item{}, blobhub.ErrAmbiguous
	}
	return c.Client.Post(ctx, alias, p)
}

// TestTooLargeStubAmbiguous: an item BlobHub finds too large is replaced by
// its stub; when the stub's post is cut and the stub is not on
// the thread, the stub is posted again, not the item the server refused.
func TestTooLargeStubAmbiguous(t *testing.T) {
	h := newHarness(t, false)
	const alias = "toolarge/t"
	h.handOff(alias, "approval", "start")
	h.play(oneTurn())
	h.runner = func(r *Runner) { r.Client = &tooLargeClient{Client: r.Client} }
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if got := h.items(alias); !slices.Equal(got, oneTurnItems) {
		t.Fatalf("items %v, want %v (the text as a stub)", got, oneTurnItems)
	}
	h.noneTwice(alias)
}
