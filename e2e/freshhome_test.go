//go:build realcli

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/run"
)

// TestE2EFreshHomeParkApproveResume: on a machine where the agent never
// ran (an empty HOME, no agent folder in it, no home configured), a
// thread parks on a write, is approved, and the next run resumes the same
// agent session: the call runs once, one pending_prompt_resolved is
// posted, and no resume_failed. Confined Claude Code once could not make
// ~/.claude, lost the session at the resume, and posted the answer's
// resolution twice.
func TestE2EFreshHomeParkApproveResume(t *testing.T) {
	t.Run("claude_code", func(t *testing.T) {
		e := &claudeE2E{e2eEnv: newE2E(t), model: claudetest.NewModelServer(t)}
		e.agentConfig(claudeType).Executable = claudeBin(t)
		e.agentConfig(claudeType).Env = map[string]string{}
		for _, kv := range e.model.Env("") {
			k, v, _ := strings.Cut(kv, "=")
			if k != "PATH" && k != "HOME" && k != "CLAUDE_CONFIG_DIR" {
				e.agentConfig(claudeType).Env[k] = v
			}
		}
		e.writeConfig()
		home := filepath.Join(e.home, ".claude")
		fileAbsent(t, home)
		const alias = "fresh/claude"
		x := e.parkOnWrite(alias, writeTool(e.path("x.txt"), "approved content"), claudetest.Text("written"))
		if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("~/.claude after the first run: %v, %v; want a folder of mode 0700", fi, err)
		}
		session := e.threadYAML(alias).Agent.AgentSessionID
		e.post(alias, "yes")
		e.activate(alias, 0, run.OutcomeTurnCompleted)
		fileIs(t, x, "approved content")
		if m := e.resolved(alias); m.Decision != "approved" {
			t.Errorf("pending_prompt_resolved %+v", m)
		}
		wantSameSession(t, e.e2eEnv, alias, session)
	})
	t.Run("opencode", func(t *testing.T) {
		e := newACPE2E(t, acptest.OpenCode, false)
		e.acquire()
		defer e.release()
		for _, d := range []string{".config", ".local"} {
			fileAbsent(t, filepath.Join(e.e2eEnv.home, d))
		}
		const alias = "fresh/opencode"
		e.parkOn(alias, e.a.Write(e.file("x.txt"), "approved\n"))
		session := e.threadYAML(alias).Agent.AgentSessionID
		e.post(alias, "yes")
		e.beforeResume(alias)
		e.activate(alias, 0, run.OutcomeTurnCompleted)
		fileIs(t, e.file("x.txt"), "approved\n")
		if m := e.resolved(alias); m.Decision != "approved" {
			t.Errorf("pending_prompt_resolved %+v", m)
		}
		wantSameSession(t, e.e2eEnv, alias, session)
	})
}

// wantSameSession fails unless the thread's agent session is still
// session and no run said it could not resume it.
func wantSameSession(t *testing.T, e *e2eEnv, alias, session string) {
	t.Helper()
	if slices.Contains(e.statusTokens(alias), "resume_failed") {
		t.Errorf("the resume failed: %v", e.itemTypes(alias))
	}
	if got := e.threadYAML(alias).Agent.AgentSessionID; session == "" || got != session {
		t.Errorf("agent session %q after the resume, want the parked turn's %q", got, session)
	}
}
