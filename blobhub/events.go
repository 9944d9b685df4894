package blobhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// The session's change feed (docs/wire.md, "the events feed"): BlobHub
// records an event for every object written or deleted and every item
// posted, stamped by its own clock, and list_session_events pages them.

// CmdListEvents names list_session_events in errors and the request log.
const CmdListEvents = "list_session_events"

// Event types. The lifecycle events carry no object.
const (
	EventObjectModified = "session_object_modified"
	EventObjectDeleted  = "session_object_deleted"
	EventItemPosted     = "session_thread_item_posted"
	EventClosing        = "session_closing"
	EventClosed         = "session_closed"
	EventDeleting       = "session_deleting"
	EventDeleted        = "session_deleted"
)

// The pages of every list command: DefaultListLimit rows without a
// limit, at most MaxListLimit.
const (
	MaxListLimit     = 1000
	DefaultListLimit = 10
)

// Event is one entry of the feed.
type Event struct {
	Type      string       `json:"type"`
	CreatedAt string       `json:"created_at"`
	Object    *EventObject `json:"session_object,omitempty"`
}

// EventObject is the object an event is about: its alias and its value's
// type (so a reader can skip what is not a thread without a download).
type EventObject struct {
	Alias string `json:"alias"`
	Type  string `json:"type,omitempty"`
}

// EventQuery selects a page of the feed. The bounds are strict, as the
// API's are; Cursor is the opaque cursor of the page before ("" for the
// first); Limit 0 leaves the page size to the server (ten rows).
type EventQuery struct {
	Ascending     bool
	CreatedSince  string
	CreatedBefore string
	Cursor        string
	Limit         int
}

// EventPage is one answer of ListEvents.
type EventPage struct {
	Events []Event
	// Cursor asks for the next page; "" on the last.
	Cursor string
	// Date is the server's clock when it answered (the HTTP Date header,
	// the local store's clock); zero when the answer did not say.
	Date time.Time
}

// ListEvents: list_session_events {ascending, created_since, created_before,
// cursor, limit} answers {"session_events": […], "cursor"}. Nothing is sent
// without a value: the API refuses a null.
func (c *httpClient) ListEvents(ctx context.Context, q EventQuery) (EventPage, error) {
	f := map[string]any{"ascending": q.Ascending}
	for k, v := range map[string]string{"created_since": q.CreatedSince, "created_before": q.CreatedBefore, "cursor": q.Cursor} {
		if v != "" {
			f[k] = v
		}
	}
	if q.Limit > 0 {
		f["limit"] = q.Limit
	}
	b, date, err := c.sessionDo(ctx, CmdListEvents, "", f)
	if err != nil {
		return EventPage{}, err
	}
	var ans struct {
		Events []Event `json:"session_events"`
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Events == nil {
		return EventPage{}, opErr(CmdListEvents, "", errors.New(`answer carries no "session_events" list`))
	}
	p := EventPage{Events: ans.Events, Date: date}
	if ans.Cursor != nil {
		p.Cursor = *ans.Cursor
	}
	return p, nil
}

// ListEvents answers with the local clock as the page's Date: the store
// stamps its events with it.
func (c *localClient) ListEvents(ctx context.Context, q EventQuery) (EventPage, error) {
	if err := c.done(ctx, CmdListEvents, ""); err != nil {
		return EventPage{}, err
	}
	p, err := c.store.ListEvents(ctx, c.cfg.SessionID, q)
	return p, opErr(CmdListEvents, "", err)
}

// SetClockOffset makes the store's clock run d ahead of the host's (behind
// for a negative d): a server whose clock disagrees with the host's (a
// test switch). Items, objects and events are all stamped by it.
func (s *LocalStore) SetClockOffset(d time.Duration) { s.offset.Store(int64(d)) }

// Now is the store's clock (the host's, unless SetClockOffset moved it).
func (s *LocalStore) Now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }

// eventsPath is the session's feed: one event a line, appended under the
// session lock with the session clock's stamps, so sorted by created_at.
func eventsPath(sd string) string { return filepath.Join(sd, "events.jsonl") }

// withSessionLock runs fn under the session's flock (see post).
func withSessionLock(sd string, fn func() error) error {
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return err
	}
	lk := flock.New(filepath.Join(sd, "session.lock"), flock.SetPermissions(0o600))
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("local store: lock session: %w", err)
	}
	defer lk.Close()
	return fn()
}

// appendEvent records one event; called under the session lock. stamp ""
// takes the next stamp of the session clock.
func (s *LocalStore) appendEvent(sd, typ, alias, objType, stamp string) error {
	if stamp == "" {
		var err error
		if stamp, err = s.nextStamp(filepath.Join(sd, "clock")); err != nil {
			return err
		}
	}
	line, err := json.Marshal(Event{Type: typ, CreatedAt: stamp, Object: &EventObject{Alias: alias, Type: objType}})
	if err != nil {
		return err
	}
	return appendLine(eventsPath(sd), line)
}

