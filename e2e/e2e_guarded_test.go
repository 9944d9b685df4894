//go:build realcli

package e2e

// End-to-end tests of the guarded posture (docs/gate.md) with the real pinned
// CLIs: a thread policy allows reads and `echo *`, tries to allow writes to a
// folder outside the work folder that a worker rule denies, and asks for the
// rest. Each run shows the rules in force first; the allowed command runs
// unasked; the worker's deny wins and the turn goes on; the asked call parks
// and a "yes" lets it run once, with no second question; and
// `bhw-run policy explain` says what the gate did, call by call.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// guardedScenario is what both agents are put through.
type guardedScenario struct {
	e          *e2eEnv
	agent      string
	outside    string // a folder outside the work folder and the TMPDIR
	allowedCmd string // matches the thread's exec allow
	askedCmd   string // matches no rule: the default asks
	deniedPath string // under outside: the thread allows, the worker denies
	requests   func() int
	// rules are the rules policy_applied lists, "source/effect/decision"
	// (nil: the worker's write deny and the thread's policy).
	rules []string
}

func newGuardedScenario(e *e2eEnv, agent string, requests func() int) *guardedScenario {
	e.t.Helper()
	s := &guardedScenario{
		e: e, agent: agent, requests: requests,
		outside:    filepath.Join(e.root, "outside"),
		allowedCmd: "echo allowed > allowed.txt",
		askedCmd:   "touch asked.txt",
	}
	s.deniedPath = filepath.Join(s.outside, "denied.txt")
	if err := os.MkdirAll(s.outside, 0o700); err != nil {
		e.t.Fatal(err)
	}
	for _, d := range []string{e.work, e.tmp} {
		if s.outside == d || strings.HasPrefix(s.outside, d+"/") {
			e.t.Fatalf("the outside folder %s is under %s", s.outside, d)
		}
	}
	e.Config.Policy.Rules = []policy.Rule{{ID: "stay-home", Effect: policy.EffectWrite, Outside: policy.OutsideWorkFolder, Action: policy.DecisionDeny}}
	e.writeConfig()
	return s
}

// threadPolicy allows reads, `echo *` and (in vain) writes outside.
func (s *guardedScenario) threadPolicy() *policy.Policy {
	return &policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
		{ID: "read", Effect: policy.EffectRead, Action: policy.DecisionAllow},
		{ID: "echo", Effect: policy.EffectExec, Command: []string{"echo *"}, Action: policy.DecisionAllow},
		{ID: "write-anywhere", Effect: policy.EffectWrite, Outside: policy.OutsideWorkFolder, Action: policy.DecisionAllow},
	}}
}

// policyMissing (e): a guarded thread without a policy fails the checklist
// and the agent never starts.
func (s *guardedScenario) policyMissing(t *testing.T) {
	e := s.e
	alias := "projects/p1/nopolicy-" + s.agent
	e.handOffGuarded(alias, s.agent, nil, "do something")
	before := s.requests()
	sum := e.activate(alias, exit.Failed, run.OutcomeFailed)
	if sum.Error == nil || sum.Error.Code != exit.CodePolicyMissing {
		t.Fatalf("summary error %+v, want %s", sum.Error, exit.CodePolicyMissing)
	}
	if st := e.wireState(alias); st != envelope.StateFailed {
		t.Errorf("wire state %q, want failed", st)
	}
	var found bool
	for _, it := range e.items("worker") {
		if m := meta(t, it); m.Type == agent.ItemThreadFailed && m.Thread.Alias == alias {
			found = true
			if m.Thread.Error.Code != exit.CodePolicyMissing {
				t.Errorf("thread_failed error code %q, want %s", m.Thread.Error.Code, exit.CodePolicyMissing)
			}
		}
	}
	if !found {
		t.Errorf("no thread_failed item for %s on worker", alias)
	}
	if n := s.requests() - before; n != 0 {
		t.Errorf("the model got %d requests: the agent started without a policy", n)
	}
	// On the thread: the person's message, then the failure's reason in
	// the worker's shape (status error, the code in it), nothing of an
	// agent.
	if got := e.itemTypes(alias); !slices.Equal(got, []string{"person", agent.ItemStatus}) {
		t.Errorf("items of the failed thread %v, want the person's and the failure's reason", got)
	}
	for _, it := range e.itemsOfType(alias, agent.ItemStatus) {
		var m struct {
			Status, Code string
		}
		if json.Unmarshal(it.Metadata, &m) != nil || m.Status != "error" || m.Code != exit.CodePolicyMissing {
			t.Errorf("the failure's reason reads %s, want status error with %s", it.Metadata, exit.CodePolicyMissing)
		}
	}
}

