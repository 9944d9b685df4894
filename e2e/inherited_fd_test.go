//go:build realcli

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/run"
)

// TestInheritedDescriptorNotHandedOn: bhw-run started by a careless
// invoker with a secret file open on descriptor 7 (`7<credentials.yaml`)
// does not hand it to the agent: neither Claude Code nor its Bash tool
// has it open (Landlock does not judge a file already open).
func TestInheritedDescriptorNotHandedOn(t *testing.T) {
	e := newClaudeE2E(t)
	secret := filepath.Join(e.root, "secret-credentials.yaml")
	writeFile(t, secret, "api_key: never-for-the-agent\n")
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e.model.Push(claudetest.Tool("Bash", map[string]any{
		"command": "ls -l /proc/$$/fd /proc/$PPID/fd; cat <&7", "description": "list the open descriptors"}), claudetest.Text("listed"))
	e.allowAutonomous()
	const alias = "projects/p1/claude-fd7"
	e.handOff(alias, claudeType, "autonomous", "list what you hold open")
	// Descriptor 7 in bhw-run: ExtraFiles[i] is 3+i, the nil ones closed.
	cmd := exec.Command(bhwBin, "--json", alias)
	cmd.Env, cmd.Dir = e.environ(bhtest.RunnerKey), e.root
	cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, f}
	out, err := cmd.Output()
	if s := parseSummary(t, string(out)); err != nil || s.Outcome != run.OutcomeTurnCompleted {
		t.Fatalf("bhw-run: %v, summary %+v", err, s)
	}
	results := e.itemsOfType(alias, "tool_result")
	if len(results) == 0 {
		t.Fatalf("no tool_result: %v", e.itemTypes(alias))
	}
	listing, _ := meta(t, results[0]).Tool["output"].(string)
	if !strings.Contains(listing, "/fd") {
		t.Fatalf("the listing did not run: %q", listing)
	}
	if strings.Contains(listing, "secret-credentials") || strings.Contains(listing, "never-for-the-agent") {
		t.Fatalf("the agent holds bhw-run's inherited descriptor 7:\n%s", listing)
	}
}
