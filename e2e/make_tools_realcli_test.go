//go:build realcli

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestREADMENodeVersionIsTheAgentsOwn: the Node.js version the README asks
// for is the highest the pinned agent CLIs declare (package.json's
// engines), and the login command it gives for Claude Code is one the
// pinned CLI has.
func TestREADMENodeVersionIsTheAgentsOwn(t *testing.T) {
	claudeBin(t) // the pinned CLIs must be installed (fails under CI, else skips)
	highest := 0
	for _, pkg := range []string{"@anthropic-ai/claude-code", "@openai/codex", "@google/gemini-cli", "@qwen-code/qwen-code", "opencode-ai", "@github/copilot"} {
		b, err := os.ReadFile(filepath.Join(".tools", "node_modules", pkg, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		var pj struct {
			Engines struct{ Node string } `json:"engines"`
		}
		if err := json.Unmarshal(b, &pj); err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`>=\s*(\d+)`).FindStringSubmatch(pj.Engines.Node); m != nil {
			n, _ := strconv.Atoi(m[1])
			highest = max(highest, n)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Node.js (%d or later", highest); !strings.Contains(string(readme), want) {
		t.Errorf("the README does not ask for %q, the highest the agent CLIs declare", want)
	}
	cmd := exec.Command(claudeBin(t), "auth", "--help")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^\s+login\b`).Match(out) {
		t.Errorf("claude auth --help of the pinned CLI has no login command (%v):\n%s", err, out)
	}
}
