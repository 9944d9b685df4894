//go:build realcli

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeDemoInstallsOnlyItsAgent: `make demo` installs the one CLI it
// drives (AGENT=…), not all six; `make tools` still installs every one;
// every version check runs in the tools' own HOME, so no CLI writes into
// the user's; and with the CLI already in place its target prints nothing.
func TestMakeDemoInstallsOnlyItsAgent(t *testing.T) {
	empty := t.TempDir()
	dry := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("make", append([]string{"-n", "TOOLS=" + empty}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	packages := map[string]string{"claude_code": "@anthropic-ai/claude-code@", "codex": "@openai/codex@",
		"gemini": "@google/gemini-cli@", "qwen_code": "@qwen-code/qwen-code@", "opencode": "opencode-ai@", "copilot": "@github/copilot@"}
	for _, agent := range []string{"claude_code", "gemini"} {
		plan := dry("demo", "AGENT="+agent)
		for a, pkg := range packages {
			if got := strings.Contains(plan, pkg); got != (a == agent) {
				t.Errorf("make demo AGENT=%s installs %s: %v, want %v:\n%s", agent, pkg, got, a == agent, plan)
			}
		}
	}
	plan := dry("tools")
	for _, pkg := range packages {
		if !strings.Contains(plan, pkg) {
			t.Errorf("make tools does not install %s:\n%s", pkg, plan)
		}
	}
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, " --version") && !strings.Contains(line, "HOME="+filepath.Join(empty, "home")) {
			t.Errorf("a version check runs outside the tools' HOME: %s", line)
		}
	}

	// The CLI already there (the pinned one, through a symlink): the
	// target checks its version, quietly, and stamps it.
	tools := t.TempDir()
	abs, err := filepath.Abs(".tools/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	claudeBin(t) // the pinned CLI must be installed (fails under CI, else skips)
	if err := os.Symlink(abs, filepath.Join(tools, "node_modules")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "TOOLS="+tools, "tools-claude_code").CombinedOutput()
	if err != nil {
		t.Fatalf("make tools-claude_code: %v\n%s", err, out)
	}
	if len(out) != 0 {
		t.Errorf("make tools-claude_code with the CLI in place printed:\n%s", out)
	}
}
