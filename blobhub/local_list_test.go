package blobhub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// listItemsLinear is the reference ListItems: read and decode the whole
// thread file, then filter in file order (the store's first implementation).
func listItemsLinear(path string, q ItemQuery, n int) ([]Item, error) {
	all, err := readLinear(path)
	if err != nil {
		return nil, err
	}
	return pageLinear(all, q, n)
}

// readLinear decodes every item of a thread file, in file order, as
// AllItems does.
func readLinear(path string) ([]Item, error) { return readItemsFile(path, readAll) }

// pageLinear filters all, the items of a thread file in file order.
func pageLinear(all []Item, q ItemQuery, n int) ([]Item, error) {
	var since, before time.Time
	var err error
	if q.CreatedSince != "" {
		if since, err = ParseTime(q.CreatedSince); err != nil {
			return nil, err
		}
	}
	if q.CreatedBefore != "" {
		if before, err = ParseTime(q.CreatedBefore); err != nil {
			return nil, err
		}
	}
	all = slices.Clone(all)
	if !q.Ascending {
		slices.Reverse(all)
	}
	page := []Item{}
	for _, it := range all {
		t, err := ParseTime(it.CreatedAt)
		if err != nil {
			continue
		}
		if q.CreatedSince != "" && !t.After(since) || q.CreatedBefore != "" && !t.Before(before) {
			continue
		}
		page = append(page, it)
		if len(page) == n {
			break
		}
	}
	return page, nil
}

