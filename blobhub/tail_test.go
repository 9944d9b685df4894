package blobhub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestTailEqualTimestampsAcrossPages: pages of 3, a pair of items sharing one
// instant split by the page boundary, then an item at the cursor's own
// instant. Nothing is lost, nothing repeated, and an idle tail costs one page
// of already-seen ids.
func TestTailEqualTimestampsAcrossPages(t *testing.T) {
	const alias = "projects/p/thread"
	srv, c := pagedThread(t, 3, alias)
	ctx := t.Context()

	x0 := srv.PersonPost(alias, "x0")
	x1 := srv.PersonPost(alias, "x1")
	x2 := srv.PersonPost(alias, "x2")
	x3 := postAtLastInstant(srv, alias, "x3") // x2 ends page 1, x3 starts page 2
	x4 := srv.PersonPost(alias, "x4")
	if x2.CreatedAt != x3.CreatedAt || x3.CreatedAt == x4.CreatedAt {
		t.Fatalf("setup: stamps %s %s %s", x2.CreatedAt, x3.CreatedAt, x4.CreatedAt)
	}

	srv.ResetCounts()
	got, cur, _, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{}, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, x0, x1, x2, x3, x4)
	if cur.CreatedAt != x4.CreatedAt || !slices.Equal(cur.IDs, []string{x4.ID}) {
		t.Fatalf("cursor = %+v, want %s [%s]", cur, x4.CreatedAt, x4.ID)
	}
	// page 1: x0 x1 x2; page 2 (since x2−1µs): x2 x3 x4; page 3: x4 only → end.
	if n := srv.Count("list_session_thread_items"); n != 3 {
		t.Errorf("pages read = %d, want 3", n)
	}

	// Idle: one page holding only seen ids.
	srv.ResetCounts()
	got, cur2, _, err := blobhub.Tail(ctx, c, alias, cur, blobhub.Limits{})
	if err != nil || len(got) != 0 || cur2.CreatedAt != cur.CreatedAt || !slices.Equal(cur2.IDs, cur.IDs) {
		t.Fatalf("idle tail = %v, %+v, %v", ids(got), cur2, err)
	}
	if n := srv.Count("list_session_thread_items"); n != 1 {
		t.Errorf("idle tail read %d pages, want 1", n)
	}

	// An item at the cursor's own instant is found, and the cursor keeps
	// both ids.
	x5 := postAtLastInstant(srv, alias, "x5")
	got, cur3, _, err := blobhub.Tail(ctx, c, alias, cur, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, x5)
	if cur3.CreatedAt != x4.CreatedAt || !slices.Equal(cur3.IDs, []string{x4.ID, x5.ID}) {
		t.Fatalf("cursor = %+v", cur3)
	}
	got, _, _, err = blobhub.Tail(ctx, c, alias, cur3, blobhub.Limits{})
	if err != nil || len(got) != 0 {
		t.Fatalf("tail after x5 = %v, %v", ids(got), err)
	}
}

// TestTailFullPageAtCursor: with pages of 2, two items share the cursor's
// instant, so the page at the cursor holds only seen ids; an item posted
// later must still be read (the tail asks once more strictly after that
// instant) and an idle tail stays cheap.
func TestTailFullPageAtCursor(t *testing.T) {
	const alias = "full/page"
	srv, c := pagedThread(t, 2, alias)
	ctx := t.Context()
	srv.EqualTimestamps(true)
	a := srv.PersonPost(alias, "a")
	b := srv.PersonPost(alias, "b")
	srv.EqualTimestamps(false)
	got, cur, _, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{}, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, a, b)
	later := srv.PersonPost(alias, "later")
	got, cur, _, err = blobhub.Tail(ctx, c, alias, cur, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, later)
	srv.ResetCounts()
	if got, _, _, err = blobhub.Tail(ctx, c, alias, cur, blobhub.Limits{}); err != nil || len(got) != 0 {
		t.Fatalf("idle tail = %v, %v", ids(got), err)
	}
	if n := srv.Count("list_session_thread_items"); n != 1 {
		t.Errorf("idle tail read %d pages, want 1", n)
	}
}

