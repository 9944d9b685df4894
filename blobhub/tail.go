package blobhub

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Cursor is how far a thread has been read: the newest created_at seen and
// every id seen at exactly that instant (thread.yaml's scanned).
type Cursor struct {
	CreatedAt string   `yaml:"created_at" json:"created_at"`
	IDs       []string `yaml:"ids" json:"ids"`
}

// maxTailPages stops a server that keeps answering new pages forever.
const maxTailPages = 100000

// Tail reads alias's items forward from the cursor (SPEC §4.1). Every query,
// the first one too, asks ascending with created_since = cursor − 1µs and
// drops the ids already seen at that instant, so items that share a
// timestamp with the cursor or straddle a page boundary are neither lost nor
// repeated. It ends on an empty page or a page of only seen ids, and returns
// the new items in order with the advanced cursor. An empty cursor reads
// from the beginning.
//
// The API has no page cursor. When a whole page of already-seen items sits at
// the cursor's instant (more items share it than the server pages), the tail
// asks once more strictly after that instant, so it never stalls there;
// items of that one instant beyond the page can still be missed (BlobHub
// stamps microseconds, so this does not occur in practice). A page of one
// seen item — the idle path — costs no extra request.
func Tail(ctx context.Context, c Client, alias string, from Cursor) ([]Item, Cursor, error) {
	cur := Cursor{CreatedAt: from.CreatedAt, IDs: slices.Clone(from.IDs)}
	var curT time.Time
	if cur.CreatedAt != "" {
		t, err := ParseTime(cur.CreatedAt)
		if err != nil {
			return nil, from, fmt.Errorf("blobhub: tail %q: cursor: %w", alias, err)
		}
		curT = t
	}
	// seen holds the ids at curT, plus every id returned by this tail, so a
	// server that repeats an item is not believed twice.
	seen := make(map[string]bool, len(cur.IDs))
	for _, id := range cur.IDs {
		seen[id] = true
	}
	var out []Item
	strict := false // the next query starts strictly after the cursor
	for range maxTailPages {
		q := ItemQuery{Ascending: true}
		if cur.CreatedAt != "" {
			q.CreatedSince = FormatTime(curT.Add(-time.Microsecond))
			if strict {
				q.CreatedSince = FormatTime(curT)
			}
		}
		page, err := c.ListItems(ctx, alias, q)
		if err != nil {
			return out, cur, err
		}
		fresh := 0
		for _, it := range page {
			if seen[it.ID] {
				continue
			}
			t, err := ParseTime(it.CreatedAt)
			if err != nil {
				return out, cur, fmt.Errorf("blobhub: tail %q: item %s: %w", alias, it.ID, err)
			}
			if cur.CreatedAt != "" && t.Before(curT) {
				continue // behind the cursor: read before
			}
			seen[it.ID] = true
			fresh++
			out = append(out, it)
			if cur.CreatedAt == "" || t.After(curT) {
				curT = t
				cur = Cursor{CreatedAt: it.CreatedAt, IDs: []string{it.ID}}
			} else {
				cur.IDs = append(cur.IDs, it.ID)
			}
		}
		if fresh == 0 {
			if strict || len(page) < 2 || !allAt(page, curT) {
				return out, cur, nil
			}
			strict = true
			continue
		}
		strict = false
	}
	return out, cur, fmt.Errorf("blobhub: tail %q: more than %d pages; the server keeps answering new items", alias, maxTailPages)
}

// allAt reports whether every item of page was created at t.
func allAt(page []Item, t time.Time) bool {
	for _, it := range page {
		if pt, err := ParseTime(it.CreatedAt); err != nil || !pt.Equal(t) {
			return false
		}
	}
	return true
}
