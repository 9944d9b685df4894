package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
)

// TestThreadPostSaysHowItReads: a post that answers a waiting question
// says how the next run reads it — "yes please" is a denial with that
// reason, "YES." an approval, "2" the second option — with the run's own
// reading; a post after the answer reads as a message; a post to a
// completed or failed thread warns that no run reads it. Before, every
// post said only "posted … to …".
func TestThreadPostSaysHowItReads(t *testing.T) {
	srv := bhtest.New(t)
	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	const alias = "demo/ask"
	srv.Put(alias, string(envelope.NewThread("/w", claudeType, "approval", alias)))
	prompt := func(p map[string]any) {
		meta, _ := json.Marshal(map[string]any{"type": "pending_prompt", "prompt": p})
		srv.PostAs(bhtest.RunnerUserID, bhtest.SessionID, alias, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: "❓"}}, Metadata: meta})
	}
	post := func(text string) (out, errOut string) {
		t.Helper()
		var o, e bytes.Buffer
		code := Main([]string{"bhw-run", "--api-url", srv.URL(), "--api-key", bhtest.PersonKey, "--state-dir", filepath.Join(root, "state"),
			"--revision", bhtest.RevisionID, "--session", bhtest.SessionID, "--log-format", "json", "thread", "post", alias, text}, &o, &e, "", adapters)
		if code != 0 {
			t.Fatalf("thread post %q: exit %d: %s", text, code, e.String())
		}
		return o.String(), e.String()
	}
	approval := map[string]any{"kind": "approval", "prompt_id": "p1", "questions": []map[string]any{{"question": "Approve Write README.md?", "options": []map[string]any{{"label": "Approve"}, {"label": "Deny"}}}}}

	prompt(approval)
	if out, _ := post("yes please"); !strings.Contains(out, `read as: deny, with the reason "yes please"; only yes, y, ok, approve, approved, allow, 1 approve`) {
		t.Errorf("yes please: %q", out)
	}
	if out, _ := post("and then add a LICENSE"); strings.Contains(out, "read as") {
		t.Errorf("a post after the answer was read as one: %q", out)
	}
	prompt(approval)
	if out, _ := post("YES."); !strings.Contains(out, "read as: approve; the next run runs the call once") {
		t.Errorf("YES.: %q", out)
	}
	prompt(map[string]any{"kind": "ask_user_question", "questions": []map[string]any{{"question": "Which license?", "options": []map[string]any{{"label": "MIT"}, {"label": "Apache-2.0"}}}}})
	if out, _ := post("2"); !strings.Contains(out, `read as: "Which license?" = Apache-2.0`) {
		t.Errorf("2 to a question: %q", out)
	}

	for state, want := range map[string]string{envelope.StateCompleted: "is completed (stopped): no run reads this message", envelope.StateFailed: "no run reads this message until `bhw-run thread retry demo/ask`"} {
		v, _ := envelope.WithState(envelope.NewThread("/w", claudeType, "approval", alias), state)
		srv.Put(alias, string(v))
		if _, errOut := post("hello?"); !strings.Contains(errOut, want) {
			t.Errorf("a post to a %s thread: stderr %q, want %q", state, errOut, want)
		}
	}
}
