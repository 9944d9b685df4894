package run

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// TestWorkerLastSeenRefreshedWhenStale: a run that acts uploads the worker
// object to refresh its last_seen_at only when the one there is
// workerSeenEvery old or more; the runs of the minutes after it (cron's)
// leave it as it is, one request less each.
func TestWorkerLastSeenRefreshedWhenStale(t *testing.T) {
	h := newHarness(t, false)
	const alias = "seen/t"
	h.handOff(alias, "approval", "start")
	h.play(oneTurn())
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK) // makes the worker object
	lastSeen := func() string {
		obj, ok := h.srv.Get(setup.WorkerAlias)
		if !ok {
			t.Fatal("no worker object")
		}
		var w map[string]any
		_ = json.Unmarshal(obj.Value, &w)
		s, _ := dig(w, "thread", "metadata", "instance", "last_seen_at").(string)
		if s == "" {
			t.Fatalf("the worker object has no last_seen_at: %s", obj.Value)
		}
		return s
	}
	fresh := lastSeen()

	h.srv.ResetCounts()
	h.talk(alias, 1)
	if n := h.srv.Count("upload_session_object"); n != 0 {
		t.Errorf("a run a moment later made %d uploads, want none (last_seen_at %s is fresh)", n, fresh)
	}

	// Seen an hour ago: the next run that acts refreshes it, once.
	obj, _ := h.srv.Get(setup.WorkerAlias)
	old := envelope.Stamp(time.Now().Add(-time.Hour))
	quoted, _ := json.Marshal(old)
	stale, err := envelope.SetPath(obj.Value, []string{"thread", "metadata", "instance", "last_seen_at"}, quoted)
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Put(setup.WorkerAlias, string(stale))
	h.srv.ResetCounts()
	h.talk(alias, 2)
	if n := h.srv.Count("upload_session_object"); n != 1 {
		t.Errorf("%d uploads after an hour, want 1 (the refresh)", n)
	}
	if got := lastSeen(); got == old {
		t.Errorf("last_seen_at still %s", got)
	}
}
