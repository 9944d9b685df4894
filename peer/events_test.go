//go:build realcli

package peer_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestPeerSDKEvents: the SDK follows the test hub's list_session_events
// from page to page (ascending, a limit, the opaque cursor) and reads the
// events bhw-run's client reads: the SDK's upload and post, then bhw-run's
// post, in that order.
func TestPeerSDKEvents(t *testing.T) {
	srv := bhtest.New(t)
	const alias = "peer/feed-thread"
	runPeer(t, srv, filepath.Join("testdata", "sdk_session.py"), "write", alias)
	if _, err := srv.Client(bhtest.RunnerKey).Post(t.Context(), alias, blobhub.NewItem{
		Content: []blobhub.Block{{Type: "text", Text: "posted by bhw-run"}}, Metadata: json.RawMessage(`{"type":"text"}`)}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Events []blobhub.Event `json:"events"`
		Pages  int             `json:"pages"`
	}
	if err := json.Unmarshal(runPeer(t, srv, filepath.Join("testdata", "sdk_session.py"), "events", alias), &got); err != nil {
		t.Fatal(err)
	}
	want := srv.Events()
	if !reflect.DeepEqual(got.Events, want) || got.Pages < 2 {
		t.Fatalf("the SDK read %+v in %d pages; the hub holds %+v", got.Events, got.Pages, want)
	}
	types := []string{}
	for _, e := range want {
		types = append(types, e.Type)
	}
	if !reflect.DeepEqual(types, []string{blobhub.EventObjectModified, blobhub.EventItemPosted, blobhub.EventItemPosted}) {
		t.Errorf("events %v, want the upload and two posts", types)
	}
}
