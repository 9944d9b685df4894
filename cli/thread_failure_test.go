package cli

import (
	"encoding/json"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestThreadFailureBothShapes: `thread show`'s failure line reads the
// worker thread's thread_failed in blobhub-worker's shape (thread {alias,
// error}), and in the shape earlier bhw-run versions posted (alias and
// error at the top), so a thread that failed before the change still says
// why.
func TestThreadFailureBothShapes(t *testing.T) {
	for _, tc := range []struct{ name, meta string }{
		{"worker", `{"type":"thread_failed","thread":{"alias":"a/t","error":{"code":"WORK_FOLDER_NOT_FOUND","message":"gone"}},"instance_id":"i"}`},
		{"earlier", `{"type":"thread_failed","alias":"a/t","error":{"code":"WORK_FOLDER_NOT_FOUND","message":"gone"},"instance_id":"i"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := bhtest.New(t)
			srv.Thread("worker")
			srv.PostAs(bhtest.RunnerUserID, bhtest.SessionID, "worker", blobhub.NewItem{
				Content: []blobhub.Block{{Type: "text", Text: "failed"}}, Metadata: json.RawMessage(tc.meta)})
			srv.PostAs(bhtest.RunnerUserID, bhtest.SessionID, "worker", blobhub.NewItem{
				Content:  []blobhub.Block{{Type: "text", Text: "another thread"}},
				Metadata: json.RawMessage(`{"type":"thread_failed","thread":{"alias":"a/other","error":{"code":"X","message":"y"}}}`)})
			f := threadFailure(t.Context(), srv.Client(bhtest.PersonKey), "", "a/t")
			if f == nil || f.Code != "WORK_FOLDER_NOT_FOUND" || f.Message != "gone" || f.At.IsZero() {
				t.Fatalf("failure %+v, want WORK_FOLDER_NOT_FOUND: gone with its time", f)
			}
		})
	}
}
