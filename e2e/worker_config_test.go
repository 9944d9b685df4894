//go:build realcli

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// workerConfigPy writes config.yaml as blobhub-worker writes its files
// (its own models, model_dump, yaml.safe_dump), every key of its Config set:
// the worker-only ones bhw-run has no feature for included.
const workerConfigPy = `
import sys, yaml
from blobhub_worker.models.disk import Config
from blobhub_worker.config.validate import validate_config
c = Config.model_validate({
    "polling": {"interval_idle_ms": 1000},
    "concurrency": {"max_agents": 2, "held_waits_max": 3},
    "agents": {
        "claude_code": {"executable": "claude", "permissions": "guarded", "turn_retries": 2, "debug": True, "wait": "held"},
        "antigravity": {"executable": "agy", "permissions": "approval"},
        "test_double": {"permissions": "autonomous", "wait": "parked"},
    },
    "sections": [{"name": "s", "job_type": "session_agent_harness", "session": {
        "org_id": "org_1", "blob_id": "blb_1", "revision_id": "rev_1", "session_id": "ses_1", "session_prefix": "projects/"}}],
    "policy": {"allow_autonomous": False, "rules": [
        {"id": "stay-home", "effect": "write", "action": "deny", "outside": "work_folder"},
        {"id": "no-push", "effect": "exec", "action": "ask", "command": ["git push*", "git -C * push*"]},
        {"id": "web", "effect": "network"},
    ]},
    "attachments": {"inbox": "inbox"},
})
validate_config(c)
sys.stdout.write(yaml.safe_dump(c.model_dump(), sort_keys=False))
`

// TestWorkerConfigLoads: config.yaml as blobhub-worker writes it loads in
// bhw-run: the keys it has a feature for are read (the policy, the agents,
// antigravity and test_double among them, the inbox, the turn retries),
// the others (held waits, debug, wait) accepted and named by doctor, never
// refused.
func TestWorkerConfigLoads(t *testing.T) {
	w := peerWorker(t)
	py := filepath.Join(filepath.Dir(w), "python")
	out, err := exec.CommandContext(t.Context(), py, "-c", workerConfigPy).Output()
	if err != nil {
		t.Fatalf("the worker's config: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	o := setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: path, Home: dir, Adapters: adapters}
	s, err := setup.Resolve(o, "")
	if err != nil {
		t.Fatalf("bhw-run refuses the worker's config.yaml:\n%s\n%v", out, err)
	}
	rules := s.Config.Policy.Rules
	if len(rules) != 3 || rules[0].ID != "stay-home" || rules[0].Outside != policy.OutsideWorkFolder ||
		!slices.Equal(rules[1].Command, []string{"git push*", "git -C * push*"}) || rules[2].EffectiveAction() != policy.DecisionAllow {
		t.Errorf("policy.rules read as %+v", rules)
	}
	if a := s.Config.Attachments; a == nil || a.Inbox != "inbox" {
		t.Errorf("attachments read as %+v", a)
	}
	if cc := s.Config.Agents["claude_code"]; cc == nil || cc.Permissions != "guarded" || cc.TurnRetries == nil || *cc.TurnRetries != 2 || !cc.Debug || cc.Wait != "held" {
		t.Errorf("agents.claude_code read as %+v", cc)
	}
	for _, k := range []string{"polling", "concurrency.held_waits_max", "agents.claude_code.debug", "agents.claude_code.wait"} {
		if !slices.Contains(s.Ignored, k) {
			t.Errorf("ignored %v lacks %s", s.Ignored, k)
		}
	}
	// turn_retries is read (the resumes after a transient API error).
	if slices.Contains(s.Ignored, "agents.claude_code.turn_retries") || s.Config.TurnRetries("claude_code") != 2 || s.Config.TurnRetries("codex") != setup.DefaultTurnRetries {
		t.Errorf("turn_retries: ignored %v, claude_code %d, codex %d", s.Ignored, s.Config.TurnRetries("claude_code"), s.Config.TurnRetries("codex"))
	}
	var named string
	for _, c := range run.Doctor(t.Context(), o) {
		if c.Check == "config_worker_keys" {
			named = c.Detail
		}
		if c.Check == "config" && !c.OK {
			t.Errorf("doctor's config check fails: %s", c.Detail)
		}
	}
	if !strings.Contains(named, "concurrency.held_waits_max") || strings.Contains(named, "turn_retries") {
		t.Errorf("doctor names %q, want the worker-only keys", named)
	}
}

// TestOlderPolicyRulesNamedByDoctor: policy.rules in bhw-run's older
// spelling still load (read in the worker's shape), and doctor fails
// config_policy saying how to rewrite them: the worker reads the older
// write rule as allowing every write.
func TestOlderPolicyRulesNamedByDoctor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("policy:\n  rules:\n    - {effect: write, path: \"/etc/**\", decision: deny}\n"+
		"sections:\n  - {name: s, session: {org_id: org_1, blob_id: blb_1, revision_id: rev_1, session_id: ses_1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: path, Home: dir, Adapters: adapters}
	s, err := setup.Resolve(o, "")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Config.Policy.Rules; len(r) != 1 || r[0].ID != "rule-1" || r[0].Outside != policy.OutsideWorkFolder || r[0].Action != policy.DecisionDeny {
		t.Errorf("read as %+v", r)
	}
	var found bool
	for _, c := range run.Doctor(t.Context(), o) {
		if c.Check == "config_policy" {
			found = !c.OK && strings.Contains(c.Detail, `path "/etc/**" became outside: work_folder`) && strings.Contains(c.Fix, "{id, effect, action, command: [globs], outside}")
		}
	}
	if !found {
		t.Error("doctor does not fail config_policy for the older spelling")
	}
}
