package bhtest_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestEventsWire: list_session_events as the API serves it (docs/wire.md):
// an event for every upload, delete and post, in the order they were made,
// ten rows without a limit, the opaque cursor to the end, created_since
// strict, a limit over 1000 refused.
func TestEventsWire(t *testing.T) {
	srv := bhtest.New(t)
	srv.Thread("t")
	srv.Put("note", `{"type":"note"}`)
	for i := range 11 {
		srv.PersonPost("t", fmt.Sprintf("m%d", i))
	}
	srv.Delete("note")

	type answer struct {
		Events []blobhub.Event `json:"session_events"`
		Cursor *string         `json:"cursor"`
	}
	query := func(body string) (int, answer) {
		t.Helper()
		st, m := post(t, srv, bhtest.RunnerKey, "query", body)
		var a answer
		_ = json.Unmarshal(m["session_events"], &a.Events)
		_ = json.Unmarshal(m["cursor"], &a.Cursor)
		return st, a
	}
	st, first := query(`{"command":"list_session_events","session_id":"ses_test","ascending":true}`)
	if st != 200 || len(first.Events) != 10 || first.Cursor == nil {
		t.Fatalf("first page: %d, %d events, cursor %v; want 10 rows and a cursor", st, len(first.Events), first.Cursor)
	}
	if e := first.Events[0]; e.Type != blobhub.EventObjectModified || e.Object == nil || e.Object.Alias != "t" || e.Object.Type != "thread" {
		t.Errorf("first event %+v, want the thread's upload", e)
	}
	if e := first.Events[2]; e.Type != blobhub.EventItemPosted || e.Object.Alias != "t" {
		t.Errorf("third event %+v, want an item posted to t", e)
	}
	_, rest := query(fmt.Sprintf(`{"command":"list_session_events","session_id":"ses_test","ascending":true,"cursor":%q}`, *first.Cursor))
	if len(rest.Events) != 4 || rest.Cursor != nil {
		t.Fatalf("second page: %d events, cursor %v; want the last 4 and no cursor", len(rest.Events), rest.Cursor)
	}
	if e := rest.Events[3]; e.Type != blobhub.EventObjectDeleted || e.Object.Alias != "note" || e.Object.Type != "note" {
		t.Errorf("last event %+v, want the note's deletion", e)
	}
	all := append(first.Events, rest.Events...)
	for i := 1; i < len(all); i++ {
		a, _ := blobhub.ParseTime(all[i-1].CreatedAt)
		b, _ := blobhub.ParseTime(all[i].CreatedAt)
		if !a.Before(b) {
			t.Errorf("events %d and %d are not in created_at order: %s, %s", i-1, i, all[i-1].CreatedAt, all[i].CreatedAt)
		}
	}
	// Strict: from the 13th event's stamp on, only the 14th.
	_, since := query(fmt.Sprintf(`{"command":"list_session_events","session_id":"ses_test","ascending":true,"created_since":%q,"limit":1000}`, all[12].CreatedAt))
	if len(since.Events) != 1 || !reflect.DeepEqual(since.Events[0], all[13]) {
		t.Errorf("created_since the 13th: %+v, want only the 14th", since.Events)
	}
	// Newest first by default: the head of the feed.
	_, head := query(`{"command":"list_session_events","session_id":"ses_test","limit":1}`)
	if len(head.Events) != 1 || !reflect.DeepEqual(head.Events[0], all[13]) {
		t.Errorf("head: %+v, want the newest event", head.Events)
	}
	if st, _ := query(`{"command":"list_session_events","session_id":"ses_test","limit":1001}`); st != 400 {
		t.Errorf("limit 1001: status %d, want 400", st)
	}
}

// TestEventsSameInstant: events sharing one created_at across a page
// boundary are all served once, ascending and descending.
func TestEventsSameInstant(t *testing.T) {
	srv := bhtest.New(t)
	srv.Thread("t")
	srv.EqualTimestamps(true)
	for i := range 7 {
		srv.PersonPost("t", fmt.Sprintf("m%d", i))
	}
	want := srv.Events()
	if len(want) != 8 {
		t.Fatalf("%d events, want 8", len(want))
	}
	c := srv.Client(bhtest.RunnerKey)
	for _, asc := range []bool{true, false} {
		var got []blobhub.Event
		q := blobhub.EventQuery{Ascending: asc, Limit: 3}
		for range 10 {
			p, err := c.ListEvents(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Events...)
			if p.Cursor == "" {
				break
			}
			q.Cursor = p.Cursor
		}
		if len(got) != len(want) {
			t.Errorf("ascending %v: %d events over pages of 3, want %d", asc, len(got), len(want))
		}
	}
}
