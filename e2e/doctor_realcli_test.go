//go:build realcli

package e2e

// `bhw-run doctor` on a whole set-up with the real pinned CLIs; the faults
// it finds are in doctor_test.go.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestDoctorAllHold: with the real pinned Claude Code and Codex configured,
// a key BlobHub takes and a session that exists, every line is ✓ and the
// doctor exits 0; the text form is one line a check.
func TestDoctorAllHold(t *testing.T) {
	e := doctorEnv(t)
	e.agentConfig(claudeType).Executable = claudeBin(t)
	e.agentConfig(claudeType).Env = nil
	e.agentConfig(codexType).Executable = codexBin(t)
	e.writeConfig()
	code, checks := e.doctor(bhtest.RunnerKey)
	if code != 0 {
		t.Fatalf("doctor exit %d, want 0", code)
	}
	onlyFailed(t, checks)
	for _, name := range []string{"credentials", "api", "config", "section", "state_dir", "blobhub_worker", "agent claude_code", "agent claude_code login", "agent codex", "agent codex login", "agent codex preflight", "slots"} {
		if _, ok := checks[name]; !ok {
			t.Errorf("no check %q", name)
		}
	}
	if d := checks["agent claude_code"].Detail; !strings.Contains(d, "(Claude Code)") {
		t.Errorf("claude's version: %q", d)
	}
	if d := checks["agent codex"].Detail; !strings.Contains(d, "codex-cli ") {
		t.Errorf("codex's version: %q", d)
	}
	if d := checks["api"].Detail; !strings.Contains(d, bhtest.RunnerUserID) {
		t.Errorf("api: %q, want the key's user", d)
	}
	if d := checks["state_dir"].Detail; !strings.Contains(d, e.state) {
		t.Errorf("state_dir: %q, want the state tree's path", d)
	}

	p := e.start(bhtest.RunnerKey, nil, "doctor")
	if code := p.wait(); code != 0 {
		t.Fatalf("doctor (text) exit %d\n%s%s", code, p.stdout, p.stderr)
	}
	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	// One line a check, and the summary.
	if len(lines) != len(checks)+1 || lines[len(lines)-1] != fmt.Sprintf("✓ doctor: all %d checks hold", len(checks)) {
		t.Errorf("%d lines for %d checks, or no summary line last:\n%s", len(lines), len(checks), p.stdout)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "✓ ") {
			t.Errorf("line %q does not start with ✓", l)
		}
	}
}
