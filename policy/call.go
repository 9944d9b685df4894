// Package policy holds the gate's pure logic: what a call is, its effect and
// target, the rules that decide it, one-shot grant fingerprints and the parsing
// of a person's answer. The only I/O is resolving symlinks on a path's longest
// existing prefix (os.Lstat, filepath.EvalSymlinks), which deciding whether a
// path lies outside the work folder needs.
package policy

import "encoding/json"

// Effects of a call (docs/gate.md). The empty effect is "no effect": only a
// thread's default answers it.
const (
	EffectRead    = "read"
	EffectWrite   = "write"
	EffectExec    = "exec"
	EffectNetwork = "network"
)

// Prompt kinds: what a parked call asks a person.
const (
	KindApproval        = "approval"
	KindAskUserQuestion = "ask_user_question"
)

// Call is one tool call an agent asks the host about, described the same way
// for every agent; items show it as call {tool, effect, invocation_id,
// input, target}.
type Call struct {
	Tool         string          `json:"tool" yaml:"tool"`
	Effect       string          `json:"effect" yaml:"effect"`
	InvocationID string          `json:"invocation_id" yaml:"invocation_id"`
	Input        json.RawMessage `json:"input,omitempty" yaml:"-"`
	Target       Target          `json:"target" yaml:"target"`
	// Fingerprint is "sha256:<hex>" of the canonical call (the key of a
	// one-shot grant, docs/gate.md), computed
	// by the adapter because only it knows which fields are descriptive.
	Fingerprint string `json:"fingerprint" yaml:"fingerprint"`
	// Kind is KindApproval for a gated call and KindAskUserQuestion for an
	// agent's own question (requires_user_interaction), which always parks.
	Kind      string     `json:"kind" yaml:"kind"`
	Questions []Question `json:"questions,omitempty" yaml:"questions,omitempty"`
	// GrantRoot is Codex's grantRoot for a file change; it widens the sandbox
	// for the rest of the session, so it is shown in the prompt.
	GrantRoot string `json:"grant_root,omitempty" yaml:"grant_root,omitempty"`
	// Summary is a one-line human description, e.g. "Bash → rm -rf build".
	Summary string `json:"summary,omitempty" yaml:"summary,omitempty"`
	// Subject and GrantKey are how blobhub-worker names the call in its
	// approval question and one-shot grant (its tool, or its request's
	// method; that and what it acts on), when the adapter's names differ
	// from Tool and Tool:<command, file or path>: a grant either side
	// recorded then covers the call on the other. Empty: derived.
	Subject  string `json:"subject,omitempty" yaml:"subject,omitempty"`
	GrantKey string `json:"grant_key,omitempty" yaml:"grant_key,omitempty"`
}

// Target is what a call acts on.
type Target struct {
	Paths   []string `json:"paths,omitempty" yaml:"paths,omitempty"`
	Command string   `json:"command,omitempty" yaml:"command,omitempty"`
	URL     string   `json:"url,omitempty" yaml:"url,omitempty"`
	Cwd     string   `json:"cwd,omitempty" yaml:"cwd,omitempty"`
}

// Question is one question of an AskUserQuestion call.
type Question struct {
	Question    string   `json:"question" yaml:"question"`
	Header      string   `json:"header,omitempty" yaml:"header,omitempty"`
	Options     []Option `json:"options" yaml:"options"`
	MultiSelect bool     `json:"multiSelect" yaml:"multi_select"`
}

// Option is one option of a Question.
type Option struct {
	Label       string `json:"label" yaml:"label"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

// Action is what the gate tells an adapter to do with a call.
type Action int

const (
	// Deny refuses the call; the turn goes on (Claude: deny without
	// interrupt; Codex: decline).
	Deny Action = iota
	// Allow lets the call run.
	Allow
	// Park stops the turn at this call so a person can be asked (Claude: deny
	// with interrupt; Codex: cancel). The call does not run.
	Park
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Park:
		return "park"
	default:
		return "deny"
	}
}

// Verdict is the gate's answer for one call.
type Verdict struct {
	Action Action
	// Message is what the agent is told on a Deny (it names the rule).
	Message string
}
