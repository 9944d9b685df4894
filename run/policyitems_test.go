package run

import (
	"fmt"
	"testing"

	"github.com/blobhub/bhw-run/policy"
)

// TestPolicyItemsInTheWorkersShape: policy_applied and policy_denied carry
// blobhub-worker's fields (a deny by the default included), bhw-run's
// beside, and a long policy is listed capped with the true counts.
func TestPolicyItemsInTheWorkersShape(t *testing.T) {
	g := policy.Gate{Posture: policy.PostureGuarded,
		Worker: []policy.Rule{{ID: "no-rm", Effect: policy.EffectExec, Action: policy.DecisionDeny, Command: []string{"rm *"}}},
		Thread: policy.Policy{Alias: "policies/p", Default: policy.DecisionDeny, Rules: []policy.Rule{{ID: "web", Effect: policy.EffectNetwork}}}}
	it := policyAppliedItem(g)
	rules := it.Meta["rules"].([]map[string]any)
	if it.Meta["type"] != "policy_applied" || it.Meta["default"] != policy.DecisionDeny || len(rules) != 2 ||
		rules[0]["id"] != "no-rm" || rules[0]["origin"] != "worker" || rules[0]["action"] != "deny" ||
		rules[1]["id"] != "web" || rules[1]["origin"] != "thread" || rules[1]["action"] != "allow" ||
		fmt.Sprint(it.Meta["counts"]) != "map[reported:2 rules:2]" || it.Meta["truncated"] != nil || it.Brief != "Policy in force: 2 rule(s), default deny" {
		t.Errorf("policy_applied %+v (%s)", it.Meta, it.Brief)
	}
	for i := 0; i < 150; i++ {
		g.Thread.Rules = append(g.Thread.Rules, policy.Rule{ID: fmt.Sprint(i), Effect: policy.EffectRead})
	}
	it = policyAppliedItem(g)
	if n := len(it.Meta["rules"].([]map[string]any)); n != 100 || it.Meta["truncated"] != true || fmt.Sprint(it.Meta["counts"]) != "map[reported:100 rules:152]" {
		t.Errorf("a long policy: %d rules listed, %+v", n, it.Meta["counts"])
	}

	c := policy.Call{Tool: "Bash", Effect: policy.EffectExec, Target: policy.Target{Command: "rm -rf x"}}
	d := g.Decide(c)
	it = policyDeniedItem(c, d)
	if it.Meta["rule"] != "no-rm" || it.Meta["effect"] != "exec" || it.Meta["detail"] != "rm -rf x" || it.Meta["origin"] != "worker" {
		t.Errorf("policy_denied by a rule %+v", it.Meta)
	}
	w := policy.Call{Tool: "Write", Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{"/etc/x"}}}
	d = policy.Gate{Posture: policy.PostureGuarded, Thread: policy.Policy{Default: policy.DecisionDeny}}.Decide(w)
	it = policyDeniedItem(w, d)
	if d.Decision != policy.DecisionDeny || it.Meta["rule"] != "" || it.Meta["origin"] != "default" || it.Meta["detail"] != "/etc/x" {
		t.Errorf("policy_denied by the default %+v", it.Meta)
	}
}
