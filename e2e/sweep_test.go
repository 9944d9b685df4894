package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

// TestGrandchildSweptByBinary runs bhw-run on a file:// store with an agent
// that leaves a grandchild in its own session holding the agent's stdout:
// as the whole process, bhw-run is a subreaper and sweeps it.
func TestGrandchildSweptByBinary(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(e.root, "script.json")
	b, _ := json.Marshal(claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{{Grandchild: true}, {Text: "done"}}}})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.agentConfig(claudeType).Executable = self
	e.agentConfig(claudeType).Env = map[string]string{claudetest.FakeAgentEnv: script}
	e.writeConfig()
	const alias = "gc/bin"
	e.handOff(alias, claudeType, "approval", "start")
	e.activate(alias, 0, "turn_completed")
	pid := 0
	for _, it := range e.items(alias) {
		if s, ok := strings.CutPrefix(it.Content[0].Text, "grandchild "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	if pid == 0 {
		t.Fatal("no grandchild pid in the items")
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !agenttest.WaitGone(pid, 5*time.Second) {
		t.Fatalf("grandchild %d outlived bhw-run", pid)
	}
}
