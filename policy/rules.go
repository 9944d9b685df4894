package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"gopkg.in/yaml.v3"
)

// Decisions a rule or a default can give.
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

// Rule is one policy rule. Path applies to read and write rules and matches
// only targets outside the work folder; Command applies to exec rules. A rule
// with neither matches every call of its effect.
type Rule struct {
	Effect   string `json:"effect" yaml:"effect"`
	Path     string `json:"path,omitempty" yaml:"path,omitempty"`
	Command  string `json:"command,omitempty" yaml:"command,omitempty"`
	Decision string `json:"decision" yaml:"decision"`
}

// Policy is a thread's policy: its rules and the default that answers what no
// rule matched. The machine owner's rules (config policy.rules) are a plain
// []Rule: they have no default.
type Policy struct {
	Default string `json:"default,omitempty" yaml:"default,omitempty"`
	Rules   []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`
}

// DefaultDecision is the thread's default, "ask" when unset.
func (p Policy) DefaultDecision() string {
	if p.Default == "" {
		return DecisionAsk
	}
	return p.Default
}

// InvalidError says why a policy cannot be used; callers map it to
// POLICY_INVALID. Index is the 0-based position of the offending rule, or -1
// when the problem is not in a rule (the default, or the document itself); the
// message counts rules from 1, as a person reading the YAML does.
type InvalidError struct {
	Index   int
	Field   string // effect, path, command, decision, default, or "" for the document
	Message string
}

func (e *InvalidError) Error() string {
	if e.Index < 0 {
		return "policy: " + e.Message
	}
	return fmt.Sprintf("policy rule %d: %s", e.Index+1, e.Message)
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Index: -1, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks one rule on its own. The returned error is an *InvalidError
// with Index -1; ValidateRules fills the index in.
func (r Rule) Validate() error {
	switch r.Effect {
	case EffectRead, EffectWrite, EffectExec, EffectNetwork:
	case "":
		return invalid("effect", "effect is missing; use read, write, exec or network")
	default:
		return invalid("effect", "unknown effect %q; use read, write, exec or network", r.Effect)
	}
	switch r.Decision {
	case DecisionAllow, DecisionDeny, DecisionAsk:
	case "":
		return invalid("decision", "decision is missing; use allow, deny or ask")
	default:
		return invalid("decision", "unknown decision %q; use allow, deny or ask", r.Decision)
	}
	if r.Command != "" {
		if r.Effect != EffectExec {
			return invalid("command", "command %q is only for exec rules; use path for a %s rule, or drop it", r.Command, r.Effect)
		}
		if strings.TrimSpace(r.Command) == "" {
			return invalid("command", "command is blank; drop it to match every command, or write a pattern such as \"rm -rf *\"")
		}
	}
	if r.Path != "" {
		switch r.Effect {
		case EffectRead, EffectWrite:
		case EffectExec:
			return invalid("path", "path %q is only for read and write rules; use command for an exec rule", r.Path)
		default:
			return invalid("path", "path %q is only for read and write rules; drop it to match every %s call", r.Path, r.Effect)
		}
		if !strings.HasPrefix(r.Path, "/") {
			return invalid("path", "path %q is relative; write an absolute pattern such as \"/etc/**\" (a path inside the work folder is never matched)", r.Path)
		}
		if !utf8.ValidString(r.Path) {
			return invalid("path", "path %q is not valid UTF-8", r.Path)
		}
		if !doublestar.ValidatePattern(r.Path) {
			return invalid("path", "path %q is not a valid glob; check its brackets, braces and escapes", r.Path)
		}
	}
	return nil
}

// ValidateRules checks every rule in order; the first problem wins.
func ValidateRules(rules []Rule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			ie := err.(*InvalidError)
			ie.Index = i
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
		return invalid("default", "unknown default %q; use allow, deny or ask", p.Default)
	}
	return ValidateRules(p.Rules)
}

// ParsePolicy reads a thread policy from YAML (JSON is accepted too), refusing
// unknown keys so a typo such as "comand" is reported instead of widening a
// rule, and validates it. Every error is an *InvalidError.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return Policy{}, invalid("", "cannot read the policy: %v", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// ruleLabel renders a rule for people: exec "rm -rf *", write "/etc/**", or
// just the effect for a rule that matches every call of it.
func ruleLabel(r Rule) string {
	switch {
	case r.Command != "":
		return fmt.Sprintf("%s %q", r.Effect, r.Command)
	case r.Path != "":
		return fmt.Sprintf("%s %q", r.Effect, r.Path)
	default:
		return r.Effect
	}
}
