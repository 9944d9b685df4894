package run

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// newActiveIdle is a harness whose alias is handed off without a message
// and activated: an active thread with nothing to say.
func newActiveIdle(t *testing.T, local bool, alias string) *harness {
	t.Helper()
	h := newHarness(t, local)
	h.handOff(alias, "approval", "")
	want(t, h.run(alias), OutcomeIdle, 0)
	return h
}

// TestEndlessListBoundedPerRun: a server that answers every list query
// with 50 new items is read up to blobhub.TailLimits per run, not for
// ever; the cursor ends exactly after the last item read, so the next run
// reads on from there and a person's message behind the flood is
// delivered once, nothing lost.
func TestEndlessListBoundedPerRun(t *testing.T) {
	const alias = "projects/p1/endless"
	h := newActiveIdle(t, false, alias)
	const perPage, pages = 50, 400 // 20,000 made-up items, twice the bound
	h.srv.EndlessList(alias, perPage, pages)
	pagesPerRun := 10000 / perPage

	h.srv.ResetCounts()
	want(t, h.run(alias), OutcomeIdle, 0)
	if n := h.srv.Count("list_session_thread_items"); n != pagesPerRun {
		t.Fatalf("the run read %d pages, want %d (10,000 items of 50 a page)", n, pagesPerRun)
	}
	sc := h.thread(alias).Items.Scanned
	if !slices.Equal(sc.IDs, []string{"itm_endless_00010000"}) {
		t.Fatalf("scanned = %+v, want it to end at the 10,000th item read", sc)
	}

	h.srv.ResetCounts()
	want(t, h.run(alias), OutcomeIdle, 0)
	if n := h.srv.Count("list_session_thread_items"); n != pagesPerRun {
		t.Fatalf("the second run read %d pages, want %d", n, pagesPerRun)
	}
	if sc := h.thread(alias).Items.Scanned; !slices.Equal(sc.IDs, []string{"itm_endless_00020000"}) {
		t.Fatalf("scanned = %+v after the second run", sc)
	}

	msg := h.srv.PersonPost(alias, "still there?")
	if c, m := mustTime(t, msg.CreatedAt), mustTime(t, sc.CreatedAt); !c.After(m) {
		t.Fatalf("setup: the message (%s) is not after the made-up items (%s)", msg.CreatedAt, sc.CreatedAt)
	}
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "yes"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, []string{msg.ID}) {
		t.Fatalf("delivered %v, want the person's message %s", got, msg.ID)
	}
	want(t, h.run(alias), OutcomeIdle, 0)
}

// TestFutureItemDoesNotStallThread: a person's item stamped 2099 (a server
// clock that jumped) is delivered once, and the thread still hears the
// messages stamped by the right clock after it.
func TestFutureItemDoesNotStallThread(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "file"}[local], func(t *testing.T) {
			const alias = "projects/p1/future"
			h := newActiveIdle(t, local, alias)
			const y2099 = "2099-01-01T00:00:00.000000+00:00"
			var future blobhub.Item
			if local {
				// The store's clock jumped for one item: stored out of order.
				future = h.srv.PostAt(alias, y2099, "from the future")
			} else {
				// BlobHub serves it last, in created_at order.
				future = blobhub.Item{ID: "itm_future", CreatedAt: y2099, UserID: bhtest.PersonUserID,
					Content: []blobhub.Block{{Type: "text", Text: "from the future"}}}
				h.srv.ServeItem(alias, future)
			}
			turn := func() {
				h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ok"}}}})
			}
			turn()
			want(t, h.run(alias), OutcomeTurnCompleted, 0)
			if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, []string{future.ID}) {
				t.Fatalf("delivered %v, want the future item", got)
			}

			now := h.srv.PersonPost(alias, "stamped by the right clock")
			turn()
			want(t, h.run(alias), OutcomeTurnCompleted, 0)
			if got := h.thread(alias).Turn.InboundIDs; !slices.Equal(got, []string{now.ID}) {
				t.Fatalf("delivered %v, want only %s (the future item once, the later one heard)", got, now.ID)
			}
			want(t, h.run(alias), OutcomeIdle, 0)
		})
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := blobhub.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestLsRunnableWhenReadIsCut: ls reads what a run reads; when that read
// stops at its bound, the thread is runnable, so a run reads on (and ls
// never leaves a person's message behind a flood unread for ever).
func TestLsRunnableWhenReadIsCut(t *testing.T) {
	f := newLsFixture(t, "")
	const alias = "t/flooded"
	f.thread(alias, "active")
	end := f.runnerPost(alias, "turn_end")
	f.local(alias, "active", func(th *envelope.Thread) { th.Items.Scanned = scannedAt(end) })
	runnable := func() bool {
		for _, l := range f.list(ListOptions{Runnable: true}) {
			if l.Alias == alias {
				return true
			}
		}
		return false
	}
	if runnable() {
		t.Fatal("an idle thread is runnable")
	}
	// Exactly one run's worth of the runner's own items: nothing for a
	// turn, but the read stops at its bound.
	f.srv.EndlessList(alias, 50, blobhub.TailLimits.Items/50)
	if !runnable() {
		t.Fatal("a thread whose read stopped at its bound is not runnable")
	}
	if runnable() {
		t.Fatal("runnable once everything is read")
	}
}

