package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decisions a rule or a default can give (a rule's action).
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	DecisionAsk   = "ask"
)

// Postures, the envelope's agent.permissions (docs/gate.md).
const (
	PostureAutonomous = "autonomous"
	PostureGuarded    = "guarded"
	PostureApproval   = "approval"
)

// What a rule's outside may say: the call's path left the work folder, or
// the thread's artifacts outbox.
const (
	OutsideWorkFolder = "work_folder"
	OutsideOutbox     = "outbox"
)

// Rule is one policy rule in blobhub-worker's shape: an effect, an action,
// for exec rules the command globs one of which must match, for read and
// write rules whether the path must leave the work folder or the outbox.
// A rule with no command and no outside matches every call of its effect.
type Rule struct {
	// ID names the rule in the audit items and in messages; it may be empty
	// (the worker does not require one).
	ID      string   `json:"id,omitempty" yaml:"id,omitempty"`
	Effect  string   `json:"effect" yaml:"effect"`
	Action  string   `json:"action" yaml:"action"`
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
	Outside string   `json:"outside,omitempty" yaml:"outside,omitempty"`

	// legacy says how bhw-run's older spelling of this rule was read ("":
	// it was written in the worker's shape); drop marks a rule the worker's
	// shape cannot say without widening it (Migrate leaves it out).
	legacy string
	drop   bool
}

// EffectiveAction is the rule's action; absent means allow, as the worker
// reads it.
func (r Rule) EffectiveAction() string { return r.action() }

func (r Rule) action() string {
	if r.Action == "" {
		return DecisionAllow
	}
	return r.Action
}