// randomThread writes a thread file the way Post does (items in
// non-decreasing created_at, runs of equal stamps), spiced with what a
// reader must skip: blank lines, lines torn by a crash and followed by the
// next append's newline, items without an id or with an unreadable
// created_at, stamps in other ISO-8601 spellings, an occasional big item,
// and sometimes a torn last line or a last line without its newline. It
// returns the stamps a query may use as bounds.
func randomThread(t testing.TB, r *rand.Rand, path string, nItems int) []time.Time {
	t.Helper()
	var buf bytes.Buffer
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var stamps []time.Time
	ts := base
	line := func(it any) []byte {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range nItems {
		switch {
		case i == 0:
		case r.IntN(3) == 0: // equal-stamp run
		default:
			ts = ts.Add(time.Duration(1+r.IntN(3)) * time.Microsecond)
		}
		size := r.IntN(400)
		if r.IntN(40) == 0 {
			size = 20000 + r.IntN(40000)
		}
		stamp := FormatTime(ts)
		switch r.IntN(12) {
		case 0:
			stamp = ts.Format(time.RFC3339Nano) // "Z"
		case 1:
			stamp = ts.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000000-07:00")
		}
		it := Item{ID: fmt.Sprintf("itm_%05d", i), CreatedAt: stamp, UserID: "usr_local",
			Content: []Block{{Type: "text", Text: strings.Repeat("x", size)}}}
		stamps = append(stamps, ts)
		switch r.IntN(25) {
		case 0:
			buf.WriteString("\n  \n")
		case 1: // torn by a crash, then the next append's newline
			b := line(it)
			buf.Write(b[:1+r.IntN(len(b)-1)])
			buf.WriteByte('\n')
		case 2:
			buf.Write(line(Item{CreatedAt: stamp, Content: it.Content}))
			buf.WriteByte('\n')
		case 3:
			buf.Write(line(Item{ID: it.ID + "_bad", CreatedAt: "yesterday", Content: it.Content}))
			buf.WriteByte('\n')
		}
		buf.Write(line(it))
		buf.WriteByte('\n')
	}
	switch r.IntN(4) {
	case 0: // torn last line
		b := line(Item{ID: "itm_torn", CreatedAt: FormatTime(ts.Add(time.Microsecond)), Content: []Block{{Type: "text", Text: "torn"}}})
		buf.Write(b[:1+r.IntN(len(b)-1)])
	case 1: // a whole last line whose newline never made it
		if b := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); len(b) > 0 {
			buf.Truncate(len(b))
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return stamps
}

// randomBound is empty, or near a stamp of the thread (on it, a µs either
// side), or outside the thread, in the wire's or another spelling.
func randomBound(r *rand.Rand, stamps []time.Time) string {
	if r.IntN(4) == 0 {
		return ""
	}
	t := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	switch {
	case len(stamps) > 0 && r.IntN(10) > 0:
		t = stamps[r.IntN(len(stamps))].Add(time.Duration(r.IntN(3)-1) * time.Microsecond)
	case r.IntN(2) == 0:
		t = t.Add(2 * time.Hour)
	}
	if r.IntN(8) == 0 {
		return t.Format(time.RFC3339Nano)
	}
	return FormatTime(t)
}

// TestListItemsMatchesLinear: over random threads, every page ListItems
// serves is the page the whole-file reference serves, item for item.
func TestListItemsMatchesLinear(t *testing.T) {
	for _, span := range []int64{bisectSpan, 0, 300} {
		t.Run(fmt.Sprintf("span=%d", span), func(t *testing.T) {
			defer func(old int64) { bisectSpan = old }(bisectSpan)
			bisectSpan = span
			r := rand.New(rand.NewPCG(uint64(span), 7))
			s := OpenLocalStore(t.TempDir())
			threadObject(t, s)
			path := filepath.Join(s.Dir(), "sessions", "s", "items", "t.jsonl")
			for round := range 120 {
				n := r.IntN(60)
				if round%10 == 0 {
					n = r.IntN(600)
				}
				stamps := randomThread(t, r, path, n)
				all, err := readLinear(path)
				if err != nil {
					t.Fatal(err)
				}
				for range 40 {
					q := ItemQuery{Ascending: r.IntN(2) == 0, CreatedSince: randomBound(r, stamps), CreatedBefore: randomBound(r, stamps)}
					size := 1 + r.IntN(5)
					s.SetPageSize(size)
					got, err := s.ListItems(t.Context(), "s", "t", q)
					if err != nil {
						t.Fatal(err)
					}
					want, err := pageLinear(all, q, size)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("round %d (%d items), query %+v, page %d:\n got %v\nwant %v", round, n, q, size, itemIDs(got), itemIDs(want))
					}
				}
				// A tail through pages of 1..5 reads what it reads over the
				// reference, from the start and from a random cursor.
				s.SetPageSize(1 + r.IntN(5))
				c := &localClient{store: s, cfg: Config{SessionID: "s", UserID: "u"}}
				ref := &linearClient{localClient: *c, items: all}
				from := Cursor{}
				if len(stamps) > 0 && r.IntN(2) == 0 {
					from.CreatedAt = FormatTime(stamps[r.IntN(len(stamps))])
				}
				got, gotCur, _, err := Tail(t.Context(), c, "t", from, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				want, wantCur, _, err := Tail(t.Context(), ref, "t", from, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotCur, wantCur) {
					t.Fatalf("round %d: tail from %+v read %v to %+v, over the reference %v to %+v", round, from, itemIDs(got), gotCur, itemIDs(want), wantCur)
				}
			}
		})
	}
}

// linearClient serves ListItems from the reference, over the items of the
// thread file read once.
type linearClient struct {
	localClient
	items []Item
}

func (c *linearClient) ListItems(ctx context.Context, alias string, q ItemQuery) (Page, error) {
	items, err := pageLinear(c.items, q, int(c.store.pageSize.Load()))
	return Page{Items: items, Date: time.Now()}, err
}

func itemIDs(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// TestListItemsOutOfOrder: a thread file edited out of created_at order.
// Where the search meets the disorder it says so, and ListItems falls back
// to the whole-file scan.
func TestListItemsOutOfOrder(t *testing.T) {
	defer func(old int64) { bisectSpan = old }(bisectSpan)
	bisectSpan = 0
	s := OpenLocalStore(t.TempDir())
	threadObject(t, s)
	s.SetPageSize(4)
	path := filepath.Join(s.Dir(), "sessions", "s", "items", "t.jsonl")
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	for i, us := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 10, 11, 12} { // the 10th line is older
		line, _ := json.Marshal(Item{ID: fmt.Sprintf("itm_%02d", i), CreatedAt: FormatTime(base.Add(time.Duration(us) * time.Microsecond)),
			Content: []Block{{Type: "text", Text: "x"}}})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []ItemQuery{
		{Ascending: true, CreatedSince: FormatTime(base.Add(7 * time.Microsecond))},
		{Ascending: true, CreatedSince: FormatTime(base.Add(time.Microsecond))},
		{CreatedBefore: FormatTime(base.Add(11 * time.Microsecond))},
		{CreatedSince: FormatTime(base.Add(1 * time.Microsecond))},
		{Ascending: true},
		{},
	} {
		want, err := listItemsLinear(path, q, 4)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.ListItems(t.Context(), "s", "t", q)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: got %v, %v; want %v", q, itemIDs(got), err, itemIDs(want))
		}
	}
	// The search itself reports the disorder it meets.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	since := base.Add(7 * time.Microsecond)
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listSorted(f, st.Size(), true, itemBounds{since: since, hasSince: true}, 4, decodeListed); !errors.Is(err, errUnsorted) {
		t.Errorf("ascending past the older line: %v, want errUnsorted", err)
	}
}

// writeBenchThread writes n items as Post would, without Post's fsyncs.
func writeBenchThread(b testing.TB, path string, n int) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range n {
		line, err := json.Marshal(Item{
			ID: fmt.Sprintf("itm_%020x", i), CreatedAt: FormatTime(ts.Add(time.Duration(i) * time.Millisecond)), UserID: "usr_local",
			Content:  []Block{{Type: "text", Text: "a line of agent output, as long as a typical brief"}},
			Metadata: json.RawMessage(`{"kind":"agent_text","emission_id":"3f9a0c1d:` + fmt.Sprint(i) + `"}`),
		})
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLocalTail tails a 20,000-item thread from the start in pages of
// 100, as the end-of-turn scan after a long relay does.
func BenchmarkLocalTail(b *testing.B) {
	const items = 20000
	s := OpenLocalStore(b.TempDir())
	threadObject(b, s)
	writeBenchThread(b, filepath.Join(s.Dir(), "sessions", "s", "items", "t.jsonl"), items)
	s.SetPageSize(100)
	c := &localClient{store: s, cfg: Config{SessionID: "s", UserID: "u"}}
	for b.Loop() {
		got, _, _, err := Tail(b.Context(), c, "t", Cursor{}, Limits{})
		if err != nil || len(got) != items {
			b.Fatalf("tail read %d items, %v", len(got), err)
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// TestListItemsCost: a page of a 20,000-item thread reads a small part of
// the file wherever its bounds put it, in either order.
func TestListItemsCost(t *testing.T) {
	const items = 20000
	path := filepath.Join(t.TempDir(), "t.jsonl")
	writeBenchThread(t, path, items)
	all, err := readLinear(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	at := func(i int) string { return all[i].CreatedAt }
	for _, q := range []ItemQuery{
		{Ascending: true},
		{Ascending: true, CreatedSince: at(10000)},
		{Ascending: true, CreatedSince: at(19950)},
		{Ascending: true, CreatedSince: at(items - 1)},
		{Ascending: true, CreatedSince: at(5), CreatedBefore: at(7)},
		{Ascending: true, CreatedBefore: at(3)},
		{},
		{CreatedBefore: at(12345)},
		{CreatedSince: at(19990)},
		{CreatedSince: at(100), CreatedBefore: at(102)},
	} {
		var b itemBounds
		if q.CreatedSince != "" {
			b.since, b.hasSince = must(ParseTime(q.CreatedSince)), true
		}
		if q.CreatedBefore != "" {
			b.before, b.hasBefore = must(ParseTime(q.CreatedBefore)), true
		}
		cr := &countingReader{r: f}
		got, err := listSorted(cr, st.Size(), q.Ascending, b, 100, decodeListed)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := pageLinear(all, q, 100)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: got %v, want %v", q, itemIDs(got), itemIDs(want))
		}
		if cr.n > st.Size()/10 {
			t.Errorf("%+v: read %d bytes of %d", q, cr.n, st.Size())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// threadObject stores the envelope of thread "t" of session "s": the
// store lists and takes items only for a thread.
func threadObject(tb testing.TB, s *LocalStore) {
	tb.Helper()
	if err := s.Upload(tb.Context(), "s", "t", json.RawMessage(`{"type":"thread"}`)); err != nil {
		tb.Fatal(err)
	}
}
