package bhtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

func post(t *testing.T, srv *bhtest.Server, key, channel, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/revisions/"+bhtest.RevisionID+"/data/"+channel, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]json.RawMessage
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestWireAnswers(t *testing.T) {
	srv := bhtest.New(t)
	if st, m := post(t, srv, "nope", "query", `{"command":"list_session_objects","session_id":"ses_test"}`); st != 401 || !strings.Contains(string(m["error"]), "unauthorized") {
		t.Errorf("unknown key: %d %s", st, m)
	}
	if st, m := post(t, srv, bhtest.RunnerKey, "query", `{"command":"frobnicate","session_id":"ses_test"}`); st != 400 || !strings.Contains(string(m["error"]), "unknown_command") {
		t.Errorf("unknown command: %d %s", st, m)
	}
	// Items posted over the wire are exactly what the store holds, and
	// the API's default order is descending.
	var posted []blobhub.Item
	srv.Thread("t")
	for _, s := range []string{"a", "b"} {
		st, m := post(t, srv, bhtest.RunnerKey, "command", `{"command":"post_session_thread_item","session_id":"ses_test","alias":"t","content":[{"type":"text","text":"`+s+`"}],"metadata":{"type":"text"}}`)
		var it blobhub.Item
		if st != 200 || json.Unmarshal(m["item"], &it) != nil || it.UserID != bhtest.RunnerUserID {
			t.Fatalf("post: %d %s", st, m)
		}
		posted = append(posted, it)
	}
	stored := srv.Items("t")
	a, _ := json.Marshal(posted)
	b, _ := json.Marshal(stored)
	if string(a) != string(b) {
		t.Fatalf("answered %s, stored %s", a, b)
	}
	st, m := post(t, srv, bhtest.RunnerKey, "query", `{"command":"list_session_thread_items","session_id":"ses_test","alias":"t"}`)
	var items []blobhub.Item
	if st != 200 || json.Unmarshal(m["items"], &items) != nil || len(items) != 2 || items[0].ID != posted[1].ID {
		t.Fatalf("default order: %d %s", st, m)
	}
	// EqualTimestamps: the next item shares the last one's instant.
	srv.EqualTimestamps(true)
	it := srv.PersonPost("t", "same instant")
	srv.EqualTimestamps(false)
	if it.CreatedAt != posted[1].CreatedAt || it.UserID != bhtest.PersonUserID {
		t.Fatalf("equal timestamps: %+v vs %+v", it, posted[1])
	}
	// What the API refuses: a key it does not know, a command on the
	// other channel, a null cursor.
	for _, tc := range []struct{ channel, body string }{
		{"query", `{"engine":"workflow_blobhub","command":"list_session_objects","session_id":"ses_test"}`},
		{"query", `{"command":"post_session_thread_item","session_id":"ses_test","alias":"t","content":[]}`},
		{"query", `{"command":"list_session_objects","session_id":"ses_test","cursor":""}`},
	} {
		if st, m := post(t, srv, bhtest.RunnerKey, tc.channel, tc.body); st != 400 || string(m["status"]) != `"failure"` {
			t.Errorf("%s: %d %s, want a 400 failure", tc.body, st, m)
		}
	}
	if n, cmds := srv.Requests(); n != 8 || cmds[1] != "frobnicate" {
		t.Errorf("requests %d %q", n, cmds)
	}
	srv.Put("o", `{"type":"thread"}`)
	if o, ok := srv.Get("o"); !ok || string(o.Value) != `{"type":"thread"}` {
		t.Errorf("Get = %+v %v", o, ok)
	}
	if _, ok := srv.Get("missing"); ok {
		t.Error("Get of a missing object: ok")
	}
}
