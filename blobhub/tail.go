package blobhub

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Cursor is how far a thread has been read (thread.yaml's scanned): the
// newest created_at read that was not ahead of the server's present, every
// id read at exactly that instant, the created_at of the item read before
// that instant (where the next read starts; empty when none was, or the
// cursor was written before it was kept), and the items read while they
// were ahead of the present (see Tail). Every time is the server's string,
// as it spelled it.
type Cursor struct {
	CreatedAt string   `yaml:"created_at" json:"created_at"`
	IDs       []string `yaml:"ids" json:"ids"`
	Since     string   `yaml:"since,omitempty" json:"since,omitempty"`
	Ahead     []Stamp  `yaml:"ahead,omitempty" json:"ahead,omitempty"`
}

// Stamp names one item by its id and created_at.
type Stamp struct {
	ID        string `yaml:"id" json:"id"`
	CreatedAt string `yaml:"created_at" json:"created_at"`
}

// Limits bound what one tail reads. A zero field is no bound.
type Limits struct {
	Items int   // items read
	Bytes int64 // their ItemSize summed; the first item is read whatever its size
}

// TailLimits is what one run reads of a thread at most; the next run reads
// on from where it stopped. 10,000 items cover the longest relayed turn
// seen; 32 MiB bounds the memory whatever the items hold.
var TailLimits = Limits{Items: 10000, Bytes: 32 << 20}

// MaxAhead bounds Cursor.Ahead: the items read ahead of the server's
// present that a cursor remembers. An item ahead of the present beyond
// that many is left for a later tail (the present catches up with the
// oldest of them, and they leave the list).
const MaxAhead = 100

// presentSlack is how far past a page's Date an item may be stamped and
// still count as present: an HTTP Date has whole seconds, so an item
// stamped 0.9 s before the answer may carry a time after it.
const presentSlack = time.Second

// ItemSize is what an item costs a tail's byte bound: the bytes of its
// fields as decoded.
func ItemSize(it Item) int64 {
	n := len(it.ID) + len(it.CreatedAt) + len(it.UserID) + len(it.ParentID) + len(it.Metadata)
	for _, b := range it.Content {
		n += len(b.Type) + len(b.Text) + len(b.JSON)
	}
	return int64(n)
}

// Tail reads alias's items forward from the cursor and returns them in
// order with the cursor after the last one; more says it stopped at lim
// (or at MaxAhead) before the end, and the next tail from the returned
// cursor reads on, neither losing nor repeating an item.
func Tail(ctx context.Context, c Client, alias string, from Cursor, lim Limits) (items []Item, next Cursor, more bool, err error) {
	next, more, err = TailEach(ctx, c, alias, from, lim, func(it Item) bool {
		items = append(items, it)
		return true
	})
	return items, next, more, err
}

// TailEach is Tail handing each new item to fn instead of keeping it; fn
// returns false to stop after that item (more is then true).
//
// Paging: the tail pages by created_at, not by the API's page cursor, and
// sends as created_since only a created_at the server gave it, spelled as
// the server spelled it (as blobhub-worker does), never a time it computed.
// created_since is strict, so to read the items that share the position's
// instant every query, the first one too, asks ascending from the item
// read before that instant (the cursor's Since) and drops the ids already
// seen at the position: items that share a timestamp with the position or
// straddle a page boundary are neither lost nor repeated. A cursor without
// Since (the thread's first instant, or one written before Since was kept)
// first asks for the newest item before the position (one descending page
// created_before it); when there is none, it reads from the thread's
// start. It ends on an empty page or a page of only seen ids. When a whole
// page of seen items sits at one instant (more items share it than the
// server pages), it asks once more strictly after that instant (its own
// created_at), so it never stalls there; items of that one instant beyond
// the page can still be missed (BlobHub stamps microseconds, so this does
// not occur in practice). A page of one seen item — the idle path — costs
// no extra request.
//
// The server's present: an item's created_at never moves the cursor past
// the clock of the server that answered. The present of a page is its
// Date (the HTTP answer's Date header, the local store's clock; the local
// clock when the answer has none) plus presentSlack. An item stamped after
// the present of the page that carried it (a server whose clock jumped to
// 2099 for a moment) is read and returned once, and recorded in the
// cursor's Ahead instead of moving CreatedAt there, so the items the right
// clock stamps afterwards (before 2099) are still after the cursor. Every
// later tail drops the ids in Ahead; an Ahead item leaves the list once the
// cursor reaches its time (when it is no longer ahead of a page's present,
// or the cursor passes it). At most MaxAhead items are kept there: a tail
// that meets one more item ahead of the present stops before it.
func TailEach(ctx context.Context, c Client, alias string, from Cursor, lim Limits, fn func(Item) bool) (next Cursor, more bool, err error) {
	tl, err := newTailer(from)
	if err != nil {
		return from, false, fmt.Errorf("blobhub: tail %q: cursor: %w", alias, err)
	}
	if tl.hasPos && tl.prev == "" {
		if err := tl.lookUpPrev(ctx, c, alias); err != nil {
			return from, false, err
		}
	}
	read, size := 0, int64(0)
	strict := false // the next query starts strictly after pos
	// Pages that read nothing new but move the position over seen items
	// (Ahead items, a repeated id) are bounded: a server repeating seen ids
	// at ever later times cannot keep the tail going.
	idle, maxIdle := 0, len(from.IDs)+len(from.Ahead)+2
	for {
		if lim.Items > 0 && read >= lim.Items || lim.Bytes > 0 && size >= lim.Bytes {
			return tl.cursor(), true, nil // spent: no page read to find out
		}
		q := ItemQuery{Ascending: true}
		var bound time.Time // the query admits nothing before it
		if tl.hasPos {
			bound = tl.pos
			q.CreatedSince = tl.prev // "": nothing before pos, read from the start
			if strict {
				bound = tl.pos.Add(time.Microsecond)
				q.CreatedSince = tl.posAt
			}
		}
		page, err := c.ListItems(ctx, alias, q)
		if err != nil {
			return tl.cursor(), false, err
		}
		present := page.Date
		if present.IsZero() {
			present = time.Now()
		}
		present = present.Add(presentSlack)
		fresh, moved := 0, false
		for _, it := range page.Items {
			t, err := ParseTime(it.CreatedAt)
			if err != nil {
				return tl.cursor(), false, fmt.Errorf("blobhub: tail %q: item %s: %w", alias, it.ID, err)
			}
			tl.saw(it, t)
			if tl.hasPos && t.Before(bound) {
				continue // outside the query: read before
			}
			if tl.seen[it.ID] {
				if _, ok := tl.ahead[it.ID]; ok && !t.After(present) {
					tl.advance(it, t) // the present caught up with it
				}
				moved = tl.move(it, t) || moved
				continue
			}
			sz := ItemSize(it)
			ahead := t.After(present)
			if lim.Items > 0 && read >= lim.Items || lim.Bytes > 0 && read > 0 && size+sz > lim.Bytes ||
				ahead && len(tl.ahead) >= MaxAhead {
				return tl.cursor(), true, nil
			}
			read, size, fresh = read+1, size+sz, fresh+1
			tl.seen[it.ID] = true
			if ahead {
				tl.ahead[it.ID] = t
				tl.cur.Ahead = append(tl.cur.Ahead, Stamp{ID: it.ID, CreatedAt: it.CreatedAt})
			} else {
				tl.advance(it, t)
			}
			moved = tl.move(it, t) || moved
			if !fn(it) {
				return tl.cursor(), true, nil
			}
		}
		switch {
		case fresh > 0:
			strict, idle = false, 0
		case moved:
			if idle++; idle > maxIdle {
				return tl.cursor(), true, nil
			}
			strict = false
		case strict || len(page.Items) < 2 || !allAt(page.Items, tl.pos):
			return tl.cursor(), false, nil
		default:
			strict = true
		}
	}
}

// tailer is one tail's state: the cursor it returns (never past the
// present) and the position it reads from (the newest created_at met,
// ahead of the present or not).
type tailer struct {
	cur    Cursor
	curT   time.Time
	hasCur bool
	ahead  map[string]time.Time // cur.Ahead
	seen   map[string]bool      // cur.IDs, cur.Ahead and every id this tail read
	pos    time.Time
	hasPos bool
	posAt  string // pos as the server spelled it
	prev   string // where a query for pos starts: a created_at the server gave before pos ("": the thread's start)
	// The newest created_at the server gave in this tail, and the newest
	// one it gave before that instant (at first the cursor's Since).
	last, beforeLast string
	lastT            time.Time
	hasLast          bool
}

func newTailer(from Cursor) (*tailer, error) {
	tl := &tailer{
		cur:   Cursor{CreatedAt: from.CreatedAt, IDs: slices.Clone(from.IDs)},
		ahead: map[string]time.Time{},
		seen:  map[string]bool{},
	}
	if from.CreatedAt != "" {
		t, err := ParseTime(from.CreatedAt)
		if err != nil {
			return nil, err
		}
		tl.curT, tl.hasCur, tl.pos, tl.hasPos = t, true, t, true
		tl.cur.Since, tl.posAt, tl.prev, tl.beforeLast = from.Since, from.CreatedAt, from.Since, from.Since
	}
	for _, id := range from.IDs {
		tl.seen[id] = true
	}
	for _, a := range from.Ahead {
		t, err := ParseTime(a.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("ahead item %s: %w", a.ID, err)
		}
		if tl.hasCur && t.Before(tl.curT) {
			continue // behind the cursor: no query returns it again
		}
		tl.ahead[a.ID] = t
		tl.seen[a.ID] = true
		tl.cur.Ahead = append(tl.cur.Ahead, a)
	}
	return tl, nil
}

// advance moves the cursor to an item created at t, not ahead of the
// present; Ahead items the cursor reaches leave the list (those at its
// instant join IDs). The item is not in IDs: it is new, or it was in Ahead.
func (tl *tailer) advance(it Item, t time.Time) {
	switch {
	case !tl.hasCur || t.After(tl.curT):
		if tl.hasLast && t.Equal(tl.lastT) {
			// Else (an item ahead of the present met before it) the
			// cursor keeps its Since: earlier, still a server's time.
			tl.cur.Since = tl.beforeLast
		}
		tl.curT, tl.hasCur = t, true
		tl.cur.CreatedAt, tl.cur.IDs = it.CreatedAt, []string{it.ID}
	case t.Equal(tl.curT):
		tl.cur.IDs = append(tl.cur.IDs, it.ID)
	}
	if len(tl.cur.Ahead) == 0 {
		return
	}
	kept := tl.cur.Ahead[:0]
	for _, a := range tl.cur.Ahead {
		at := tl.ahead[a.ID]
		switch {
		case at.After(tl.curT):
			kept = append(kept, a)
			continue
		case at.Equal(tl.curT) && !slices.Contains(tl.cur.IDs, a.ID):
			tl.cur.IDs = append(tl.cur.IDs, a.ID)
		}
		delete(tl.ahead, a.ID)
	}
	tl.cur.Ahead = kept
}

// move puts the read position at it, created at t, if t is later; it
// reports a move.
func (tl *tailer) move(it Item, t time.Time) bool {
	if tl.hasPos && !t.After(tl.pos) {
		return false
	}
	tl.prev = tl.beforeLast // saw(it) came first: it is the newest met
	tl.pos, tl.hasPos, tl.posAt = t, true, it.CreatedAt
	return true
}

// saw notes an item a page held, created at t: every created_since the
// tail sends is one of these, or the cursor's Since, as the server spelled
// it. An item at pos gives pos the server's spelling.
func (tl *tailer) saw(it Item, t time.Time) {
	if !tl.hasLast || t.After(tl.lastT) {
		if tl.hasLast {
			tl.beforeLast = tl.last
		}
		tl.last, tl.lastT, tl.hasLast = it.CreatedAt, t, true
	}
	if tl.hasPos && t.Equal(tl.pos) {
		tl.posAt = it.CreatedAt
	}
}

// lookUpPrev finds the created_at of the newest item before the position
// (none: prev stays empty, and the read starts at the thread's start). A
// cursor that was written without Since needs it, and so does one at the
// thread's first instant, which costs this one more page.
func (tl *tailer) lookUpPrev(ctx context.Context, c Client, alias string) error {
	page, err := c.ListItems(ctx, alias, ItemQuery{CreatedBefore: tl.posAt})
	if err != nil {
		return err
	}
	for _, it := range page.Items {
		t, err := ParseTime(it.CreatedAt)
		if err != nil {
			return fmt.Errorf("blobhub: tail %q: item %s: %w", alias, it.ID, err)
		}
		if t.Before(tl.pos) {
			tl.prev, tl.beforeLast = it.CreatedAt, it.CreatedAt
			break
		}
	}
	if tl.cur.Since == "" && tl.curT.Equal(tl.pos) {
		tl.cur.Since = tl.prev
	}
	return nil
}

// cursor is the cursor to return: a copy, Ahead nil when empty.
func (tl *tailer) cursor() Cursor {
	c := Cursor{CreatedAt: tl.cur.CreatedAt, IDs: slices.Clone(tl.cur.IDs), Since: tl.cur.Since}
	if len(tl.cur.Ahead) > 0 {
		c.Ahead = slices.Clone(tl.cur.Ahead)
	}
	return c
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
