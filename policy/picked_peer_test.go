//go:build realcli

package policy_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// peerPicks asks blobhub-worker, for each answers set, whether it stands
// for a prompt of n questions (_usable_answers) and whether it approves
// (answer_is_approval).
const peerPicks = `
import json, sys
from blobhub_worker.thread_agent.prompt_bridge import _usable_answers
from blobhub_worker.codeagents.core.approval import answer_is_approval
for line in sys.stdin:
    req = json.loads(line)
    qs = [{"question": "q"}] * req["n"]
    print(json.dumps({"usable": _usable_answers(req["answers"], qs), "approves": answer_is_approval(req["answers"])}))
`

// TestPicksAsPeer: metadata.answers is read as blobhub-worker reads it:
// the same sets stand for a prompt and the same sets approve.
func TestPicksAsPeer(t *testing.T) {
	cases := []struct {
		answers string
		n       int
	}{
		{`[{"answer":["approve"]}]`, 1}, {`[{"answer":["Approve"]}]`, 1}, {`[{"answer":[" yes "]}]`, 1},
		{`[{"answer":["Approve & remember"]}]`, 1}, {`[{"answer":["approve."]}]`, 1}, {`[{"answer":["Deny"]}]`, 1},
		{`[{"answer":[]}]`, 1}, {`[{"answer":["1"]}]`, 1}, {`[{"answer":["ok","no"]}]`, 1},
		{`[{"answer":["approve"]},{"answer":["x"]}]`, 1}, {`[{"answer":["approve"]},{"answer":["x"]}]`, 2},
		{`[{"answer":"approve"}]`, 1}, {`[{"question":"q"}]`, 1}, {`[]`, 1}, {`["approve"]`, 1},
		{`[{"answer":["ALLOW"]}]`, 1}, {`[{"answer":["y"]}]`, 1}, {`[{"answer":["approved"]}]`, 1},
		{`[{"answer":[1]}]`, 1}, {`[{"answer":[true]}]`, 1}, {`[{"answer":[null,"approve"]}]`, 1}, {`[{"answer":["approve",1]}]`, 1},
		{`[{"answer":["approve"]}, 3]`, 2}, {`{"answer":["approve"]}`, 1}, {`null`, 1},
	}
	var in bytes.Buffer
	for _, c := range cases {
		b, _ := json.Marshal(map[string]any{"answers": json.RawMessage(c.answers), "n": c.n})
		in.Write(append(b, '\n'))
	}
	out, _ := agenttest.RunPeer(t, "peer", &in, "-c", peerPicks)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, c := range cases {
		var peer struct{ Usable, Approves bool }
		if err := json.Unmarshal([]byte(lines[i]), &peer); err != nil {
			t.Fatal(err)
		}
		picked, ok := policy.ParsePicked(json.RawMessage(c.answers))
		usable := ok && policy.UsablePicks(picked, c.n)
		if usable != peer.Usable {
			t.Errorf("%s for %d question(s): usable %v, the peer's %v", c.answers, c.n, usable, peer.Usable)
		}
		if usable && policy.PicksApprove(picked) != peer.Approves {
			t.Errorf("%s: approves %v, the peer's %v", c.answers, policy.PicksApprove(picked), peer.Approves)
		}
	}
}