// TestPostSearchThatCannotTell: a post whose answer is lost is looked for
// before it is posted again; when the search stops at its bound without
// finding it, the run cannot tell whether BlobHub holds it, so nothing is
// posted again blindly: the items stay journaled (75), and the next run
// finds the item and posts the rest, none twice.
func TestPostSearchThatCannotTell(t *testing.T) {
	defer func(l blobhub.Limits) { postedLimits = l }(postedLimits)
	postedLimits = blobhub.Limits{Items: 100}
	h := newHarness(t, false)
	const alias = "projects/p1/cannot-tell"
	h.handOff(alias, "approval", "start")
	h.play(oneTurn())
	h.runner = func(r *Runner) {
		r.Client = &floodOnPost{Client: r.Client, flood: func() {
			// The first post is stored and its answer lost, and the thread
			// then answers more items than the search reads.
			h.srv.DropAfterStore(1)
			h.srv.EndlessList(alias, 50, 3)
		}}
	}
	sum := h.run(alias)
	wantCode(t, sum, exit.TempFail, exit.CodeUnposted)
	if got := h.items(alias); !slices.Equal(got, []string{"person", "text"}) {
		t.Fatalf("items %v, want the person's and the one stored", got)
	}
	h.runner = nil
	h.nextRunPostsTheRest(alias)
}

// floodOnPost runs flood once, before the first post.
type floodOnPost struct {
	blobhub.Client
	flood func()
	once  sync.Once
}

func (c *floodOnPost) Post(ctx context.Context, alias string, p blobhub.NewItem) (blobhub.Item, error) {
	c.once.Do(c.flood)
	return c.Client.Post(ctx, alias, p)
}

// hookClient runs onUpload before every upload and onPost before every
// post.
type hookClient struct {
	blobhub.Client
	onUpload func(alias string)
	onPost   func(alias string, p blobhub.NewItem)
}

func (c *hookClient) Upload(ctx context.Context, alias string, v json.RawMessage) error {
	if c.onUpload != nil {
		c.onUpload(alias)
	}
	return c.Client.Upload(ctx, alias, v)
}

func (c *hookClient) Post(ctx context.Context, alias string, p blobhub.NewItem) (blobhub.Item, error) {
	if c.onPost != nil {
		c.onPost(alias, p)
	}
	return c.Client.Post(ctx, alias, p)
}

// hook wraps the run's client (after the harness's own wrapping).
func (h *artifactHarness) hook(c hookClient) {
	prev := h.runner
	h.runner = func(r *Runner) {
		prev(r)
		c.Client = r.Client
		r.Client = &c
	}
}

