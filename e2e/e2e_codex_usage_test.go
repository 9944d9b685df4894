//go:build realcli

package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// workerUsageTotalPy prints agent.usage_total of the thread.yaml named by
// argv[1] as blobhub-worker reads it (its statestore and ThreadState).
const workerUsageTotalPy = `
import json, sys
from pathlib import Path
from blobhub_worker import statestore
from blobhub_worker.models.disk import ThreadState
print(json.dumps(statestore.read_model(Path(sys.argv[1]), ThreadState).agent.usage_total))
`

// TestE2ECodexUsageTotalForTheDaemon: after each Codex turn bhw-run runs,
// agent.usage_total holds the Codex thread's running counters where the
// turn ended, as blobhub-worker reads thread.yaml with its own model, so
// the daemon's next turn in the session measures from there and does not
// count bhw-run's tokens. The fake model reports 100 input tokens (40 of
// them cached) and 10 output tokens per response.
func TestE2ECodexUsageTotalForTheDaemon(t *testing.T) {
	py := filepath.Join(filepath.Dir(peerWorker(t)), "python")
	e := newCodexE2E(t, codextest.Say("one"))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	const alias = "projects/p1/usage"
	e.handOff(alias, codexType, "autonomous", "say one")
	usage := func() map[string]int {
		t.Helper()
		path := filepath.Join(setup.ThreadDir(e.jobDir(), alias), "thread.yaml")
		out, err := exec.CommandContext(t.Context(), py, "-c", workerUsageTotalPy, path).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				t.Fatalf("the worker reads thread.yaml: %v\n%s", err, ee.Stderr)
			}
			t.Fatalf("the worker reads thread.yaml: %v", err)
		}
		var u map[string]int
		if err := json.Unmarshal(out, &u); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return u
	}
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	want := map[string]int{"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 10}
	if got := usage(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the first turn the worker reads usage_total %v, want %v", got, want)
	}
	// The same Codex thread resumed: its counters go on from there.
	e.post(alias, "say two")
	e.model.Push(codextest.Say("two"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	want = map[string]int{"input_tokens": 200, "cached_input_tokens": 80, "output_tokens": 20}
	if got := usage(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the resumed turn the worker reads usage_total %v, want %v", got, want)
	}
}
