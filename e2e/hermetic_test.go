package e2e

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/blobhub/bhw-run/internal/hermetic"
)

// Every adapter's executable is one internal/hermetic keeps off the
// tests' PATH, and none is found there: a test that wants an agent names
// its binary.
func TestHermeticCoversEveryAdapter(t *testing.T) {
	for _, a := range adapters {
		if a.Executable == "" {
			continue
		}
		if !slices.Contains(hermetic.AgentCommands, a.Executable) {
			t.Errorf("agent %s runs %q, which hermetic.AgentCommands does not hide from the tests", a.Type, a.Executable)
		}
		if p, err := exec.LookPath(a.Executable); err == nil {
			t.Errorf("%s is on the tests' PATH at %s", a.Executable, p)
		}
	}
}