// Policy is a thread's policy: where it was resolved from (Alias, for the
// record), its rules and the default that answers what no rule matched. The
// machine owner's rules (config policy.rules) are a plain []Rule: they have
// no default.
type Policy struct {
	Alias   string `json:"alias,omitempty" yaml:"alias,omitempty"`
	Default string `json:"default,omitempty" yaml:"default,omitempty"`
	Rules   []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`

	// Notes say how a policy in bhw-run's older spelling was read, one line
	// each; empty for one written in the worker's shape.
	Notes []string `json:"-" yaml:"-"`
}

// DefaultDecision is the thread's default, allow when unset (as the worker).
func (p Policy) DefaultDecision() string {
	if p.Default == "" {
		return DecisionAllow
	}
	return p.Default
}

// InvalidError says why a policy cannot be used; callers map it to
// POLICY_INVALID (a thread's) or INVALID_CONFIG (the machine owner's).
// Index is the 0-based position of the offending rule, or -1 when the
// problem is not in a rule (the default, or the document itself).
type InvalidError struct {
	Index   int
	ID      string // the rule's id, when it has one
	Field   string // id, effect, action, command, outside, default, or "" for the document
	Message string
	Line    int // the rule's line in a YAML file, 0 when not known
}

func (e *InvalidError) Error() string {
	at := ""
	if e.Line > 0 {
		at = fmt.Sprintf(" (line %d)", e.Line)
	}
	switch {
	case e.ID != "":
		return fmt.Sprintf("policy rule %q%s: %s", e.ID, at, e.Message)
	case e.Index < 0 && e.Line > 0:
		return fmt.Sprintf("policy rule%s: %s", at, e.Message)
	case e.Index < 0:
		return "policy: " + e.Message
	default:
		return fmt.Sprintf("policy rule %d (no id)%s: %s", e.Index+1, at, e.Message)
	}
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Index: -1, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks one rule as the worker does (effect, action, then its
// outside check), and what bhw-run refuses beyond it (docs/gate.md): a
// command on a rule that is not exec, which the worker ignores so the rule
// matches every call of its effect; a blank pattern; a set the worker's
// matcher cannot read. The returned error is an *InvalidError with Index -1.
func (r Rule) Validate() error {
	switch r.Effect {
	case EffectRead, EffectWrite, EffectExec, EffectNetwork:
	case "":
		return invalid("effect", "effect is missing; write one of write, exec, read, network")
	default:
		return invalid("effect", "effect %q is invalid; write one of write, exec, read, network", r.Effect)
	}
	switch r.Action {
	case DecisionAllow, DecisionDeny, DecisionAsk, "":
	default:
		return invalid("action", "action %q is invalid; write one of allow, deny, ask", r.Action)
	}
	switch {
	case r.Outside != "" && r.Outside != OutsideWorkFolder && r.Outside != OutsideOutbox:
		return invalid("outside", "outside %q is invalid; write work_folder or outbox, or leave it out", r.Outside)
	case r.Outside == OutsideOutbox && r.action() == DecisionAllow:
		return invalid("outside", "outside outbox is not allowed on an allow rule (without an outbox every path is outside it, so it would allow every %s); write deny or ask", r.Effect)
	case r.Outside != "" && r.Effect != EffectRead && r.Effect != EffectWrite:
		return invalid("outside", "outside is not meaningful on a %s rule, whose calls carry no path; leave it out, or use it on a write or read rule", r.Effect)
	}
	if len(r.Command) > 0 && r.Effect != EffectExec {
		return invalid("command", "command is only for exec rules (the worker would ignore it and match every %s call); leave it out, or use outside", r.Effect)
	}
	for _, c := range r.Command {
		if strings.TrimSpace(c) == "" {
			return invalid("command", "command has a blank pattern; leave command out to match every command, or write a glob such as \"rm -rf *\"")
		}
		if err := globChecks(c); err != nil {
			return invalid("command", "command %q has a set the worker cannot read (a range written high to low, such as [z-a]); write it low to high", c)
		}
	}
	return nil
}

// ValidateRules checks every rule in order; the first problem wins.
func ValidateRules(rules []Rule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			ie := err.(*InvalidError)
			ie.Index, ie.ID = i, r.ID
			return ie
		}
	}
	return nil
}

// Validate checks the default and every rule.
func (p Policy) Validate() error {
	switch p.Default {
	case "", DecisionAllow, DecisionDeny, DecisionAsk:
	default:
		return invalid("default", "default %q is invalid; write one of allow, deny, ask (none means allow)", p.Default)
	}
	return ValidateRules(p.Rules)
}

// ParsePolicy reads a thread policy from YAML (JSON is accepted too) and
// validates it. Every error is an *InvalidError. Notes on the result say
// how an older spelling was read.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	var probe any
	if err := yaml.Unmarshal(data, &probe); err == nil {
		if m, ok := probe.(map[string]any); probe == nil || ok && len(m) == 0 {
			// The worker reads an empty policy block as no policy, and
			// bhw-run writes a policy with its default spelled out: an
			// empty file would be written as allow-everything.
			return Policy{}, invalid("", "the policy is empty; write its rules and default (contrib/policy.example.yaml), or leave the policy out")
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		var ie *InvalidError
		if errors.As(err, &ie) {
			return Policy{}, ie
		}
		return Policy{}, invalid("", "cannot read the policy: %v", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// ruleKeys are the keys of a rule in the worker's shape.
var ruleKeys = []string{"id", "effect", "action", "command", "outside"}

// ruleFrom reads one rule from its decoded map: the worker's shape, or
// bhw-run's older one ({effect, path, command: "one string", decision}),
// which it translates and marks (see Migrate). n is its 1-based position.
func ruleFrom(m map[string]any, n int) (Rule, error) {
	var r Rule
	str := func(key string) (string, error) {
		v, ok := m[key]
		if !ok {
			return "", nil
		}
		s, isStr := v.(string)
		if !isStr {
			return "", &InvalidError{Index: n - 1, Field: key, Message: fmt.Sprintf("%s is %s; write a string", key, kindOf(v))}
		}
		return s, nil
	}
	var err error
	if r.ID, err = str("id"); err != nil {
		return r, err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(ruleKeys, k) && k != "decision" && k != "path" {
			return r, &InvalidError{Index: n - 1, ID: r.ID, Field: k, Message: fmt.Sprintf("unknown key %q; a rule's keys are %s", k, strings.Join(ruleKeys, ", "))}
		}
	}
	named := func(e error) error {
		if ie, ok := e.(*InvalidError); ok {
			ie.ID = r.ID
		}
		return e
	}
	var decision, path string
	for key, dst := range map[string]*string{"effect": &r.Effect, "action": &r.Action, "outside": &r.Outside, "decision": &decision, "path": &path} {
		if *dst, err = str(key); err != nil {
			return r, named(err)
		}
	}
	if v, ok := m["action"]; !ok {
		r.Action = DecisionAllow // absent: allow, as the worker reads it
	} else if v == "" {
		return r, named(&InvalidError{Index: n - 1, Field: "action", Message: "action is empty; write one of allow, deny, ask (or leave the key out for allow)"})
	}
	var notes []string
	switch v := m["command"].(type) {
	case nil:
		if _, ok := m["command"]; ok {
			return r, named(&InvalidError{Index: n - 1, Field: "command", Message: "command is null; write a list of globs such as [\"git push*\"], or leave it out"})
		}
	case string:
		r.Command = []string{v}
		notes = append(notes, fmt.Sprintf("command %q became the list [%q]", v, v))
	case []any:
		for _, c := range v {
			s, ok := c.(string)
			if !ok {
				return r, named(&InvalidError{Index: n - 1, Field: "command", Message: fmt.Sprintf("command holds %s; write a list of strings such as [\"git push*\"]", kindOf(c))})
			}
			r.Command = append(r.Command, s)
		}
	default:
		return r, named(&InvalidError{Index: n - 1, Field: "command", Message: fmt.Sprintf("command is %s; write a list of globs such as [\"git push*\"]", kindOf(v))})
	}
	if _, ok := m["decision"]; ok {
		if _, both := m["action"]; both {
			return r, named(&InvalidError{Index: n - 1, Field: "decision", Message: "has both action and decision; keep action (decision is bhw-run's older name for it)"})
		}
		r.Action = decision
		if decision == "" {
			return r, named(&InvalidError{Index: n - 1, Field: "decision", Message: "decision is empty; write action: allow, deny or ask"})
		}
		notes = append(notes, fmt.Sprintf("decision %q became action %q", decision, decision))
	}
	if _, ok := m["path"]; ok {
		switch {
		case r.Outside != "":
			return r, named(&InvalidError{Index: n - 1, Field: "path", Message: "has both outside and path; leave path out (the worker's language has no path globs)"})
		case r.action() == DecisionAllow:
			r.drop = true
			notes = append(notes, fmt.Sprintf("an allow rule for the paths %q cannot be said in the worker's language (its allow rule would allow every %s outside the work folder), so it is left out: those calls go to the rules after it or the default", path, r.Effect))
		default:
			r.Outside = OutsideWorkFolder
			notes = append(notes, fmt.Sprintf("path %q became outside: work_folder (the worker's language has no path globs: the rule now holds back every %s outside the work folder)", path, r.Effect))
		}
	}
	r.legacy = strings.Join(notes, "; ")
	return r, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return "a number"
	}
}

// Migrate leaves out the rules of bhw-run's older spelling the worker's
// shape cannot say without widening, and returns one note per translated
// rule ("" notes when every rule was written in the worker's shape).
func Migrate(rules []Rule) ([]Rule, []string) {
	var out []Rule
	var notes []string
	for i, r := range rules {
		if r.legacy != "" {
			if r.ID == "" {
				r.ID = fmt.Sprintf("rule-%d", i+1)
			}
			notes = append(notes, fmt.Sprintf("rule %d (%s): %s", i+1, r.ID, r.legacy))
		}
		if !r.drop {
			out = append(out, r)
		}
	}
	return out, notes
}

// UnmarshalJSON reads a rule in the worker's shape or bhw-run's older one.
func (r *Rule) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return invalid("", "a rule is not a mapping: %v", err)
	}
	rr, err := ruleFrom(m, 0)
	*r = rr
	return err
}

// UnmarshalYAML reads a rule in the worker's shape or bhw-run's older one.
func (r *Rule) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return invalid("", "a rule is not a mapping (line %d): write {id, effect, action, command, outside}", n.Line)
	}
	rr, err := ruleFrom(m, 0)
	*r = rr
	if ie, ok := err.(*InvalidError); ok {
		ie.Line = n.Line
	}
	return err
}

// policyFrom reads a policy from its decoded map.
func policyFrom(m map[string]any) (Policy, error) {
	var p Policy
	for k, v := range m {
		switch k {
		case "alias", "default":
			s, ok := v.(string)
			if !ok {
				return p, invalid(k, "%s is %s; write a string", k, kindOf(v))
			}
			if k == "alias" {
				p.Alias = s
			} else {
				p.Default = s
			}
		case "rules":
			list, ok := v.([]any)
			if !ok {
				return p, invalid("rules", "rules is %s; write a list of rules", kindOf(v))
			}
			for i, x := range list {
				rm, ok := x.(map[string]any)
				if !ok {
					return p, &InvalidError{Index: i, Field: "", Message: fmt.Sprintf("is %s; write a mapping {id, effect, action, command, outside}", kindOf(x))}
				}
				r, err := ruleFrom(rm, i+1)
				if err != nil {
					return p, err
				}
				p.Rules = append(p.Rules, r)
			}
		default:
			return p, invalid(k, "unknown key %q; a policy's keys are alias, default, rules", k)
		}
	}
	legacy := slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.legacy != "" })
	p.Rules, p.Notes = Migrate(p.Rules)
	if legacy && p.Default == "" {
		p.Default = DecisionAsk
		p.Notes = append(p.Notes, "no default: bhw-run's older spelling meant ask, now written out (the worker reads a missing default as allow)")
	}
	return p, nil
}

// UnmarshalJSON reads a policy in the worker's shape or bhw-run's older one.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return invalid("", "the policy is not a mapping: %v", err)
	}
	pp, err := policyFrom(m)
	*p = pp
	return err
}

// UnmarshalYAML reads a policy in the worker's shape or bhw-run's older one.
func (p *Policy) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return invalid("", "the policy is not a mapping (line %d): write {alias, default, rules}", n.Line)
	}
	pp, err := policyFrom(m)
	*p = pp
	return err
}

// Label renders a rule for people: "no-push" (exec deny ["git push*"]), or
// its position when it has no id.
func (r Rule) Label(index int) string {
	name := fmt.Sprintf("%d", index+1)
	if r.ID != "" {
		name = fmt.Sprintf("%q", r.ID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s %s", name, r.Effect, r.action())
	if len(r.Command) > 0 {
		b.WriteString(" " + quoteList(r.Command))
	}
	if r.Outside != "" {
		b.WriteString(" outside " + r.Outside)
	}
	b.WriteString(")")
	return b.String()
}

// MarshalJSON writes a rule as the worker reads it: its action always
// spelled out (the worker refuses an empty one).
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain struct {
		ID      string   `json:"id,omitempty"`
		Effect  string   `json:"effect"`
		Action  string   `json:"action"`
		Command []string `json:"command,omitempty"`
		Outside string   `json:"outside,omitempty"`
	}
	return json.Marshal(plain{r.ID, r.Effect, r.action(), r.Command, r.Outside})
}

// MarshalJSON writes a policy as the worker reads it: its default spelled
// out and its rules always a list (the worker refuses a null one, and reads
// an empty block as no policy at all).
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain struct {
		Alias   string `json:"alias,omitempty"`
		Default string `json:"default"`
		Rules   []Rule `json:"rules"`
	}
	rules := p.Rules
	if rules == nil {
		rules = []Rule{}
	}
	return json.Marshal(plain{p.Alias, p.DefaultDecision(), rules})
}

// MarshalYAML writes a rule as MarshalJSON does.
func (r Rule) MarshalYAML() (any, error) {
	out := map[string]any{"effect": r.Effect, "action": r.action()}
	if r.ID != "" {
		out["id"] = r.ID
	}
	if len(r.Command) > 0 {
		out["command"] = r.Command
	}
	if r.Outside != "" {
		out["outside"] = r.Outside
	}
	return out, nil
}