// TestTailInterleaved posts in random bursts (some sharing one instant, groups
// smaller than a page) while tailing in between, over pages of 4, and checks
// the tail saw exactly the stored items in order.
func TestTailInterleaved(t *testing.T) {
	const alias = "t"
	srv, c := pagedThread(t, 4, alias)
	r := rand.New(rand.NewPCG(1, 2))
	var seen []blobhub.Item
	var cur blobhub.Cursor
	n := 0
	for round := range 20 {
		for range r.IntN(7) {
			srv.EqualTimestamps(false)
			srv.PersonPost(alias, fmt.Sprint(n))
			n++
			if r.IntN(3) == 0 { // one more at the same instant
				srv.EqualTimestamps(true)
				srv.PersonPost(alias, fmt.Sprint(n))
				n++
			}
		}
		got, next, _, err := blobhub.Tail(t.Context(), c, alias, cur, blobhub.Limits{})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		seen = append(seen, got...)
		cur = next
	}
	assertSameItems(t, seen, srv.Items(alias))
}

func TestTailLocalStore(t *testing.T) {
	c := newClient(t, blobhub.Config{APIURL: "file://" + t.TempDir(), SessionID: "s", PageSize: 2})
	if err := c.Upload(t.Context(), "a/b", json.RawMessage(`{"type":"thread"}`)); err != nil {
		t.Fatal(err)
	}
	var want []blobhub.Item
	for i := range 7 {
		it, err := c.Post(t.Context(), "a/b", text(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, it)
	}
	got, cur, _, err := blobhub.Tail(t.Context(), c, "a/b", blobhub.Cursor{}, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameItems(t, got, want)
	if cur.CreatedAt != want[6].CreatedAt {
		t.Errorf("cursor %+v", cur)
	}
}

// pagedThread is a test hub answering pages of pageSize items, with the
// thread alias, and a runner's client of it.
func pagedThread(t *testing.T, pageSize int, alias string) (*bhtest.Server, blobhub.Client) {
	t.Helper()
	srv := bhtest.New(t)
	srv.PageSize(pageSize)
	srv.Thread(alias)
	return srv, srv.Client(bhtest.RunnerKey)
}

// postAtLastInstant has the person post text at the instant of the item
// posted last.
func postAtLastInstant(srv *bhtest.Server, alias, text string) blobhub.Item {
	srv.EqualTimestamps(true)
	defer srv.EqualTimestamps(false)
	return srv.PersonPost(alias, text)
}

func assertIDs(t *testing.T, got []blobhub.Item, want ...blobhub.Item) {
	t.Helper()
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("ids = %v, want %v", ids(got), ids(want))
	}
}

func TestTime(t *testing.T) {
	want := time.Date(2026, 11, 29, 19, 20, 0, 123456000, time.UTC)
	if s := blobhub.FormatTime(want.In(time.FixedZone("x", 3600)).Add(789)); s != "2026-11-29T19:20:00.123456+00:00" {
		t.Errorf("FormatTime = %s", s)
	}
	for _, s := range []string{
		"2026-11-29T19:20:00.123456+00:00",
		"2026-11-29T19:20:00.123456Z",
		"2026-11-29T20:20:00.123456+01:00",
		"2026-11-29T19:20:00.123456",
	} {
		if got, err := blobhub.ParseTime(s); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%s) = %v, %v", s, got, err)
		}
	}
	if got, err := blobhub.ParseTime("2026-11-29T19:20:00.1Z"); err != nil || !got.Equal(want.Truncate(100*time.Millisecond)) {
		t.Errorf("fewer digits: %v %v", got, err)
	}
	if got, err := blobhub.ParseTime("2026-11-29T19:20:00+00:00"); err != nil || !got.Equal(want.Truncate(time.Second)) {
		t.Errorf("no fraction: %v %v", got, err)
	}
	if _, err := blobhub.ParseTime("yesterday"); err == nil {
		t.Error("ParseTime(yesterday): no error")
	}
}

// clockServer is a fake BlobHub list endpoint: items served in created_at
// order (as BlobHub does, whatever order they were stamped in), pages of
// size, every answer dated date. Only ListItems is served.
type clockServer struct {
	blobhub.Client
	items   []blobhub.Item
	size    int
	date    time.Time
	queries int
}

func (s *clockServer) add(id string, at time.Time) blobhub.Item {
	it := blobhub.Item{ID: id, CreatedAt: blobhub.FormatTime(at), UserID: "usr_person", Content: []blobhub.Block{{Type: "text", Text: id}}}
	s.items = append(s.items, it)
	return it
}

