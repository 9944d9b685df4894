package run

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// gateActivation is an activation of alias with nothing but what the gate
// needs: the runner (config rules, client), thread.yaml, the journal and
// thread.log.
func gateActivation(t *testing.T, h *harness, alias string) *activation {
	t.Helper()
	r := &Runner{Setup: h.setup(), Client: h.client(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	dir := t.TempDir()
	a := &activation{r: r, alias: alias, dir: dir, log: r.Logger, report: report{sum: &Summary{}},
		rec: &record{dir: dir, alias: alias, log: r.Logger, t: &envelope.Thread{Alias: alias}}}
	a.usePoster()
	var err error
	if a.rec.j, err = openJournal(filepath.Join(a.dir, "emissions.jsonl"), "gatetest"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(a.dir, "thread.log"))
	if err != nil {
		t.Fatal(err)
	}
	a.tlog = &threadLog{file: f, Log: agent.NewLog(f)}
	t.Cleanup(a.close)
	return a
}

// TestGuardedDecide drives turnHandler.Decide under guarded: the worker's
// deny beats the thread's allow and a grant, each refusal by a rule is a
// policy_denied naming it, a grant is consumed by the first identical call
// only, and an ask parks once.
func TestGuardedDecide(t *testing.T) {
	h := newHarness(t, false)
	outside := t.TempDir()
	h.cfg = "  rules:\n    - {id: stay-home, effect: write, action: deny, outside: work_folder}\n"
	h.writeConfig()
	const alias = "projects/p1/gate"
	h.handOff(alias, setup.PermGuarded, "")
	a := gateActivation(t, h, alias)
	pol := policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
		{Effect: policy.EffectRead, Action: policy.DecisionAllow},
		{Effect: policy.EffectExec, Command: []string{"echo *"}, Action: policy.DecisionAllow},
		{ID: "write-anywhere", Effect: policy.EffectWrite, Outside: policy.OutsideWorkFolder, Action: policy.DecisionAllow},
		{ID: "no-rm", Effect: policy.EffectExec, Command: []string{"rm -rf *"}, Action: policy.DecisionDeny},
	}}
	th := &turnHandler{a: a, gate: a.r.gate(setup.PermGuarded, pol, h.work, ""), posture: setup.PermGuarded}

	bash := func(cmd, fp string) policy.Call {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		return policy.Call{Tool: "Bash", Effect: policy.EffectExec, InvocationID: "toolu_" + fp, Input: in,
			Target: policy.Target{Command: cmd}, Fingerprint: fp, Kind: policy.KindApproval}
	}
	denied := filepath.Join(outside, "x.txt")
	write := policy.Call{Tool: "Write", Effect: policy.EffectWrite, InvocationID: "toolu_w",
		Input:  json.RawMessage(`{"file_path":"` + denied + `","content":"x"}`),
		Target: policy.Target{Paths: []string{denied}}, Fingerprint: "sha256:write", Kind: policy.KindApproval}

	type deniedMeta struct {
		Type   string `json:"type"`
		Rule   string `json:"rule"`
		Origin string `json:"origin"`
		Index  int    `json:"index"`
		Effect string `json:"effect"`
		Detail string `json:"detail"`
		Call   struct {
			Tool   string         `json:"tool"`
			Effect string         `json:"effect"`
			Target policy.Target  `json:"target"`
			Input  map[string]any `json:"input"`
		} `json:"call"`
	}
	policyDenied := func() []deniedMeta {
		var out []deniedMeta
		for _, it := range h.srv.Items(alias) {
			var m deniedMeta
			if json.Unmarshal(it.Metadata, &m) == nil && m.Type == agent.ItemPolicyDenied {
				out = append(out, m)
			}
		}
		return out
	}

	// The worker's deny beats the thread's allow: refused with a message
	// naming the rule, and one policy_denied.
	v := th.Decide(write)
	if v.Action != policy.Deny || !strings.Contains(v.Message, `worker rule "stay-home"`) {
		t.Fatalf("write outside: %+v, want a deny naming worker rule 1", v)
	}
	pd := policyDenied()
	if len(pd) != 1 || pd[0].Rule != "stay-home" || pd[0].Origin != "worker" || pd[0].Index != 0 || pd[0].Effect != policy.EffectWrite || pd[0].Detail != denied ||
		pd[0].Call.Effect != policy.EffectWrite || !slices.Equal(pd[0].Call.Target.Paths, []string{denied}) || pd[0].Call.Tool != "Write" {
		t.Fatalf("policy_denied %+v", pd)
	}

	// Nor does a grant for the very call relax it; the grant stays.
	a.rec.t.Grants = []string{write.Fingerprint}
	if v := th.Decide(write); v.Action != policy.Deny {
		t.Fatalf("write outside with a grant: %+v, want deny", v)
	}
	if !slices.Equal(a.rec.t.Grants, []string{write.Fingerprint}) {
		t.Fatalf("grants %v: the worker's deny consumed the grant", a.rec.t.Grants)
	}
	if n := len(policyDenied()); n != 2 {
		t.Fatalf("%d policy_denied, want 2", n)
	}

	// The thread's own deny rule: policy_denied names the thread's rule.
	if v := th.Decide(bash("rm -rf build", "sha256:rm")); v.Action != policy.Deny || !strings.Contains(v.Message, `thread rule "no-rm"`) {
		t.Fatalf("rm -rf: %+v", v)
	}
	if pd := policyDenied(); len(pd) != 3 || pd[2].Rule != "no-rm" || pd[2].Origin != "thread" || pd[2].Index != 3 || pd[2].Detail != "rm -rf build" || pd[2].Call.Target.Command != "rm -rf build" {
		t.Fatalf("policy_denied %+v", pd)
	}

	// The thread's allow: no item, no prompt.
	if v := th.Decide(bash("echo hi", "sha256:echo")); v.Action != policy.Allow {
		t.Fatalf("echo: %+v", v)
	}

	// A grant allows the first identical call and is consumed (persisted);
	// another grant stays; the same call again is a new question.
	touch := bash("touch x", "sha256:touch")
	a.rec.t.Grants = []string{"sha256:other", touch.Fingerprint}
	if v := th.Decide(touch); v.Action != policy.Allow {
		t.Fatalf("granted touch: %+v", v)
	}
	if !slices.Equal(a.rec.t.Grants, []string{"sha256:other"}) {
		t.Fatalf("grants %v after the granted call, want only the other one", a.rec.t.Grants)
	}
	saved, err := envelope.LoadThread(filepath.Join(a.dir, "thread.yaml"))
	if err != nil || saved == nil || !slices.Equal(saved.Grants, []string{"sha256:other"}) {
		t.Fatalf("thread.yaml grants %v, %v: the consumed grant was not persisted", saved, err)
	}
	if th.prompt != nil {
		t.Fatal("a granted call parked")
	}
	if v := th.Decide(touch); v.Action != policy.Park {
		t.Fatalf("touch again: %+v, want park (the grant is spent)", v)
	}
	if th.prompt == nil || a.rec.t.Prompt == nil || a.rec.t.Prompt.Call.Fingerprint != touch.Fingerprint {
		t.Fatalf("no prompt recorded for the parked call: %+v", a.rec.t.Prompt)
	}
	// One question per turn: a later call is refused without a second prompt.
	if v := th.Decide(bash("touch y", "sha256:y")); v.Action != policy.Deny || a.rec.t.Prompt.Call.Fingerprint != touch.Fingerprint {
		t.Fatalf("a call after the park: %+v, prompt %+v", v, a.rec.t.Prompt)
	}
	if n := len(policyDenied()); n != 3 {
		t.Fatalf("%d policy_denied, want still 3 (allows, grants and asks post none)", n)
	}
	log, _ := os.ReadFile(filepath.Join(a.dir, "thread.log"))
	for _, want := range []string{"gate deny Write", "gate allow Bash → echo hi", "allowed by a one-shot grant", "gate ask Bash → touch x"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("thread.log lacks %q:\n%s", want, log)
		}
	}
}

