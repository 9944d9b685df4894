package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestRuleValidate(t *testing.T) {
	valid := []Rule{
		exR("rm -rf *", DecisionDeny),
		effectR(EffectExec, DecisionAsk),
		pathR(EffectWrite, "", DecisionDeny),
		{Effect: EffectWrite, Action: DecisionDeny, Outside: OutsideOutbox},
		{Effect: EffectRead, Action: DecisionAllow, Outside: OutsideWorkFolder},
		{Effect: EffectExec, Command: []string{"git push*", "git [!s]*", "rm -?f *"}},
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
		{Rule{Action: DecisionDeny}, "effect", "effect is missing"},
		{Rule{Effect: "delete", Action: DecisionDeny}, "effect", `effect "delete" is invalid; write one of write, exec, read, network`},
		{Rule{Effect: "Exec", Action: DecisionDeny}, "effect", "is invalid"},
		{Rule{Effect: EffectExec, Action: "block"}, "action", `action "block" is invalid; write one of allow, deny, ask`},
		{Rule{Effect: EffectWrite, Command: []string{"rm *"}, Action: DecisionDeny}, "command", "only for exec rules"},
		{Rule{Effect: EffectNetwork, Command: []string{"curl *"}, Action: DecisionDeny}, "command", "only for exec rules"},
		{Rule{Effect: EffectExec, Command: []string{"   "}, Action: DecisionDeny}, "command", "blank"},
		{Rule{Effect: EffectWrite, Outside: "work-folder", Action: DecisionDeny}, "outside", `outside "work-folder" is invalid`},
		{Rule{Effect: EffectWrite, Outside: OutsideOutbox, Action: DecisionAllow}, "outside", "not allowed on an allow rule"},
		{Rule{Effect: EffectWrite, Outside: OutsideOutbox}, "outside", "not allowed on an allow rule"},
		{Rule{Effect: EffectExec, Outside: OutsideWorkFolder, Action: DecisionDeny}, "outside", "not meaningful on a exec rule"},
		{Rule{Effect: EffectNetwork, Outside: OutsideWorkFolder, Action: DecisionDeny}, "outside", "carry no path"},
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
	rules := []Rule{exR("ls", DecisionAllow), {Effect: EffectWrite, Command: []string{"x"}, Action: DecisionDeny}, {Effect: "bad"}}
	err := ValidateRules(rules)
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Index != 1 {
		t.Fatalf("got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "policy rule 2 (no id): ") {
		t.Errorf("message %q does not name rule 2", err)
	}
	rules[1].ID = "no-writes"
	if err := ValidateRules(rules); !strings.HasPrefix(err.Error(), `policy rule "no-writes": command is only for exec rules`) {
		t.Errorf("message %q does not name the rule by its id", err)
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
	if !errors.As(err, &ie) || ie.Field != "default" || ie.Index != -1 || !strings.Contains(err.Error(), `default "maybe" is invalid`) {
		t.Errorf("got %v", err)
	}
	err = Policy{Default: "ask", Rules: []Rule{{Effect: EffectExec, Action: "nope"}}}.Validate()
	if !errors.As(err, &ie) || ie.Index != 0 {
		t.Errorf("got %v", err)
	}
	// As the worker: a policy without a default allows what no rule matched.
	if got := (Policy{}).DefaultDecision(); got != DecisionAllow {
		t.Errorf("unset default = %q, want allow", got)
	}
	// As the worker: a rule without an action allows.
	if got := (Rule{Effect: EffectExec}).action(); got != DecisionAllow {
		t.Errorf("unset action = %q, want allow", got)
	}
}

func TestParsePolicyWorkerShape(t *testing.T) {
	p, err := ParsePolicy([]byte(`
alias: policies/strict
default: ask
rules:
  - id: no-push
    effect: exec
    action: deny
    command: ["git push*", "git [!s]*"]
  - id: stay-home
    effect: write
    action: deny
    outside: work_folder
  - id: outbox-only
    effect: write
    action: ask
    outside: outbox
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Alias != "policies/strict" || p.Default != DecisionAsk || len(p.Rules) != 3 || p.Rules[0].ID != "no-push" ||
		len(p.Rules[0].Command) != 2 || p.Rules[1].Outside != OutsideWorkFolder || len(p.Notes) != 0 {
		t.Errorf("got %+v", p)
	}
	// Written back, it is the worker's shape: no key the worker would ignore.
	b, _ := json.Marshal(p)
	for _, k := range []string{`"decision"`, `"path"`, `"Notes"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("written %s holds %s", b, k)
		}
	}
	if p, err := ParsePolicy([]byte(`{"rules":[{"id":"n","effect":"network","action":"ask"}]}`)); err != nil || p.Rules[0].Effect != EffectNetwork || p.DefaultDecision() != DecisionAllow {
		t.Errorf("json: %+v %v", p, err)
	}
	for doc, says := range map[string]string{
		"rules:\n  - id: x\n    effect: exec\n    comand: [rm]\n    action: deny\n": `policy rule "x": unknown key "comand"; a rule's keys are id, effect, action, command, outside`,
		"":                     "the policy is empty",
		"{}\n":                 "the policy is empty",
		"rules: true\n":        "rules is a boolean; write a list of rules",
		"rules: [3]\n":         "policy rule 1 (no id): is a number",
		"colour: red\n":        `unknown key "colour"`,
		"default: sometimes\n": `default "sometimes" is invalid`,
		"rules:\n  - {id: a, effect: exec, action: allow}\n  - {id: b, effect: read, outside: nowhere, action: deny}\n": `policy rule "b": outside "nowhere" is invalid`,
		"rules:\n  - {id: a, effect: exec, command: [1]}\n":                                                             `policy rule "a": command holds a number`,
		"rules:\n  - {id: a, effect: exec, action: deny, decision: deny}\n":                                             "keep action",
	} {
		_, err := ParsePolicy([]byte(doc))
		var ie *InvalidError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: got %v, want an *InvalidError saying %q", doc, err, says)
		}
	}
}

// TestParsePolicyOlderSpelling: bhw-run's own older rules are read, each
// into a rule the worker reads no wider, with a note per rule.
func TestParsePolicyOlderSpelling(t *testing.T) {
	p, err := ParsePolicy([]byte(`
rules:
  - effect: exec
    command: "rm -rf *"
    decision: deny
  - effect: write
    path: "/etc/**"
    decision: deny
  - effect: write
    path: "/tmp/**"
    decision: allow
  - effect: network
    decision: ask
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{ID: "rule-1", Effect: EffectExec, Action: DecisionDeny, Command: []string{"rm -rf *"}},
		{ID: "rule-2", Effect: EffectWrite, Action: DecisionDeny, Outside: OutsideWorkFolder},
		{ID: "rule-4", Effect: EffectNetwork, Action: DecisionAsk},
	}
	if len(p.Rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", p.Rules, want)
	}
	for i, r := range p.Rules {
		r.legacy = ""
		if r.ID != want[i].ID || r.Effect != want[i].Effect || r.Action != want[i].Action || r.Outside != want[i].Outside || strings.Join(r.Command, "|") != strings.Join(want[i].Command, "|") {
			t.Errorf("rule %d = %+v, want %+v", i, r, want[i])
		}
	}
	// The older spelling's missing default meant ask; it is written out.
	if p.Default != DecisionAsk {
		t.Errorf("default = %q, want ask", p.Default)
	}
	notes := strings.Join(p.Notes, "\n")
	for _, says := range []string{`rule 1 (rule-1): command "rm -rf *" became the list`, `rule 2 (rule-2): decision "deny" became action "deny"; path "/etc/**" became outside: work_folder`, "rule 3 (rule-3)", "left out", "no default"} {
		if !strings.Contains(notes, says) {
			t.Errorf("notes %q do not say %q", notes, says)
		}
	}
}

// TestRuleWrittenAsTheWorkerReadsIt: a rule built without an action is
// written with it spelled out, in JSON and YAML (the worker refuses an
// empty action).
func TestRuleWrittenAsTheWorkerReadsIt(t *testing.T) {
	r := Rule{Effect: EffectExec, Command: []string{"ls"}}
	b, _ := json.Marshal(r)
	if string(b) != `{"effect":"exec","action":"allow","command":["ls"]}` {
		t.Errorf("json %s", b)
	}
	y, _ := yaml.Marshal([]Rule{r})
	if !strings.Contains(string(y), "action: allow") || strings.Contains(string(y), "id:") {
		t.Errorf("yaml %s", y)
	}
	var back []Rule
	if err := yaml.Unmarshal(y, &back); err != nil || len(back) != 1 || back[0].Action != DecisionAllow || back[0].Command[0] != "ls" {
		t.Errorf("read back %+v %v", back, err)
	}
}
