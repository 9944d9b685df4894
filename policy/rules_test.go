package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestRuleValidate(t *testing.T) {
	valid := []Rule{
		exR("rm -rf *", DecisionDeny),
		effectR(EffectExec, DecisionAsk),
		pathR(EffectWrite, "/etc/**", DecisionDeny),
		pathR(EffectRead, "/home/*/.ssh/{id_*,config}", DecisionDeny),
		effectR(EffectNetwork, DecisionAllow),
		effectR(EffectRead, DecisionAllow),
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	invalid := []struct {
		rule  Rule
		field string
		says  string
	}{
		{Rule{Decision: DecisionDeny}, "effect", "effect is missing"},
		{Rule{Effect: "delete", Decision: DecisionDeny}, "effect", `unknown effect "delete"; use read, write, exec or network`},
		{Rule{Effect: "Exec", Decision: DecisionDeny}, "effect", "unknown effect"},
		{Rule{Effect: EffectExec}, "decision", "decision is missing"},
		{Rule{Effect: EffectExec, Decision: "block"}, "decision", `unknown decision "block"; use allow, deny or ask`},
		{Rule{Effect: EffectWrite, Command: "rm *", Decision: DecisionDeny}, "command", "only for exec rules"},
		{Rule{Effect: EffectNetwork, Command: "curl *", Decision: DecisionDeny}, "command", "only for exec rules"},
		{Rule{Effect: EffectExec, Command: "   ", Decision: DecisionDeny}, "command", "blank"},
		{Rule{Effect: EffectExec, Path: "/usr/bin/*", Decision: DecisionDeny}, "path", "use command for an exec rule"},
		{Rule{Effect: EffectNetwork, Path: "/x", Decision: DecisionDeny}, "path", "only for read and write rules"},
		{Rule{Effect: EffectWrite, Path: "etc/**", Decision: DecisionDeny}, "path", "relative"},
		{Rule{Effect: EffectWrite, Path: "~/.ssh/*", Decision: DecisionDeny}, "path", "relative"},
		{Rule{Effect: EffectWrite, Path: "/etc/[abc", Decision: DecisionDeny}, "path", "not a valid glob"},
		{Rule{Effect: EffectRead, Path: "/etc/{a,b", Decision: DecisionDeny}, "path", "not a valid glob"},
	}
	for _, c := range invalid {
		err := c.rule.Validate()
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("%+v: error %v is not an *InvalidError", c.rule, err)
			continue
		}
		if ie.Field != c.field || !strings.Contains(err.Error(), c.says) || ie.Index != -1 {
			t.Errorf("%+v: got field %q index %d %q; want field %q saying %q", c.rule, ie.Field, ie.Index, err, c.field, c.says)
		}
	}
}

func TestValidateRulesNamesTheRule(t *testing.T) {
	rules := []Rule{exR("ls", DecisionAllow), {Effect: EffectWrite, Command: "x", Decision: DecisionDeny}, {Effect: "bad"}}
	err := ValidateRules(rules)
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Index != 1 {
		t.Fatalf("got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "policy rule 2: ") {
		t.Errorf("message %q does not name rule 2", err)
	}
	if ValidateRules(nil) != nil {
		t.Error("no rules is valid")
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, d := range []string{"", DecisionAllow, DecisionDeny, DecisionAsk} {
		if err := (Policy{Default: d}).Validate(); err != nil {
			t.Errorf("default %q: %v", d, err)
		}
	}
	err := Policy{Default: "maybe"}.Validate()
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Field != "default" || ie.Index != -1 || !strings.Contains(err.Error(), `unknown default "maybe"`) {
		t.Errorf("got %v", err)
	}
	err = Policy{Default: "ask", Rules: []Rule{{Effect: EffectExec, Decision: "nope"}}}.Validate()
	if !errors.As(err, &ie) || ie.Index != 0 {
		t.Errorf("got %v", err)
	}
	if got := (Policy{}).DefaultDecision(); got != DecisionAsk {
		t.Errorf("unset default = %q", got)
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`
rules:
  - effect: exec
    command: "rm -rf *"
    decision: deny
  - effect: write
    path: "/etc/**"
    decision: deny
default: allow
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != DecisionAllow || len(p.Rules) != 2 || p.Rules[0].Command != "rm -rf *" || p.Rules[1].Path != "/etc/**" {
		t.Errorf("got %+v", p)
	}
	if p, err := ParsePolicy([]byte(`{"default":"deny","rules":[{"effect":"network","decision":"ask"}]}`)); err != nil || p.Rules[0].Effect != EffectNetwork {
		t.Errorf("json: %+v %v", p, err)
	}
	if p, err := ParsePolicy(nil); err != nil || p.DefaultDecision() != DecisionAsk {
		t.Errorf("empty: %+v %v", p, err)
	}
	for doc, says := range map[string]string{
		"rules:\n  - effect: exec\n    comand: rm\n    decision: deny\n": "comand",
		"rules: yes\n": "cannot read",
		"rules:\n  - effect: exec\n    decision: allow\n  - effect: read\n    path: relative\n    decision: deny\n": "policy rule 2",
		"default: sometimes\n": "unknown default",
	} {
		_, err := ParsePolicy([]byte(doc))
		var ie *InvalidError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: got %v, want an *InvalidError saying %q", doc, err, says)
		}
	}
}
