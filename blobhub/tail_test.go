package blobhub_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
	srv := bhtest.New(t)
	srv.PageSize(3)
	c := srv.Client(bhtest.RunnerKey)
	ctx := t.Context()
	const alias = "projects/p/thread"

	x0 := srv.PersonPost(alias, "x0")
	x1 := srv.PersonPost(alias, "x1")
	x2 := srv.PersonPost(alias, "x2")
	srv.EqualTimestamps(true)
	x3 := srv.PersonPost(alias, "x3") // same instant as x2: x2 ends page 1, x3 starts page 2
	srv.EqualTimestamps(false)
	x4 := srv.PersonPost(alias, "x4")
	if x2.CreatedAt != x3.CreatedAt || x3.CreatedAt == x4.CreatedAt {
		t.Fatalf("setup: stamps %s %s %s", x2.CreatedAt, x3.CreatedAt, x4.CreatedAt)
	}

	srv.ResetCounts()
	got, cur, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{})
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
	got, cur2, err := blobhub.Tail(ctx, c, alias, cur)
	if err != nil || len(got) != 0 || cur2.CreatedAt != cur.CreatedAt || !slices.Equal(cur2.IDs, cur.IDs) {
		t.Fatalf("idle tail = %v, %+v, %v", ids(got), cur2, err)
	}
	if n := srv.Count("list_session_thread_items"); n != 1 {
		t.Errorf("idle tail read %d pages, want 1", n)
	}

	// An item at the cursor's own instant is found, and the cursor keeps
	// both ids.
	srv.EqualTimestamps(true)
	x5 := srv.PersonPost(alias, "x5")
	srv.EqualTimestamps(false)
	got, cur3, err := blobhub.Tail(ctx, c, alias, cur)
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, x5)
	if cur3.CreatedAt != x4.CreatedAt || !slices.Equal(cur3.IDs, []string{x4.ID, x5.ID}) {
		t.Fatalf("cursor = %+v", cur3)
	}
	got, _, err = blobhub.Tail(ctx, c, alias, cur3)
	if err != nil || len(got) != 0 {
		t.Fatalf("tail after x5 = %v, %v", ids(got), err)
	}
}

// TestTailFullPageAtCursor: with pages of 2, two items share the cursor's
// instant, so the page at the cursor holds only seen ids; an item posted
// later must still be read (the tail asks once more strictly after that
// instant) and an idle tail stays cheap.
func TestTailFullPageAtCursor(t *testing.T) {
	srv := bhtest.New(t)
	srv.PageSize(2)
	c := srv.Client(bhtest.RunnerKey)
	ctx := t.Context()
	const alias = "full/page"
	srv.EqualTimestamps(true)
	a := srv.PersonPost(alias, "a")
	b := srv.PersonPost(alias, "b")
	srv.EqualTimestamps(false)
	got, cur, err := blobhub.Tail(ctx, c, alias, blobhub.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, a, b)
	later := srv.PersonPost(alias, "later")
	got, cur, err = blobhub.Tail(ctx, c, alias, cur)
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, got, later)
	srv.ResetCounts()
	if got, _, err = blobhub.Tail(ctx, c, alias, cur); err != nil || len(got) != 0 {
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
	srv := bhtest.New(t)
	srv.PageSize(4)
	c := srv.Client(bhtest.RunnerKey)
	r := rand.New(rand.NewPCG(1, 2))
	const alias = "t"
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
		got, next, err := blobhub.Tail(t.Context(), c, alias, cur)
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
	var want []blobhub.Item
	for i := range 7 {
		it, err := c.Post(t.Context(), "a/b", text(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, it)
	}
	got, cur, err := blobhub.Tail(t.Context(), c, "a/b", blobhub.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	assertSameItems(t, got, want)
	if cur.CreatedAt != want[6].CreatedAt {
		t.Errorf("cursor %+v", cur)
	}
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