func (s *clockServer) ListItems(_ context.Context, _ string, q blobhub.ItemQuery) (blobhub.Page, error) {
	s.queries++
	at := func(it blobhub.Item) time.Time { t, _ := blobhub.ParseTime(it.CreatedAt); return t }
	all := slices.Clone(s.items)
	slices.SortStableFunc(all, func(a, b blobhub.Item) int { return at(a).Compare(at(b)) })
	if !q.Ascending {
		slices.Reverse(all)
	}
	page := []blobhub.Item{}
	since, err := blobhub.ParseTime(q.CreatedSince)
	before, errBefore := blobhub.ParseTime(q.CreatedBefore)
	for _, it := range all {
		if q.CreatedSince != "" && (err != nil || !at(it).After(since)) {
			continue
		}
		if q.CreatedBefore != "" && (errBefore != nil || !at(it).Before(before)) {
			continue
		}
		if page = append(page, it); len(page) == s.size {
			break
		}
	}
	return blobhub.Page{Items: page, Date: s.date}, nil
}

// TestTailPresent: items stamped before, at, just after (within the Date
// header's second) and far ahead of the page's Date. Each is read once; the
// cursor stops at the newest item not ahead of the server's present, so an
// item stamped later by the right clock is still read, and the item read
// ahead of the present is remembered, not read twice, and forgotten once
// the present catches up with it.
func TestTailPresent(t *testing.T) {
	d := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &clockServer{size: 2, date: d}
	past := s.add("past", d.Add(-time.Hour))
	equal := s.add("equal", d)
	slack := s.add("slack", d.Add(500*time.Millisecond))
	future := s.add("future", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := t.Context()

	got, cur, more, err := blobhub.Tail(ctx, s, "t", blobhub.Cursor{}, blobhub.Limits{})
	if err != nil || more {
		t.Fatal(err, more)
	}
	assertIDs(t, got, past, equal, slack, future)
	want := blobhub.Cursor{CreatedAt: slack.CreatedAt, IDs: []string{"slack"}, Since: equal.CreatedAt, Ahead: []blobhub.Stamp{{ID: "future", CreatedAt: future.CreatedAt}}}
	if !reflect.DeepEqual(cur, want) {
		t.Fatalf("cursor %+v, want %+v", cur, want)
	}

	// The right clock goes on; the item stamped 2099 sorts after the new one.
	s.date = d.Add(time.Minute)
	later := s.add("later", d.Add(30*time.Second))
	got, cur, more, err = blobhub.Tail(ctx, s, "t", cur, blobhub.Limits{})
	if err != nil || more {
		t.Fatal(err, more)
	}
	assertIDs(t, got, later)
	want = blobhub.Cursor{CreatedAt: later.CreatedAt, IDs: []string{"later"}, Since: slack.CreatedAt, Ahead: want.Ahead}
	if !reflect.DeepEqual(cur, want) {
		t.Fatalf("cursor %+v, want %+v", cur, want)
	}
	// Idle: nothing read, the cursor as it was.
	got, idle, more, err := blobhub.Tail(ctx, s, "t", cur, blobhub.Limits{})
	if err != nil || more || len(got) != 0 || !reflect.DeepEqual(idle, cur) {
		t.Fatalf("idle tail = %v, %+v, %v, %v", ids(got), idle, more, err)
	}

	// The server's present reaches 2099: the item leaves Ahead and the
	// cursor moves to it, still without reading it again.
	s.date = time.Date(2099, 1, 2, 0, 0, 0, 0, time.UTC)
	got, cur, more, err = blobhub.Tail(ctx, s, "t", cur, blobhub.Limits{})
	if err != nil || more || len(got) != 0 {
		t.Fatalf("tail = %v, %v, %v", ids(got), more, err)
	}
	want = blobhub.Cursor{CreatedAt: future.CreatedAt, IDs: []string{"future"}, Since: later.CreatedAt}
	if !reflect.DeepEqual(cur, want) {
		t.Fatalf("cursor %+v, want %+v", cur, want)
	}
}

// TestTailAheadBounded: more items ahead of the present than a cursor
// keeps. The tail stops before the one too many and says there is more;
// items stamped by the right clock are still read, in their order.
func TestTailAheadBounded(t *testing.T) {
	d := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &clockServer{size: 7, date: d}
	var ahead []blobhub.Item
	for i := range blobhub.MaxAhead + 3 {
		ahead = append(ahead, s.add(fmt.Sprintf("ahead%03d", i), d.Add(time.Duration(i+1)*time.Hour)))
	}
	got, cur, more, err := blobhub.Tail(t.Context(), s, "t", blobhub.Cursor{}, blobhub.Limits{})
	if err != nil || !more {
		t.Fatalf("tail: more %v, %v; want more", more, err)
	}
	assertIDs(t, got, ahead[:blobhub.MaxAhead]...)
	if len(cur.Ahead) != blobhub.MaxAhead || cur.CreatedAt != "" {
		t.Fatalf("cursor %q with %d ahead", cur.CreatedAt, len(cur.Ahead))
	}
	now := s.add("now", d.Add(-time.Second))
	got, cur, more, err = blobhub.Tail(t.Context(), s, "t", cur, blobhub.Limits{})
	if err != nil || !more {
		t.Fatalf("tail: more %v, %v; want more", more, err)
	}
	assertIDs(t, got, now)
	if cur.CreatedAt != now.CreatedAt || len(cur.Ahead) != blobhub.MaxAhead {
		t.Fatalf("cursor %q with %d ahead", cur.CreatedAt, len(cur.Ahead))
	}
	// Once the present passes the first hour, one place frees up.
	s.date = d.Add(90 * time.Minute)
	got, _, _, err = blobhub.Tail(t.Context(), s, "t", cur, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, ahead[blobhub.MaxAhead])
}

// TestTailRepeatingServer: a server that answers the same seen item with
// an ever later stamp does not keep a tail going.
func TestTailRepeatingServer(t *testing.T) {
	d := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &repeater{at: d}
	_, _, more, err := blobhub.Tail(t.Context(), s, "t", blobhub.Cursor{}, blobhub.Limits{})
	if err != nil || !more || s.queries > 10 {
		t.Fatalf("tail: more %v after %d queries, %v", more, s.queries, err)
	}
}

type repeater struct {
	blobhub.Client
	at      time.Time
	queries int
}

func (s *repeater) ListItems(context.Context, string, blobhub.ItemQuery) (blobhub.Page, error) {
	s.queries++
	s.at = s.at.Add(time.Millisecond)
	return blobhub.Page{Items: []blobhub.Item{{ID: "same", CreatedAt: blobhub.FormatTime(s.at)}}, Date: s.at}, nil
}

// TestTailLimits: a tail bounded by items or bytes stops exactly after the
// last item it returns, also inside a run of equal timestamps and a page,
// and the tails that follow read the rest: nothing lost, nothing repeated.
func TestTailLimits(t *testing.T) {
	const alias = "limits"
	srv, c := pagedThread(t, 3, alias)
	var all []blobhub.Item
	for i := range 14 {
		srv.EqualTimestamps(i%4 == 1 || i%4 == 2) // pairs and triples sharing an instant
		all = append(all, srv.PersonPost(alias, strings.Repeat("x", 10*(i+1))))
	}
	srv.EqualTimestamps(false)
	for _, lim := range []blobhub.Limits{
		{Items: 1}, {Items: 2}, {Items: 4}, {Items: 5},
		{Bytes: 1}, // one item per tail, whatever its size
		{Bytes: blobhub.ItemSize(all[0]) + blobhub.ItemSize(all[1]) + blobhub.ItemSize(all[2])},
		{Items: 3, Bytes: 400},
	} {
		var read []blobhub.Item
		cur := blobhub.Cursor{}
		for tails := 0; ; tails++ {
			if tails > len(all)+1 {
				t.Fatalf("%+v: no end after %d tails", lim, tails)
			}
			got, next, more, err := blobhub.Tail(t.Context(), c, alias, cur, lim)
			if err != nil {
				t.Fatal(err)
			}
			if lim.Items > 0 && len(got) > lim.Items {
				t.Fatalf("%+v: read %d items", lim, len(got))
			}
			var size int64
			for _, it := range got {
				size += blobhub.ItemSize(it)
			}
			if lim.Bytes > 0 && len(got) > 1 && size > lim.Bytes {
				t.Fatalf("%+v: read %d bytes", lim, size)
			}
			if len(got) > 0 {
				last := got[len(got)-1]
				if next.CreatedAt != last.CreatedAt || next.IDs[len(next.IDs)-1] != last.ID {
					t.Fatalf("%+v: cursor %+v does not end at the last item read %s@%s", lim, next, last.ID, last.CreatedAt)
				}
			}
			read = append(read, got...)
			cur = next
			if !more {
				break
			}
		}
		assertSameItems(t, read, all)
	}
}

// BenchmarkTailEndless: a server that answers every query with 50 new
// items. One tail reads at most TailLimits, however many the server
// offers: items/op and held_MiB (their ItemSize) stay flat as offered
// grows, and so do B/op and the time.
func BenchmarkTailEndless(b *testing.B) {
	for _, pages := range []int{400, 2000} {
		b.Run(fmt.Sprintf("offered=%d", pages*50), func(b *testing.B) {
			srv := bhtest.New(b)
			srv.Thread("t")
			c := srv.Client(bhtest.RunnerKey)
			var got []blobhub.Item
			for b.Loop() {
				srv.EndlessList("t", 50, pages)
				var err error
				if got, _, _, err = blobhub.Tail(b.Context(), c, "t", blobhub.Cursor{}, blobhub.TailLimits); err != nil {
					b.Fatal(err)
				}
			}
			var held int64
			for _, it := range got {
				held += blobhub.ItemSize(it)
			}
			b.ReportMetric(float64(len(got)), "items/op")
			b.ReportMetric(float64(held)/(1<<20), "held_MiB")
		})
	}
}

// TestTailCursorWithoutSince: a cursor kept before Since was (its instant
// and ids only) is read on without a computed time: the tail asks for the
// item before the cursor's instant and reads from there, so an item that
// shares the cursor's instant and was not read yet is found, once. The test
// hub refuses any created_since it did not give out.
func TestTailCursorWithoutSince(t *testing.T) {
	const alias = "old/cursor"
	srv, c := pagedThread(t, 2, alias)
	ctx := t.Context()
	first := srv.PersonPost(alias, "first")
	a := srv.PersonPost(alias, "a")
	b := postAtLastInstant(srv, alias, "b")
	after := srv.PersonPost(alias, "after")
	if a.CreatedAt != b.CreatedAt {
		t.Fatalf("setup: stamps %s %s", a.CreatedAt, b.CreatedAt)
	}
	// The hub gives the times out as a client reads them.
	if got, _, _, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{}, blobhub.Limits{}); err != nil {
		t.Fatal(err)
	} else {
		assertIDs(t, got, first, a, b, after)
	}
	got, cur, _, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{CreatedAt: a.CreatedAt, IDs: []string{a.ID}}, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, b, after)
	if cur.CreatedAt != after.CreatedAt || cur.Since != b.CreatedAt {
		t.Fatalf("cursor = %+v, want at %s since %s", cur, after.CreatedAt, b.CreatedAt)
	}
	// At the thread's first instant there is nothing before it: the read
	// starts at the thread's start, and the first item is not read again.
	got, _, _, err = blobhub.Tail(ctx, c, alias, blobhub.Cursor{CreatedAt: first.CreatedAt, IDs: []string{first.ID}}, blobhub.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, a, b, after)
}

