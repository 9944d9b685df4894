package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// TestACPShellSpellingsOfADeniedCommand: an ACP agent asks, in a guarded
// thread whose policy allows every command, under the machine owner's
// `deny exec "rm *"`, for `rm -rf x` fed to a shell in ways the gate once
// let through: options before -c, and a script read from /dev/stdin
// through a here-string. The owner's deny wins: each is answered with the
// reject option, never allow_once, is posted as policy_denied, and x
// survives. The fake agent runs what it is allowed to: the thread's
// allowed command runs.
func TestACPShellSpellingsOfADeniedCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	denied := []string{
		`bash --norc -c 'rm -rf x'`,
		`bash /dev/stdin <<< 'rm -rf x'`,
	}
	runs := func(command string) agenttest.Step {
		return agenttest.Step{Call: &agenttest.Tool{Name: acptest.Runs, Effect: policy.EffectExec, Target: policy.Target{Command: command}}}
	}

	e := newE2E(t)
	e.Config.Policy.Rules = []policy.Rule{{Effect: policy.EffectExec, Command: []string{"rm *"}, Action: policy.DecisionDeny}}
	script := agenttest.WriteScript(t, agenttest.Turn(runs(denied[0]), runs(denied[1]), runs("touch allowed")))
	ac := e.agentConfig("acp")
	ac.Executable, ac.Env = self, map[string]string{acptest.FakeAgentEnv: script}
	e.writeConfig()
	x := filepath.Join(e.work, "x")
	if err := os.MkdirAll(x, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(x, "keep"), []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	const alias = "projects/p1/shell-spellings"
	e.handOffGuarded(alias, "acp", &policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
		{Effect: policy.EffectExec, Action: policy.DecisionAllow},
	}}, "remove x")
	e.activate(alias, 0, run.OutcomeTurnCompleted)

	if _, err := os.Stat(filepath.Join(x, "keep")); err != nil {
		t.Errorf("x did not survive: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.work, "allowed")); err != nil {
		t.Errorf("the allowed command did not run (%v): x surviving proves nothing", err)
	}
	var deniedCommands []string
	for _, it := range e.itemsOfType(alias, "policy_denied") {
		var m struct {
			Call struct {
				Target policy.Target `json:"target"`
			} `json:"call"`
		}
		if err := json.Unmarshal(it.Metadata, &m); err != nil {
			t.Fatal(err)
		}
		deniedCommands = append(deniedCommands, m.Call.Target.Command)
	}
	if !slices.Equal(deniedCommands, denied) {
		t.Errorf("policy_denied items for %q, want %q", deniedCommands, denied)
	}
	// How bhw-run answered the agent's permission requests, as its
	// thread.log has them (the tool results say why, not the option).
	want := []string{"selected reject_once", "selected reject_once", "selected allow_once"}
	if got := e.acpAnswers(alias); !slices.Equal(got, want) {
		t.Errorf("the permission requests were answered %q, want %q", got, want)
	}
}

// acpAnswers are bhw-run's answers to an ACP agent's permission
// requests, in order, as thread.log has them: the outcome and the option
// ("selected reject_once", "cancelled").
func (e *e2eEnv) acpAnswers(alias string) []string {
	b, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		_, stream, text, ok := agent.ParseLogLine(line)
		if !ok || stream != agent.StreamStdin {
			continue
		}
		var m struct {
			Result struct {
				Outcome *struct {
					Outcome  string `json:"outcome"`
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(text), &m) == nil && m.Result.Outcome != nil {
			out = append(out, strings.TrimSpace(m.Result.Outcome.Outcome+" "+m.Result.Outcome.OptionID))
		}
	}
	return out
}