// checkPolicyFirst (d): the run's own items (from index from on, person
// items aside) start with exactly one policy_applied naming the rules in
// force.
func (s *guardedScenario) checkPolicyFirst(t *testing.T, alias string, from int) {
	t.Helper()
	items := s.e.items(alias)[from:]
	var first []string
	applied := 0
	for _, it := range items {
		m := meta(t, it)
		if m.Type == "" {
			continue
		}
		first = append(first, m.Type)
		if m.Type != agent.ItemPolicyApplied {
			continue
		}
		applied++
		// blobhub-worker's shape: {rules: [{id, origin, action}], default,
		// counts}, bhw-run's effect beside each rule.
		var pm struct {
			Default string `json:"default"`
			Rules   []struct {
				ID     string `json:"id"`
				Origin string `json:"origin"`
				Effect string `json:"effect"`
				Action string `json:"action"`
			} `json:"rules"`
			Counts struct {
				Rules    int `json:"rules"`
				Reported int `json:"reported"`
			} `json:"counts"`
		}
		if err := json.Unmarshal(it.Metadata, &pm); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range pm.Rules {
			got = append(got, r.Origin+"/"+r.Effect+"/"+r.Action)
		}
		want := []string{"worker/write/deny", "thread/read/allow", "thread/exec/allow", "thread/write/allow"}
		if s.rules != nil {
			want = s.rules
		}
		if pm.Default != "ask" || !slices.Equal(got, want) || pm.Counts.Rules != len(want) || pm.Counts.Reported != len(want) {
			t.Errorf("policy_applied %s, want default ask and rules %v", it.Metadata, want)
		}
	}
	if len(first) == 0 || first[0] != agent.ItemPolicyApplied || applied != 1 {
		t.Fatalf("this run's items %v: want exactly one policy_applied, first", first)
	}
}

// checkDenied (b): one policy_denied by the worker's rule for the write.
func (s *guardedScenario) checkDenied(t *testing.T, alias string) {
	t.Helper()
	denied, m := s.e.oneDenied(t, alias)
	if m.Rule != "stay-home" || m.Origin != "worker" || m.Index != 0 || m.Effect != policy.EffectWrite || m.Detail != s.deniedPath {
		t.Errorf("policy_denied %s, want rule stay-home (worker) for the write of %s", denied.Metadata, s.deniedPath)
	}
	if m.Call.Effect != policy.EffectWrite || !slices.Contains(m.Call.Target.Paths, s.deniedPath) {
		t.Errorf("policy_denied call %+v, want the write of %s", m.Call, s.deniedPath)
	}
	if brief := denied.Content[0].Text; !strings.Contains(brief, `denied by worker rule "stay-home"`) {
		t.Errorf("policy_denied brief %q", brief)
	}
	if exists(s.deniedPath) {
		t.Errorf("%s was written despite the worker's deny", s.deniedPath)
	}
}

// checkParked (a, c): the first run ran the allowed command unasked and
// parked on the asked one.
func (s *guardedScenario) checkParked(t *testing.T, alias string) {
	t.Helper()
	e := s.e
	if b, err := os.ReadFile(filepath.Join(e.work, "allowed.txt")); err != nil || string(b) != "allowed\n" {
		t.Errorf("allowed.txt = %q, %v: the allowed command should have run", b, err)
	}
	if exists(filepath.Join(e.work, "asked.txt")) {
		t.Fatal("asked.txt exists: the asked call ran before a person answered")
	}
	prompts := e.itemsOfType(alias, agent.ItemPendingPrompt)
	if len(prompts) != 1 {
		t.Fatalf("%d pending_prompt items, want 1: %v", len(prompts), e.itemTypes(alias))
	}
	pm := meta(t, prompts[0])
	call, _ := pm.Prompt["call"].(map[string]any)
	target, _ := call["target"].(map[string]any)
	if pm.Prompt["kind"] != policy.KindApproval || target["command"] != s.askedCmd {
		t.Fatalf("pending_prompt %+v, want an approval of %q", pm.Prompt, s.askedCmd)
	}
	// The allowed command has its result; the only prompt is the asked one.
	var allowedResult bool
	calls := map[string]bool{}
	for _, it := range e.itemsOfType(alias, agent.ItemToolCall) {
		if in, _ := json.Marshal(meta(t, it).Tool["input"]); strings.Contains(string(in), "allowed.txt") {
			id, _ := meta(t, it).Tool["invocation_id"].(string)
			calls[id] = true
		}
	}
	for _, it := range e.itemsOfType(alias, agent.ItemToolResult) {
		tool := meta(t, it).Tool
		if id, _ := tool["invocation_id"].(string); calls[id] && tool["is_error"] != true {
			allowedResult = true
		}
	}
	if !allowedResult {
		t.Errorf("no successful tool_result for the allowed command: %v", e.itemTypes(alias))
	}
	ends := e.itemsOfType(alias, agent.ItemTurnEnd)
	if got := meta(t, ends[len(ends)-1]).Outcome; got != "parked" {
		t.Errorf("turn_end outcome %q, want parked", got)
	}
}

