package e2e

// Antigravity through the binary, against the stand-in agy (the test
// binary, antigravity/agytest): every posture, a park answered and
// resumed under its grant, a kill -9 mid-turn, and the work folder's
// .agents/hooks.json as the operator left it after each run. The hook agy
// runs before each call is the built bhw-run itself.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	agentproc "github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/antigravity/agytest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

const agyType = antigravity.Type

// agyE2E is an e2eEnv whose agents.antigravity is the stand-in playing
// script (each agy process the script's next turn), and whose work folder
// holds the operator's own .agents/hooks.json.
type agyE2E struct {
	*e2eEnv
	script string
	hooks  []byte // the operator's hooks.json
}

func newAgyE2E(t *testing.T, s agenttest.Script) *agyE2E {
	e := &agyE2E{e2eEnv: newE2E(t)}
	exe, _, script := agytest.Command(t, s)
	e.script = script
	ac := e.agentConfig(agyType)
	ac.Executable, ac.Model = exe, "gemini-3-pro"
	ac.Env = map[string]string{agytest.ScriptEnv: script}
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	e.signedIn()
	e.hooks = []byte("{\n  \"operator\": {\"enabled\": false}\n}\n")
	if err := os.MkdirAll(filepath.Join(e.work, ".agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.hooksFile(), e.hooks, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// signedIn makes the folder agy keeps its sign-in and conversations in,
// as a signed-in user has it; the confinement lets agy write it.
func (e *agyE2E) signedIn() {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Join(e.home, ".gemini", "antigravity"), 0o700); err != nil {
		e.t.Fatal(err)
	}
}

func (e *agyE2E) hooksFile() string { return filepath.Join(e.work, ".agents", "hooks.json") }

// wantHooksRestored: the operator's hooks.json is as they left it.
func (e *agyE2E) wantHooksRestored() {
	e.t.Helper()
	b, err := os.ReadFile(e.hooksFile())
	if err != nil || !bytes.Equal(b, e.hooks) {
		e.t.Fatalf("the operator's hooks.json reads %q (%v), want %q", b, err, e.hooks)
	}
}

// conversation is what the stand-in kept of a conversation: one prompt a
// line.
func (e *agyE2E) conversation(id string) string {
	b, _ := os.ReadFile(filepath.Join(e.home, ".gemini", "antigravity", "conversations", id))
	return string(b)
}

func TestE2EAntigravityAutonomousAndResume(t *testing.T) {
	e := newAgyE2E(t, agenttest.Script{SessionID: "conv-auto", Turns: [][]agenttest.Step{
		{{Tool: agenttest.Exec("echo one > one.txt")}, {Text: "wrote one"}},
		{{Text: "second turn"}},
	}})
	const alias = "projects/p1/agy-auto"
	e.handOff(alias, agyType, "autonomous", "write one")
	sum := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if b, err := os.ReadFile(filepath.Join(e.work, "one.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("one.txt: %q %v", b, err)
	}
	if sum.Usage.InputTokens != 14 || sum.Usage.OutputTokens != 3 {
		t.Errorf("usage %+v", sum.Usage)
	}
	types := strings.Join(e.itemTypes(alias), " ")
	if !strings.Contains(types, "tool_call tool_result text") {
		t.Errorf("items %s", types)
	}
	if th := e.threadYAML(alias); th.Agent.AgentSessionID != "conv-auto" {
		t.Fatalf("session %q, want conv-auto", th.Agent.AgentSessionID)
	}
	log, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil || !strings.Contains(string(log), "--dangerously-skip-permissions --add-dir "+e.work+" --model gemini-3-pro") {
		t.Errorf("agy's command line in thread.log lacks the work folder and the model (%v)", err)
	}
	e.wantHooksRestored()
	e.post(alias, "and again")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if c := e.conversation("conv-auto"); !strings.Contains(c, "write one") || !strings.Contains(c, "and again") {
		t.Fatalf("the second turn did not resume the conversation: %q", c)
	}
	e.wantHooksRestored()
}

func TestE2EAntigravityGuardedDeny(t *testing.T) {
	denied := "touch denied.txt"
	e := newAgyE2E(t, agenttest.Script{Turns: [][]agenttest.Step{{
		{Call: agenttest.Exec(denied)}, {Call: agenttest.Exec("echo allowed > allowed.txt")}, {Text: "one of two"},
	}}})
	const alias = "projects/p1/agy-guarded"
	e.handOffGuarded(alias, agyType, &policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
		{Effect: policy.EffectExec, ID: "echo", Command: []string{"echo *"}, Action: policy.DecisionAllow},
		{Effect: policy.EffectExec, ID: "touch", Command: []string{"touch *"}, Action: policy.DecisionDeny},
	}}, "try both")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if _, err := os.Stat(filepath.Join(e.work, "denied.txt")); err == nil {
		t.Fatal("the denied command ran")
	}
	if _, err := os.Stat(filepath.Join(e.work, "allowed.txt")); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
	if n := len(e.itemsOfType(alias, agent.ItemPolicyDenied)); n != 1 {
		t.Errorf("%d policy_denied items: %v", n, e.itemTypes(alias))
	}
	e.wantHooksRestored()
}

func TestE2EAntigravityEveryCallDenied(t *testing.T) {
	e := newAgyE2E(t, agenttest.Script{Turns: [][]agenttest.Step{{{Call: agenttest.Exec("touch nope.txt")}, {Text: "could not"}}}})
	const alias = "projects/p1/agy-denied"
	e.handOffGuarded(alias, agyType, &policy.Policy{Default: policy.DecisionDeny}, "try")
	code, out, _ := e.run("--json", alias)
	sum := parseSummary(t, out)
	if code != exit.TurnFailed || sum.Outcome != run.OutcomeTurnFailed || sum.Error == nil ||
		!strings.Contains(sum.Error.Message, "every tool call was denied by the gate (1/1)") {
		t.Fatalf("exit %d outcome %q error %+v, want a failed turn saying every call was denied", code, sum.Outcome, sum.Error)
	}
	if _, err := os.Stat(filepath.Join(e.work, "nope.txt")); err == nil {
		t.Fatal("the denied command ran")
	}
	e.wantHooksRestored()
}

func TestE2EAntigravityApprovalParkResumeGrant(t *testing.T) {
	cmd := "echo approved > approved.txt"
	e := newAgyE2E(t, agenttest.Script{SessionID: "conv-park", Turns: [][]agenttest.Step{
		{{Text: "asking"}, {Call: agenttest.Exec(cmd)}, {Text: "never said"}},
		{{Call: agenttest.Exec(cmd)}, {Text: "done"}},
	}})
	const alias = "projects/p1/agy-park"
	e.handOff(alias, agyType, "approval", "write it")
	e.activate(alias, 0, run.OutcomeParked)
	e.wantParkedResult(alias)
	prompts := e.itemsOfType(alias, agent.ItemPendingPrompt)
	if len(prompts) != 1 {
		t.Fatalf("%d pending prompts", len(prompts))
	}
	var pp struct {
		Prompt struct {
			Questions []struct {
				GrantKey string `json:"grant_key"`
				Subject  string `json:"subject"`
			} `json:"questions"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(prompts[0].Metadata, &pp)
	if q := pp.Prompt.Questions; len(q) != 1 || q[0].GrantKey != "run_command:"+cmd || q[0].Subject != "run_command" {
		t.Fatalf("the question %+v, want grant_key run_command:%s", q, cmd)
	}
	for _, it := range e.itemsOfType(alias, agent.ItemText) {
		if strings.Contains(it.Content[0].Text, "never said") {
			t.Fatal("agy went on after the park")
		}
	}
	if _, err := os.Stat(filepath.Join(e.work, "approved.txt")); err == nil {
		t.Fatal("the parked call ran")
	}
	th := e.threadYAML(alias)
	if th.Agent.AgentSessionID != "conv-park" || th.Agent.Process != nil {
		t.Fatalf("thread.yaml session %q process %+v", th.Agent.AgentSessionID, th.Agent.Process)
	}
	e.wantHooksRestored()

	e.post(alias, "yes")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if b, err := os.ReadFile(filepath.Join(e.work, "approved.txt")); err != nil || string(b) != "approved\n" {
		t.Fatalf("approved.txt %q %v: the approved call did not run", b, err)
	}
	if n := len(e.itemsOfType(alias, agent.ItemPendingPrompt)); n != 1 {
		t.Errorf("%d pending prompts, want 1: the grant allows the call once asked again", n)
	}
	if c := e.conversation("conv-park"); strings.Count(c, "\n") < 2 {
		t.Errorf("the answer did not resume the conversation: %q", c)
	}
	if th := e.threadYAML(alias); th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("after the approved turn: prompt %+v grants %v", th.Prompt, th.Grants)
	}
	e.wantHooksRestored()
}

func TestE2EAntigravityKill9MidTurn(t *testing.T) {
	e := newAgyE2E(t, agenttest.Script{Turns: [][]agenttest.Step{
		{{Call: agenttest.Read(filepath.Join("/", "etc", "hostname"))}, {Text: "working"}, {Hang: true}},
		{{Text: "finished after the kill"}},
	}})
	e.agentConfig(agyType).Permissions = "approval"
	e.writeConfig()
	const alias = "projects/p1/agy-kill"
	e.handOffGuarded(alias, agyType, &policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
		{ID: "read", Effect: policy.EffectRead, Action: policy.DecisionAllow}}}, "work")
	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	e.waitSaid(alias, "working", "the agent's text")
	th := e.threadYAML(alias)
	if th.Agent.Process == nil || !agentproc.GroupAlive(th.Agent.Process.Pgid) {
		t.Fatalf("no live agent recorded: %+v", th.Agent.Process)
	}
	pgid := th.Agent.Process.Pgid
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait()
	if b, _ := os.ReadFile(e.hooksFile()); bytes.Equal(b, e.hooks) {
		t.Fatal("the hook was not in while the turn ran")
	}
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if agentproc.GroupAlive(pgid) {
		t.Error("the killed run's agy outlived the next run")
	}
	e.wantHooksRestored()
}

// TestDoctorAntigravity: the doctor finds agy, asks its version, and says
// its sign-in is not checked without a key, checked with one.
func TestDoctorAntigravity(t *testing.T) {
	e := newAgyE2E(t, agenttest.Turn())
	e.srv.Put("notes/readme", `{"type":"text","text":"hello"}`)
	e.fakeClaudeDone()
	e.Env = append(e.Env, doctorAgentKeys...)
	_, checks := e.doctor(bhtest.RunnerKey)
	if c := checks["agent antigravity"]; !c.OK || !strings.HasSuffix(c.Detail, agytest.Version) {
		t.Fatalf("agent antigravity: %+v, want the stand-in's version", c)
	}
	if c := checks["agent antigravity login"]; !c.OK || !strings.HasPrefix(c.Detail, "not checked: ") {
		t.Fatalf("agent antigravity login: %+v", c)
	}
	e.agentConfig(agyType).Env["GEMINI_API_KEY"] = "k"
	e.writeConfig()
	_, checks = e.doctor(bhtest.RunnerKey)
	if c := checks["agent antigravity login"]; !c.OK || c.Detail != "GEMINI_API_KEY is set in its environment" {
		t.Fatalf("agent antigravity login with a key: %+v", c)
	}
}

// TestE2EAntigravityTwoThreadsOneFolder: two threads of one work folder
// run at once, each a bhw-run of its own: the one that ends first leaves
// the hook to the other, each agy's calls go to its own run's gate, and
// the last one out puts the operator's file back.
func TestE2EAntigravityTwoThreadsOneFolder(t *testing.T) {
	e := newAgyE2E(t, agenttest.Script{})
	pol := &policy.Policy{Default: policy.DecisionDeny, Rules: []policy.Rule{
		{Effect: policy.EffectExec, ID: "any", Command: []string{"*"}, Action: policy.DecisionAllow}}}
	// Each thread its own script: the stand-in's script is in the thread's
	// agents.antigravity.env, the same for both, so it names a turn per
	// process: the first process (A) waits for the file "go", the second
	// (B) runs at once.
	agenttest.Play(t, e.script, agenttest.Script{Turns: [][]agenttest.Step{
		{{Text: "A started"}, {Call: agenttest.Exec("i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo A > a.txt")}, {Text: "A done"}},
		{{Call: agenttest.Exec("echo B > b.txt")}, {Text: "B done"}},
	}})
	const a, b = "projects/p1/agy-a", "projects/p1/agy-b"
	e.handOffGuarded(a, agyType, pol, "A")
	e.handOffGuarded(b, agyType, pol, "B")
	pa := e.start(bhtest.RunnerKey, nil, "--json", a)
	e.waitSaid(a, "A started", "thread A's agent")
	e.activate(b, 0, run.OutcomeTurnCompleted)
	if _, err := os.Stat(filepath.Join(e.work, "b.txt")); err != nil {
		t.Fatalf("B's call did not run: %v", err)
	}
	if b, _ := os.ReadFile(e.hooksFile()); !strings.Contains(string(b), antigravity.HookKey) {
		t.Fatalf("B took the hook from A, still running: %s", b)
	}
	if err := os.WriteFile(filepath.Join(e.work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := pa.wait(); code != 0 {
		t.Fatalf("A: exit %d\n%s%s", code, pa.stdout, tail(pa.stderr.String(), 3000))
	}
	if s := parseSummary(t, pa.stdout.String()); s.Outcome != run.OutcomeTurnCompleted {
		t.Fatalf("A: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(e.work, "a.txt")); err != nil {
		t.Fatalf("A's call did not run: %v", err)
	}
	for alias, cmd := range map[string]string{a: "echo A > a.txt", b: "echo B > b.txt"} {
		raw, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(raw), " run gate "); n != 1 || !strings.Contains(string(raw), cmd) {
			t.Errorf("%s: %d gate decisions in its thread.log, want one, for its own call %q", alias, n, cmd)
		}
	}
	e.wantHooksRestored()
}
