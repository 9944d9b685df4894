package run

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestConfinementRefusedStatus: a tool result saying a path the
// confinement refuses was refused is followed by a confinement_refused
// status item naming the path, as denied (the state tree) or read-only
// (a file outside the agent's folders); a refusal in the work folder, the
// user's own permissions' doing, gets none, and an unconfined agent none
// at all.
func TestConfinementRefusedStatus(t *testing.T) {
	for _, confined := range []bool{true, false} {
		t.Run(map[bool]string{true: "confined", false: "unconfined"}[confined], func(t *testing.T) {
			h := newHarness(t, false)
			if !confined {
				h.cfg = "confine:\n  mode: off\n"
				h.writeConfig()
			}
			denied := filepath.Join(h.state, "config.yaml")
			readOnly := filepath.Join(t.TempDir(), "outside.txt")
			output := "cat: " + denied + ": Permission denied\n" +
				"bash: line 1: " + readOnly + ": Permission denied\n" +
				"cat: " + filepath.Join(h.work, "locked") + ": Permission denied\n"
			tool := agenttest.Exec("cat the files")
			tool.Result = output
			h.play(agenttest.Turn(agenttest.Step{Tool: tool}))
			const alias = "projects/p1/refused"
			h.handOff(alias, "autonomous", "probe")
			if sum := h.run(alias); sum.Outcome != OutcomeTurnCompleted {
				t.Fatalf("outcome %s", sum.Outcome)
			}
			type refusal struct{ Path, Access string }
			var got []refusal
			items := h.items(alias)
			for i, it := range h.srv.Items(alias) {
				var m struct {
					Status, Path, Access string
					InvocationID         string `json:"invocation_id"`
				}
				_ = json.Unmarshal(it.Metadata, &m)
				if m.Status != "confinement_refused" {
					continue
				}
				if prev := items[i-1]; (prev != "tool_result" && (prev != "status" || len(got) == 0)) || m.InvocationID == "" {
					t.Errorf("the status item follows %s (invocation %q), want the tool_result", prev, m.InvocationID)
				}
				got = append(got, refusal{m.Path, m.Access})
			}
			var want []refusal
			if confined {
				want = []refusal{{denied, "denied"}, {readOnly, "read_only"}}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("confinement_refused items %+v, want %+v (items %q)", got, want, items)
			}
		})
	}
}
