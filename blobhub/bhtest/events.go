package bhtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
)

// The session events the test hub records, as the API's events feed
// (list_session_events) serves them to blobhub-worker: docs/wire.md, "How
// the daemon learns what changed". bhw-run reads no events; the feed is
// here so the real daemon can run against the test hub.
const (
	EventObjectModified = "session_object_modified"
	EventObjectDeleted  = "session_object_deleted"
	EventItemPosted     = "session_thread_item_posted"
)

// event is one entry of the feed.
type event struct {
	Type          string       `json:"type"`
	CreatedAt     string       `json:"created_at"`
	SessionObject *eventObject `json:"session_object,omitempty"`
}

type eventObject struct {
	Alias string `json:"alias"`
	Type  string `json:"type"`
}

// maxEvents bounds the feed a test hub keeps: the oldest go first.
const maxEvents = 100000

// note records an event about alias, whose value has type objType, with
// a created_at after every earlier event's (the feed's cursor is strict).
func (s *Server) note(typ, alias, objType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Now().UTC()
	if n := len(s.events); n > 0 {
		if last, err := blobhub.ParseTime(s.events[n-1].CreatedAt); err == nil && !at.After(last) {
			at = last.Add(time.Microsecond)
		}
	}
	s.events = append(s.events, event{Type: typ, CreatedAt: blobhub.FormatTime(at), SessionObject: &eventObject{Alias: alias, Type: objType}})
	if len(s.events) > maxEvents {
		s.events = slices.Delete(s.events, 0, len(s.events)-maxEvents)
	}
}

// valueType is the type of an object's value ("thread", "artifact", …).
func valueType(v json.RawMessage) string {
	var o struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(v, &o)
	return o.Type
}

// Events counts the events of the feed of type typ ("" for all).
func (s *Server) Events(typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if typ == "" || e.Type == typ {
			n++
		}
	}
	return n
}

// listEvents answers list_session_events: events after created_since and
// before created_before (both strict), oldest first when ascending, a page
// of limit, the cursor the created_at of the page's last event.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request, req request, limit int) {
	s.mu.Lock()
	evs := slices.Clone(s.events)
	s.mu.Unlock()
	ascending := req.Ascending != nil && *req.Ascending
	since, before := req.CreatedSince, req.CreatedBefore
	if req.Cursor != nil {
		if ascending {
			since = *req.Cursor
		} else {
			before = *req.Cursor
		}
	}
	evs = slices.DeleteFunc(evs, func(e event) bool {
		return since != "" && e.CreatedAt <= since || before != "" && e.CreatedAt >= before
	})
	if !ascending {
		slices.Reverse(evs)
	}
	var next any // null on the last page
	if len(evs) > limit {
		evs = evs[:limit]
		next = evs[limit-1].CreatedAt
	}
	s.answer(w, r, req.Command, http.StatusOK, map[string]any{"session_events": evs, "cursor": next})
}