// TestGuardedPolicyRecheckedOnResume: a guarded thread parked on an ask is
// answered after the person broke its policy; the run re-reads and
// re-checks the policy before resuming, fails POLICY_INVALID and never
// starts the agent again.
func TestGuardedPolicyRecheckedOnResume(t *testing.T) {
	h := newHarness(t, false)
	const alias = "guarded/recheck"
	thread := func(rules string) string {
		return fmt.Sprintf(`{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":%q},"agent":{"type":"test_agent","permissions":"guarded"},"policy":{"default":"ask","rules":%s},"instance":{"state":"%%s"}}}}`, h.work, rules)
	}
	h.srv.Put(alias, fmt.Sprintf(thread(`[{"effect":"read","decision":"allow"}]`), "pending"))
	h.srv.PersonPost(alias, "write x")
	write := agenttest.Write(filepath.Join(h.work, "x"))
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}}}})
	want(t, h.run(alias), OutcomeParked, exit.OK)
	if got := h.items(alias); !slices.Equal(got, []string{"person", "policy_applied", "tool_call", "pending_prompt", "tool_result", "turn_end"}) {
		t.Fatalf("items %v", got)
	}

	// The person breaks the policy, then answers.
	h.srv.Put(alias, fmt.Sprintf(thread(`[{"effect":"teleport","decision":"allow"}]`), "active"))
	h.srv.PersonPost(alias, "yes")
	var pgids []int
	h.recordPgid(&pgids)
	sum := h.run(alias)
	want(t, sum, OutcomeFailed, exit.Failed)
	if sum.Error == nil || sum.Error.Code != exit.CodePolicyInvalid {
		t.Fatalf("error %+v, want POLICY_INVALID", sum.Error)
	}
	if len(pgids) != 0 {
		t.Fatal("the agent was started with an invalid policy")
	}
	h.wantThreadFailed(alias, exit.CodePolicyInvalid)
}
