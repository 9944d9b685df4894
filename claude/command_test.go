package claude

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

var base = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
	"--permission-prompt-tool", "stdio", "--strict-mcp-config"}

func TestCommand(t *testing.T) {
	// The work folder's own CLAUDE.md is never named on argv: only the
	// private copy of what run checked is.
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "CLAUDE.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	const copied = "/tmp/bhw-claude-md-1/CLAUDE.md"
	for _, c := range []struct {
		name    string
		l       agent.Launch
		md      string
		args    []string
		sandbox bool
	}{
		{"autonomous new", agent.Launch{SessionID: "s1", Permissions: "autonomous", WorkFolder: work}, copied,
			[]string{"--session-id=s1", "--permission-mode=bypassPermissions"}, true},
		{"approval resume model effort extra", agent.Launch{SessionID: "s1", Resume: true, Model: "opus", Effort: "high",
			Permissions: "approval", WorkFolder: work, ExtraArgs: []string{"--max-turns", "5"}}, "",
			[]string{"--resume=s1", "--model=opus", "--effort=high", "--permission-mode=default", "--setting-sources=", "--max-turns", "5"}, false},
		{"what remains of the budget", agent.Launch{SessionID: "s1", Permissions: "autonomous", WorkFolder: work,
			Budget: agent.Budget{MaxTurns: 3, MaxCostUSD: 0.25, MaxTokens: 1000}}, "",
			[]string{"--session-id=s1", "--permission-mode=bypassPermissions", "--max-turns=3", "--max-budget-usd=0.25"}, true},
		{"guarded with CLAUDE.md", agent.Launch{SessionID: "s1", Permissions: "guarded", WorkFolder: work}, copied,
			[]string{"--session-id=s1", "--permission-mode=default", "--setting-sources=",
				"--append-system-prompt-file=" + copied}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.l.Executable, c.l.Env = "/bin/claude", []string{"PATH=/bin"}
			args, env, err := command(c.l, c.md)
			if err != nil {
				t.Fatal(err)
			}
			if want := append(slices.Clone(base), c.args...); !slices.Equal(args, want) {
				t.Errorf("args = %q\nwant   %q", args, want)
			}
			if got := slices.Contains(env, "IS_SANDBOX=1"); got != c.sandbox {
				t.Errorf("IS_SANDBOX=1 in env: %v, want %v", got, c.sandbox)
			}
			if env[0] != "PATH=/bin" {
				t.Errorf("env = %q", env)
			}
		})
	}
}

func TestCommandRefusesBadValues(t *testing.T) {
	for _, l := range []agent.Launch{
		{SessionID: "-rf", Permissions: "approval"},
		{SessionID: "s", Model: "--dangerously-skip-permissions", Permissions: "approval"},
		{SessionID: "s", Effort: "hi\ngh", Permissions: "approval"},
		{SessionID: "s", Model: "x\x1b[31m", Permissions: "approval"},
		{SessionID: "s", Permissions: "yolo"},
		{SessionID: "", Permissions: "approval"},
		{SessionID: "s", Permissions: "approval", ExtraArgs: []string{"a\tb"}},
	} {
		l.Executable = "/bin/claude"
		_, _, err := command(l, "")
		var e *agent.Error
		if !errors.As(err, &e) || e.Code != agent.CodeAgentSpawnFailed {
			t.Errorf("%+v: err = %v, want AGENT_SPAWN_FAILED", l, err)
		} else if strings.ContainsAny(e.Message, "\n\x1b") && !strings.Contains(e.Message, `\n`) && !strings.Contains(e.Message, `\x1b`) {
			t.Errorf("message carries raw control characters: %q", e.Message)
		}
	}
}
