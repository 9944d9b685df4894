package codex

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// TestPermissionsRequestGoesToTheGate: Codex's request to widen its
// permissions reaches the gate as an approval with no effect (so under
// approval a person answers it); an allow grants what it asked for this
// turn only, a park or a refusal grants nothing, and a second request
// while the turn is parked is refused without asking.
func TestPermissionsRequestGoesToTheGate(t *testing.T) {
	line := `{"method":"item/permissions/requestApproval","id":7,"params":{"itemId":"call_9","threadId":"th","turnId":"t","reason":"needs the network","permissions":{"network":{"enabled":true}}}}`
	for _, c := range []struct {
		verdict policy.Action
		want    string
	}{
		{policy.Allow, `{"id":7,"result":{"permissions":{"network":{"enabled":true}},"scope":"turn"}}`},
		{policy.Park, `{"id":7,"result":{"permissions":{},"scope":"turn"}}`},
		{policy.Deny, `{"id":7,"result":{"permissions":{},"scope":"turn"}}`},
	} {
		var answers bytes.Buffer
		h := &recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: c.verdict} }}
		tr := &turn{s: testSession(&answers), h: h, cwd: "/w", calls: map[string]bool{}, results: map[string]bool{}, changes: map[string]json.RawMessage{}}
		m, err := jsonrpc.Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		tr.handle(m)
		if got := strings.TrimSpace(answers.String()); got != c.want {
			t.Errorf("%v: answered %s, want %s", c.verdict, got, c.want)
		}
		calls := h.Calls()
		if len(calls) != 1 || calls[0].Tool != methodPermissionsApproval || calls[0].Effect != "" || calls[0].Kind != policy.KindApproval || calls[0].Fingerprint == "" {
			t.Fatalf("%v: the gate saw %+v", c.verdict, calls)
		}
		if c.verdict == policy.Park {
			answers.Reset()
			tr.handle(m)
			if len(h.Calls()) != 1 || !strings.Contains(answers.String(), `"permissions":{}`) {
				t.Errorf("a request while parked: gate calls %d, answered %s", len(h.Calls()), answers.String())
			}
		}
	}
}