// checkReleased (c): "yes" let the asked call run once, with no second
// question, under the consumed grant.
func (s *guardedScenario) checkReleased(t *testing.T, alias string) {
	t.Helper()
	e := s.e
	if !exists(filepath.Join(e.work, "asked.txt")) {
		t.Fatal("asked.txt is missing: the approved call did not run")
	}
	types := e.itemTypes(alias)
	if n := count(types, agent.ItemPendingPrompt); n != 1 {
		t.Fatalf("%d pending_prompt items, want exactly 1: %v", n, types)
	}
	res := e.itemsOfType(alias, agent.ItemPendingPromptResolved)
	if len(res) != 1 || meta(t, res[0]).Decision != "approved" {
		t.Fatalf("pending_prompt_resolved %v", types)
	}
	th := e.threadYAML(alias)
	if th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("thread.yaml prompt %+v grants %v after the released call", th.Prompt, th.Grants)
	}
	if n := count(types, agent.ItemPolicyDenied); n != 1 {
		t.Errorf("%d policy_denied items after the resumed turn, want still 1", n)
	}
	if st := e.wireState(alias); st != envelope.StateActive {
		t.Errorf("wire state %q", st)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "allowed.txt")); string(b) != "allowed\n" {
		t.Errorf("allowed.txt = %q: the allowed command ran again", b)
	}
	noProcessesLeft(t, nil, e.work)
}

// gateDecisions are the gate's decisions for alias as thread.log records
// them ("gate <decision> <call>: <reason>"), in order.
func (s *guardedScenario) gateDecisions(alias string) []string {
	e := s.e
	b, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if _, stream, text, ok := agent.ParseLogLine(line); ok && stream == agent.StreamRun {
			if rest, ok := strings.CutPrefix(text, "gate "); ok {
				out = append(out, rest)
			}
		}
	}
	return out
}

// explainAgrees feeds each call the run made to `bhw-run policy explain`
// and wants its decision line to be the gate's first decision about that
// call, reason included.
func (s *guardedScenario) explainAgrees(t *testing.T, alias string) {
	e := s.e
	decisions := s.gateDecisions(alias)
	t.Logf("gate decisions:\n%s", strings.Join(decisions, "\n"))
	for _, c := range []struct {
		args    []string
		target  string
		outcome string
	}{
		{[]string{"--command", s.allowedCmd}, s.allowedCmd, policy.DecisionAllow},
		{[]string{"--path", s.deniedPath}, s.deniedPath, policy.DecisionDeny},
		{[]string{"--effect", "exec", "--command", s.askedCmd}, s.askedCmd, policy.DecisionAsk},
	} {
		code, out, _ := e.run(append(append([]string{"policy", "explain"}, c.args...), alias)...)
		if code != 0 {
			t.Fatalf("policy explain %v → exit %d", c.args, code)
		}
		var decision, reason string
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, "decision: "); ok {
				decision, reason, _ = strings.Cut(rest, " (")
				reason = strings.TrimSuffix(reason, ")")
			}
		}
		if decision != c.outcome {
			t.Errorf("policy explain %v says %q (%s), but the run's outcome was %s", c.args, decision, reason, c.outcome)
		}
		var gate string
		for _, d := range decisions {
			if strings.Contains(d, c.target) {
				gate = d
				break
			}
		}
		if gate == "" {
			t.Errorf("thread.log has no gate decision about %q: the call never reached the gate", c.target)
			continue
		}
		if !strings.HasPrefix(gate, decision+" ") || !strings.HasSuffix(gate, ": "+reason) {
			t.Errorf("policy explain %v says %s (%s); the gate logged %q", c.args, decision, reason, gate)
		}
	}
}