// TestArtifactsReadOneAtATime: the outbox is scanned (hashed) first, and
// each file's bytes are read only for its own upload, so a run holds one
// file at a time. A file that changes after the scan, before its upload,
// is published as it is then: uploaded, recorded and announced with the
// sha256 of the bytes sent.
func TestArtifactsReadOneAtATime(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	h.write("a.txt", "a v1")
	h.write("b.txt", "b v1")
	h.hook(hookClient{onUpload: func(alias string) {
		if strings.HasSuffix(alias, "/a.txt") {
			h.write("b.txt", "b v2, written while a.txt was uploaded")
		}
	}})
	h.turn()
	b, ok := h.object("b.txt")
	if !ok || b.Data != "b v2, written while a.txt was uploaded" || b.SHA256 != sha(b.Data) || b.Size != int64(len(b.Data)) {
		t.Fatalf("b.txt published as %+v, want the bytes on disk at its upload", b)
	}
	if got := h.published(h.alias)["b.txt"].SHA256; got != sha(b.Data) {
		t.Fatalf("artifacts.yaml records %s, want the sha256 uploaded", got)
	}
	var announcedSHA []string
	for _, it := range h.srv.Items(h.alias) {
		var m struct {
			Type     string `json:"type"`
			Artifact struct {
				Alias, SHA256 string
			} `json:"artifact"`
		}
		if json.Unmarshal(it.Metadata, &m) == nil && m.Type == agent.ItemArtifactsPublished && strings.HasSuffix(m.Artifact.Alias, "/b.txt") {
			announcedSHA = append(announcedSHA, m.Artifact.SHA256)
		}
	}
	if !slices.Equal(announcedSHA, []string{sha(b.Data)}) {
		t.Fatalf("b.txt announced with %v, want once with the sha256 uploaded", announcedSHA)
	}
	if h.uploadsOf("a.txt") != 1 || h.uploadsOf("b.txt") != 1 {
		t.Fatalf("uploads a %d b %d, want one each", h.uploadsOf("a.txt"), h.uploadsOf("b.txt"))
	}
	// The next turn finds nothing new: the record holds what was sent.
	h.turn()
	if got := h.announced(); got["a.txt"] != 1 || got["b.txt"] != 1 {
		t.Fatalf("announced %v after a turn with nothing new", got)
	}
}

// TestNotMineWrittenOncePerRun: a run publishing several artifacts writes
// not_mine.yaml once, after them, not once per artifact.
func TestNotMineWrittenOncePerRun(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	for _, f := range []string{"a", "b", "c", "d", "e"} {
		h.write(f+".txt", f)
	}
	path := filepath.Join(h.setup().JobDir, "not_mine.yaml")
	versions := map[uint64]bool{} // not_mine.yaml as each announcement is posted, by inode (0: absent)
	h.hook(hookClient{onPost: func(_ string, p blobhub.NewItem) {
		if !strings.Contains(string(p.Metadata), agent.ItemArtifactsPublished) {
			return
		}
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			st.Ino = 0
		}
		versions[st.Ino] = true
	}})
	h.turn()
	if len(h.announced()) != 5 {
		t.Fatalf("announced %v", h.announced())
	}
	if len(versions) != 1 {
		t.Fatalf("not_mine.yaml was rewritten while the artifacts were published (%d versions seen)", len(versions))
	}
	nm := h.notMine()
	for _, f := range []string{"a", "b", "c", "d", "e"} {
		if e := nm.Aliases[h.alias+"/artifacts/"+f+".txt"]; e.Reason != setup.ReasonArtifact {
			t.Fatalf("%s.txt not cached after the run: %+v", f, e)
		}
	}
}

// TestKill9Artifacts: bhw-run killed with SIGKILL after each journal write
// of a turn that publishes three files, then a normal run: every file is
// published with its bytes and announced exactly once, nothing stays open.
func TestKill9Artifacts(t *testing.T) {
	files := map[string]string{"a.md": "# a\n", "sub/b.bin": "\x00\x01", "c.txt": "c"}
	for n := 1; n < 60; n++ {
		h := newArtifactHarness(t, true)
		h.activate()
		for rel, data := range files {
			h.write(rel, data)
		}
		h.srv.PersonPost(h.alias, "publish")
		script := agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done"}}}}
		h.play(script)
		killed, exitCode := h.runKilled(h.alias, n)
		if killed {
			h.play(script)
			if sum := h.run(h.alias); sum.ExitCode != exit.OK {
				t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
			}
		} else if exitCode != exit.OK {
			t.Fatalf("clean run exits %d", exitCode)
		}
		got := h.announced()
		for rel, data := range files {
			if got[rel] != 1 {
				t.Fatalf("kill at %d: announced %v, want each file once", n, got)
			}
			if o, ok := h.object(rel); !ok || o.SHA256 != sha(data) {
				t.Fatalf("kill at %d: %s published as %+v", n, rel, o)
			}
		}
		h.noneTwice(h.alias)
		if open := h.journalOpen(h.alias); open != 0 {
			t.Fatalf("kill at %d: %d emissions unconfirmed", n, open)
		}
		if !killed {
			if n < 8 {
				t.Fatalf("only %d journal writes in a publishing turn", n-1)
			}
			t.Logf("killed after each of %d journal writes", n-1)
			return
		}
	}
	t.Fatal("the publishing run never finished without a kill")
}