// AppendEvent records an event for a change the store does not hold (a
// test hub's made-up items), stamped by the session clock.
func (s *LocalStore) AppendEvent(sessionID, typ, alias, objType string) error {
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return err
	}
	return withSessionLock(sd, func() error { return s.appendEvent(sd, typ, alias, objType, "") })
}

// decodeEvent reads one line of the feed: a line torn by a crash, or one
// without a type or a readable created_at, is skipped.
func decodeEvent(line []byte) (Event, time.Time, bool) {
	var e Event
	if len(strings.TrimSpace(string(line))) == 0 || json.Unmarshal(line, &e) != nil || e.Type == "" {
		return Event{}, time.Time{}, false
	}
	t, err := ParseTime(e.CreatedAt)
	if err != nil {
		return Event{}, time.Time{}, false
	}
	return e, t, true
}

// ListEvents answers one page of the session's feed as the API does: the
// bounds strict, DefaultListLimit rows without a limit, at most
// MaxListLimit, oldest first when ascending. The cursor names the last
// event served by its created_at and how many events of that instant were
// served, so a page boundary between events of one instant loses none. A
// session never written is not found; one without events answers none.
func (s *LocalStore) ListEvents(ctx context.Context, sessionID string, q EventQuery) (EventPage, error) {
	bad := func(msg string) error {
		return &APIError{Status: http.StatusBadRequest, Code: "invalid_request_body", Message: msg}
	}
	limit := DefaultListLimit
	if q.Limit != 0 {
		limit = q.Limit
	}
	if limit < 1 || limit > MaxListLimit {
		return EventPage{}, bad(fmt.Sprintf("limit must be 1..%d", MaxListLimit))
	}
	var b itemBounds
	var err error
	if q.CreatedSince != "" {
		if b.since, err = ParseTime(q.CreatedSince); err != nil {
			return EventPage{}, bad("created_since: " + err.Error())
		}
		b.hasSince = true
	}
	if q.CreatedBefore != "" {
		if b.before, err = ParseTime(q.CreatedBefore); err != nil {
			return EventPage{}, bad("created_before: " + err.Error())
		}
		b.hasBefore = true
	}
	// Past the cursor's instant, less the events of it already served.
	var at time.Time
	skip := 0
	if q.Cursor != "" {
		ts, n, ok := strings.Cut(q.Cursor, "#")
		if at, err = ParseTime(ts); err == nil && ok {
			skip, err = strconv.Atoi(n)
		}
		if err != nil || !ok || skip < 0 {
			return EventPage{}, bad("cursor is not one this API gave")
		}
		if q.Ascending {
			b.since, b.hasSince = at.Add(-time.Microsecond), true
		} else {
			b.before, b.hasBefore = at.Add(time.Microsecond), true
		}
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return EventPage{}, err
	}
	if _, err := os.Stat(sd); errors.Is(err, fs.ErrNotExist) {
		return EventPage{}, notFound("session")
	}
	page := EventPage{Events: []Event{}, Date: s.Now()}
	f, err := os.Open(eventsPath(sd))
	if errors.Is(err, fs.ErrNotExist) {
		return page, nil
	}
	if err != nil {
		return EventPage{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return EventPage{}, err
	}
	// One more than the page, to know whether another follows.
	evs, err := listSorted(f, st.Size(), q.Ascending, b, skip+limit+1, decodeEvent)
	if errors.Is(err, errUnsorted) {
		evs, err = listLinear(f, q.Ascending, b, skip+limit+1, decodeEvent)
	}
	if err != nil {
		return EventPage{}, err
	}
	for skip > 0 && len(evs) > 0 {
		if t, _ := ParseTime(evs[0].CreatedAt); !t.Equal(at) {
			break
		}
		evs, skip = evs[1:], skip-1
	}
	if len(evs) > limit {
		evs = evs[:limit]
		last := evs[len(evs)-1].CreatedAt
		lt, _ := ParseTime(last)
		n := 0
		for i := len(evs) - 1; i >= 0; i-- {
			if t, _ := ParseTime(evs[i].CreatedAt); !t.Equal(lt) {
				break
			}
			n++
		}
		if q.Cursor != "" && lt.Equal(at) {
			// The whole page is of the cursor's instant: count the events
			// of it served before too.
			prev, _ := strconv.Atoi(strings.SplitN(q.Cursor, "#", 2)[1])
			n += prev
		}
		page.Cursor = fmt.Sprintf("%s#%d", FormatTime(lt), n)
	}
	page.Events = evs
	return page, nil
}