// TestTailServersSpelling: a server that spells its times another way
// ("Z", not "+00:00") is sent back its own strings: the tail never
// re-spells a time (the test hub refuses a created_since it did not give
// out, byte for byte), over pages of 2 with items sharing an instant.
func TestTailServersSpelling(t *testing.T) {
	srv := bhtest.New(t)
	srv.PageSize(2)
	srv.RewriteAnswers("list_session_thread_items", func(b []byte) []byte {
		return []byte(strings.ReplaceAll(string(b), `+00:00"`, `Z"`))
	})
	c := srv.Client(bhtest.RunnerKey)
	const alias = "spelled/z"
	srv.Thread(alias)
	var want []blobhub.Item
	for i := range 7 {
		srv.EqualTimestamps(i%3 == 2)
		want = append(want, srv.PersonPost(alias, fmt.Sprint("x", i)))
	}
	srv.EqualTimestamps(false)
	var got []blobhub.Item
	cur := blobhub.Cursor{}
	for range 3 {
		items, next, _, err := blobhub.Tail(t.Context(), c, alias, cur, blobhub.Limits{Items: 3})
		if err != nil {
			t.Fatal(err)
		}
		got, cur = append(got, items...), next
	}
	assertIDs(t, got, want...)
	if !strings.HasSuffix(cur.CreatedAt, "Z") || cur.Since != "" && !strings.HasSuffix(cur.Since, "Z") {
		t.Errorf("cursor %+v: not the server's spelling", cur)
	}
}