func TestE2EGuardedClaude(t *testing.T) {
	ce := newClaudeE2E(t)
	e, model := ce.e2eEnv, ce.model
	s := newGuardedScenario(e, claudeType, func() int { return len(model.Requests()) })

	t.Run("no policy", s.policyMissing)

	const alias = "projects/p1/guarded-claude"
	asked := claudetest.Tool("Bash", map[string]any{"command": s.askedCmd, "description": "make the marker"})
	model.Push(
		claudetest.Tool("Bash", map[string]any{"command": s.allowedCmd, "description": "write the allowed marker"}),
		claudetest.Tool("Write", map[string]any{"file_path": s.deniedPath, "content": "should never land\n"}),
		asked,
	)
	e.handOffGuarded(alias, claudeType, s.threadPolicy(), "make the markers")
	from := len(e.items(alias))
	n0 := len(model.Requests())
	e.activate(alias, 0, run.OutcomeParked)
	s.checkPolicyFirst(t, alias, from)
	s.checkDenied(t, alias)
	s.checkParked(t, alias)
	// The turn went on after the deny, and the model was told which rule.
	reqs := model.Requests()[n0:]
	if len(reqs) != 3 {
		t.Fatalf("%d model requests in the parked turn, want 3 (allowed, denied, asked)", len(reqs))
	}
	t.Logf("after the deny the model was told %q", reqs[2].LastUserText())
	if told := reqs[2].LastUserText(); !strings.Contains(told, `worker rule "stay-home"`) || !strings.Contains(told, "outside work_folder") {
		t.Errorf("after the deny the model was told %q; want the worker rule named", told)
	}

	e.post(alias, "yes")
	from = len(e.items(alias))
	model.Push(asked, claudetest.Text("all markers made"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	s.checkPolicyFirst(t, alias, from)
	s.checkReleased(t, alias)
	reqs = model.Requests()
	if told := reqs[len(reqs)-2].LastUserText(); !strings.Contains(told, "A person approved your call") {
		t.Errorf("the resume message %q", told)
	}

	t.Logf("items: %v", e.itemTypes(alias))
	t.Run("explain agrees with the gate", func(t *testing.T) { s.explainAgrees(t, alias) })
}

// excludeTmpFromSandbox takes /tmp and $TMPDIR out of Codex's
// workspace-write sandbox, so a write to the scenario's outside folder
// (which may well lie under /tmp) asks.
func (e *codexE2E) excludeTmpFromSandbox() {
	e.t.Helper()
	cfg := filepath.Join(e.codexHome, "config.toml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := f.WriteString("\n[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n"); err != nil {
		e.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		e.t.Fatal(err)
	}
}

// TestE2EGuardedCodex runs confined (the default: Codex asks before every
// command, the rules decide each) and unconfined (Codex's own sandbox:
// only a call that leaves it reaches the rules).
func TestE2EGuardedCodex(t *testing.T) {
	for _, confine := range []string{"on", "off"} {
		t.Run("confine-"+confine, func(t *testing.T) { testGuardedCodex(t, confine) })
	}
}

func testGuardedCodex(t *testing.T, confine string) {
	e := newCodexE2E(t)
	e.agentConfig(codexType).Confine = confine
	e.writeConfig()
	s := newGuardedScenario(e.e2eEnv, codexType, func() int { return len(e.model.Requests()) })
	if confine == "off" {
		// /tmp and $TMPDIR are writable roots of workspace-write, and the
		// test's folders may well lie under /tmp: take both out of the
		// sandbox so the outside folder is outside every writable root
		// and its write asks.
		e.excludeTmpFromSandbox()
	}

	t.Run("no policy", s.policyMissing)

	const alias = "projects/p1/guarded-codex"
	asked := codextest.Escalate(s.askedCmd, "make the marker")
	e.model.Push(
		codextest.Escalate(s.allowedCmd, "write the allowed marker"),
		codextest.Patch(codextest.AddFile(s.deniedPath, "should never land")),
		asked,
	)
	e.handOffGuarded(alias, codexType, s.threadPolicy(), "make the markers")
	from := len(e.items(alias))
	n0 := len(e.model.Requests())
	e.activate(alias, 0, run.OutcomeParked)
	s.checkPolicyFirst(t, alias, from)
	s.checkDenied(t, alias)
	s.checkParked(t, alias)
	// The turn went on after the decline: the model got the patch's
	// rejection and asked for the next call.
	reqs := e.model.Requests()[n0:]
	if len(reqs) != 3 {
		t.Fatalf("%d model requests in the parked turn, want 3 (allowed, denied, asked)", len(reqs))
	}
	t.Logf("after the decline the model's tool outputs were %q", reqs[2].ToolOutputs())
	var rejected bool
	for _, out := range reqs[2].ToolOutputs() {
		if strings.Contains(out, "rejected") {
			rejected = true
		}
	}
	if !rejected {
		t.Errorf("after the decline the model's tool outputs were %v; want the patch rejected", reqs[2].ToolOutputs())
	}

	e.post(alias, "yes")
	from = len(e.items(alias))
	e.model.Push(asked, codextest.Say("all markers made"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	s.checkPolicyFirst(t, alias, from)
	s.checkReleased(t, alias)
	if e.model.Remaining() != 0 {
		t.Errorf("%d model steps left", e.model.Remaining())
	}
	reqs = e.model.Requests()
	if told := reqs[len(reqs)-2].LastUserText(); !strings.Contains(told, "A person approved your call") {
		t.Errorf("the resume message %q", told)
	}

	t.Logf("items: %v", e.itemTypes(alias))
	t.Run("explain agrees with the gate", func(t *testing.T) { s.explainAgrees(t, alias) })
}
