package codex

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// TestUndecodableApprovalDeclined: an approval request, for a command or a
// file change, whose params do not decode is declined, with a warning that
// names which, and never reaches the gate.
func TestUndecodableApprovalDeclined(t *testing.T) {
	var answers, logged bytes.Buffer
	s := testSession(&answers)
	s.logger = slog.New(slog.NewTextHandler(&logged, nil))
	h := &recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }}
	tr := &turn{s: s, h: h, cwd: "/w", calls: map[string]bool{}, results: map[string]bool{}, changes: map[string]json.RawMessage{}}
	for _, l := range []string{
		`{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"call_1","threadId":"th","turnId":"t","command":7}}`,
		`{"method":"item/fileChange/requestApproval","id":1,"params":{"itemId":"call_2","threadId":"th","turnId":"t","grantRoot":7}}`,
	} {
		m, err := jsonrpc.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		tr.approve(m)
	}
	want := `{"id":0,"result":{"decision":"decline"}}` + "\n" + `{"id":1,"result":{"decision":"decline"}}` + "\n"
	if answers.String() != want {
		t.Errorf("answers:\n%s\nwant:\n%s", answers.String(), want)
	}
	if len(h.Calls()) != 0 {
		t.Errorf("the gate saw %d calls, want none", len(h.Calls()))
	}
	for _, w := range []string{"codex: undecodable command approval declined", "codex: undecodable file change approval declined"} {
		if !strings.Contains(logged.String(), w) {
			t.Errorf("no warning %q in:\n%s", w, logged.String())
		}
	}
}
