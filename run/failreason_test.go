package run

import (
	"encoding/json"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/exit"
)

// wantFailureReason checks the failed thread says why on itself, as
// blobhub-worker does: one status error item {code, detail} (text
// "CODE: message"), posted before failed went on the wire.
func (h *harness) wantFailureReason(alias, code string) {
	h.t.Helper()
	_, msg, _ := h.thread(alias).Agent.Error.Get()
	var reasons []blobhub.Item
	for _, it := range h.srv.Items(alias) {
		var m struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type != "status" || m.Status != "error" || m.Code == "" {
			continue
		}
		reasons = append(reasons, it)
		if m.Code != code || m.Detail != msg || it.Content[0].Text != code+": "+msg {
			h.t.Errorf("the reason on the thread: code %q detail %q text %q, want %s and the local error %q", m.Code, m.Detail, it.Content[0].Text, code, msg)
		}
	}
	if len(reasons) != 1 {
		h.t.Fatalf("%d status error items on %s, want 1", len(reasons), alias)
	}
	if h.wireState(alias) != "failed" {
		return
	}
	flipped := ""
	for _, ev := range h.srv.Events() {
		if ev.Type == blobhub.EventObjectModified && ev.Object != nil && ev.Object.Alias == alias {
			flipped = ev.CreatedAt
		}
	}
	if reasons[0].CreatedAt >= flipped {
		h.t.Errorf("the reason was posted at %s, not before failed went on the wire at %s", reasons[0].CreatedAt, flipped)
	}
}

// TestFailureReasonOnThread: a thread that fails (a work folder that is
// not there) says why on the thread itself, once, before failed; a run
// after it posts no second reason.
func TestFailureReasonOnThread(t *testing.T) {
	h := newHarness(t, false)
	const alias = "fail/reason"
	h.srv.Put(alias, envelopeWith("/nonexistent/bhw-run/checkout", nil))
	h.srv.PersonPost(alias, "please start")
	want(t, h.run(alias), OutcomeFailed, exit.Failed)
	h.wantFailureReason(alias, exit.CodeWorkFolderNotFound)
	h.run(alias)
	h.wantFailureReason(alias, exit.CodeWorkFolderNotFound)
}

// TestFailureReasonAfterKill: bhw-run killed with SIGKILL after each
// journal write of a run that fails a thread, then a normal run: the
// reason is on the thread once, posted before failed went on the wire.
func TestFailureReasonAfterKill(t *testing.T) {
	steps := 0
	for n := 1; n < 30; n++ {
		h := newHarness(t, true)
		const alias = "fail/killed"
		h.srv.Put(alias, envelopeWith("/nonexistent/bhw-run/checkout", nil))
		h.srv.PersonPost(alias, "please start")
		killed, code := h.runKilled(alias, n)
		if !killed {
			if code != exit.Failed {
				t.Fatalf("clean run: exit %d", code)
			}
			steps = n - 1
			break
		}
		if sum := h.run(alias); sum.ExitCode != exit.OK && sum.ExitCode != exit.Failed {
			t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
		}
		h.wantFailureReason(alias, exit.CodeWorkFolderNotFound)
		h.noneTwice(alias, "worker")
	}
	if steps < 2 {
		t.Fatalf("only %d journal writes in a failing run", steps)
	}
	t.Logf("killed after each of %d journal writes", steps)
}
