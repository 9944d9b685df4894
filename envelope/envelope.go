// Package envelope holds the thread's two records: the wire envelope (the
// `value` of the thread's session object on BlobHub, where a person hands a
// thread off and stops it) and the local thread.yaml (what this machine
// knows of the thread, authoritative for recovery). See docs/state.md.
package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/policy"
)

// Wire instance states (the control channel).
const (
	StatePending   = "pending"
	StateActive    = "active"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// Envelope is what bhw-run reads from a thread's session object. Fields are
// extracted leniently: a wrongly typed field is recorded in Bad (by dotted
// path) so the activation checklist can fail it with its own code.
//
// The documented blocks of value.thread.metadata
// (worker/session-agent-harness/thread-object) are workspace.work_folder,
// agent {type, executable, model, effort, permissions} and instance.state;
// agent.permissions guarded, agent.budget and the policy and artifacts
// blocks are bhw-run's own (docs/contract.md, "Differences from
// blobhub-worker").
type Envelope struct {
	Raw  json.RawMessage // the value exactly as served (the caller's bytes)
	Type string

	WorkFolder string
	Agent      Agent
	// Policy is the thread's policy when the envelope carries one.
	Policy *policy.Policy
	// Artifacts is set when the envelope carries an artifacts block.
	Artifacts *Artifacts
	// Inbox is attachments.inbox: where a person's files are put,
	// relative to the work folder ("" for the default).
	Inbox string
	// HasInstance is true when metadata carries instance.state (of any type).
	HasInstance bool
	State       string
	HasAgent    bool
	Name        string

	// Bad names fields present with the wrong type: "workspace.work_folder",
	// "agent.type", "agent.permissions", "policy", "artifacts.source", …
	Bad map[string]string
}

// Agent is the envelope's agent block.
type Agent struct {
	Type        string
	Executable  string
	Model       string
	Effort      string
	Permissions string
	// Budget is agent.budget (bhw-run's own): what the thread may spend
	// over all its activations.
	Budget Budget
}

// Artifacts is the envelope's artifacts block: blobhub-worker's {prefix,
// outbox}, or bhw-run's earlier {source}.
type Artifacts struct {
	// Source is the earlier form's outbox ({source}): JSON artifact
	// objects under <thread>/artifacts/.
	Source string
	// Prefix and Outbox are blobhub-worker's form: every file of the
	// outbox (relative to the work folder) published as a session file
	// at Prefix + its path.
	Prefix, Outbox string
	sourceSet      bool // the block has a source key
	// Unusable says why a block in blobhub-worker's form cannot be used
	// (publishing is off and the thread runs, as with the worker); "" when
	// it can.
	Unusable string
}

// WorkerForm reports whether the block is blobhub-worker's form: it has no
// source.
func (a *Artifacts) WorkerForm() bool { return a != nil && a.Source == "" && !a.sourceSet }

// IsJob reports whether the object is a job thread (docs/state.md): a
// thread whose metadata carries an agent block or an instance.state.
func (e *Envelope) IsJob() bool {
	return e.Type == "thread" && (e.HasAgent || e.HasInstance)
}

// NotJSONError is returned for a value that is not a JSON object.
type NotJSONError struct{ Err error }

func (e *NotJSONError) Error() string {
	return fmt.Sprintf("the object's value is not a JSON object: %v", e.Err)
}

// MaxSize is the most bhw-run reads of an envelope's value: a hand-off is a
// few kilobytes (a policy of hundreds of rules some hundred), so a larger
// value is a mistake or an attack, refused before it is read whole.
const MaxSize = 1 << 20

// The parts of a value Parse looks at. Each decodes from a JSON object
// only: anything else reads as absent, as a lenient reader must, instead of
// failing the whole value. Keys bhw-run does not read are skipped by the
// decoder without being copied, so what a value costs to parse does not
// grow with a person's other keys.
type (
	topPart struct {
		Type   json.RawMessage `json:"type"`
		Thread threadPart      `json:"thread"`
	}
	threadPart struct {
		Attributes attrsPart `json:"attributes"`
		Metadata   metaPart  `json:"metadata"`
	}
	attrsPart struct {
		Name json.RawMessage `json:"name"`
	}
	metaPart struct {
		present   bool
		Instance  json.RawMessage `json:"instance"`
		Workspace json.RawMessage `json:"workspace"`
		Agent     json.RawMessage `json:"agent"`
		Policy    json.RawMessage `json:"policy"`
		Artifacts json.RawMessage `json:"artifacts"`
		// Attachments is blobhub-worker's attachments {inbox}.
		Attachments json.RawMessage `json:"attachments"`
	}
)

func (p *threadPart) UnmarshalJSON(b []byte) error {
	type plain threadPart
	return decodeObject(b, (*plain)(p))
}

func (p *attrsPart) UnmarshalJSON(b []byte) error {
	type plain attrsPart
	return decodeObject(b, (*plain)(p))
}

func (p *metaPart) UnmarshalJSON(b []byte) error {
	type plain metaPart
	if !isObject(b) {
		return nil
	}
	p.present = true
	return json.Unmarshal(b, (*plain)(p))
}

// decodeObject decodes b into v when b is a JSON object, else leaves v.
func decodeObject(b []byte, v any) error {
	if !isObject(b) {
		return nil
	}
	return json.Unmarshal(b, v)
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// Parse reads a session object's value. Only a value that is not a JSON
// object is an error; everything else is judged later (IsJob, the
// checklist). Raw is raw itself, not a copy.
func Parse(raw []byte) (*Envelope, error) {
	if !isObject(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		if err == nil {
			err = fmt.Errorf("a JSON %s", jsonKind(v))
		}
		return nil, &NotJSONError{Err: err}
	}
	var top topPart
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, &NotJSONError{Err: err}
	}
	e := &Envelope{Raw: raw, Bad: map[string]string{}}
	_ = json.Unmarshal(top.Type, &e.Type)
	_ = json.Unmarshal(top.Thread.Attributes.Name, &e.Name)
	m := top.Thread.Metadata
	if !m.present {
		return e, nil
	}
	// Only the blocks read below, each small, become maps.
	md := map[string]any{}
	for key, r := range map[string]json.RawMessage{"instance": m.Instance, "workspace": m.Workspace, "agent": m.Agent, "policy": m.Policy, "artifacts": m.Artifacts, "attachments": m.Attachments} {
		if r == nil {
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			md[key] = v
		}
	}
	if v, ok := md["instance"]; ok {
		inst, isMap := v.(map[string]any)
		if st, has := inst["state"]; isMap && has {
			e.HasInstance = true
			if s, ok := st.(string); ok {
				e.State = s
			} else {
				e.Bad["instance.state"] = "not a string but " + kind(st)
			}
		}
	}
	if ws, ok := md["workspace"].(map[string]any); ok {
		e.WorkFolder = e.str(ws, "work_folder", "workspace.work_folder")
	} else if _, ok := md["workspace"]; ok {
		e.Bad["workspace"] = "not a mapping but " + kind(md["workspace"])
	}
	if v, ok := md["agent"]; ok {
		e.HasAgent = true
		ag, isMap := v.(map[string]any)
		if !isMap {
			e.Bad["agent"] = "not a mapping but " + kind(v)
		}
		e.Agent = Agent{
			Type:        e.str(ag, "type", "agent.type"),
			Executable:  e.str(ag, "executable", "agent.executable"),
			Model:       e.str(ag, "model", "agent.model"),
			Effort:      e.str(ag, "effort", "agent.effort"),
			Permissions: e.str(ag, "permissions", "agent.permissions"),
		}
		e.parseBudget(ag["budget"])
	}
	if v, ok := md["policy"]; ok && !EmptyValue(v) {
		// An empty policy block is no policy, as the worker reads it: a
		// guarded thread then fails POLICY_MISSING.
		b, _ := json.Marshal(v)
		var p policy.Policy
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&p); err != nil {
			e.Bad["policy"] = err.Error()
		}
		e.Policy = &p
	}
	if v, ok := md["artifacts"]; ok && v != nil {
		e.Artifacts = e.artifacts(v)
	}
	// attachments {inbox}, read as blobhub-worker reads it: a string, else
	// nothing (the default).
	if at, ok := md["attachments"].(map[string]any); ok {
		e.Inbox, _ = at["inbox"].(string)
	}
	return e, nil
}

// artifacts reads the artifacts block. With a source key it is bhw-run's
// earlier form, whose faults fail the thread (Bad). Otherwise it is
// blobhub-worker's {prefix, outbox}, read as the worker reads it: both
// strings required, the prefix ending in "/"; a block that is not a
// mapping, or misses or mistypes either, is Unusable (warned; publishing
// off; the thread runs).
func (e *Envelope) artifacts(v any) *Artifacts {
	m, isMap := v.(map[string]any)
	if _, hasSource := m["source"]; isMap && hasSource {
		return &Artifacts{Source: e.str(m, "source", "artifacts.source"), sourceSet: true}
	}
	a := &Artifacts{}
	if !isMap {
		a.Unusable = "the artifacts block is " + kind(v) + ", not a mapping of prefix and outbox"
		return a
	}
	prefix, pok := m["prefix"].(string)
	outbox, ook := m["outbox"].(string)
	a.Prefix, a.Outbox = prefix, outbox
	var missing []string
	switch {
	case m["prefix"] != nil && !pok, m["outbox"] != nil && !ook:
		a.Unusable = fmt.Sprintf("artifacts.prefix is %s and artifacts.outbox %s; both must be strings", kindOrNone(m["prefix"]), kindOrNone(m["outbox"]))
	case prefix == "" || outbox == "":
		for name, val := range map[string]string{"prefix": prefix, "outbox": outbox} {
			if val == "" {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		a.Unusable = "the artifacts block misses " + strings.Join(missing, " and ")
	case !strings.HasSuffix(prefix, "/"):
		a.Unusable = fmt.Sprintf("artifacts.prefix %q must end in /", prefix)
	}
	return a
}

// kindOrNone is kind, or "absent" for nil.
func kindOrNone(v any) string {
	if v == nil {
		return "absent"
	}
	return kind(v)
}

// jsonKind names the kind of a decoded JSON value that is not an object.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case []any:
		return "array"
	case bool:
		return "boolean"
	}
	return "number"
}

func (e *Envelope) str(m map[string]any, key, path string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		e.Bad[path] = "not a string but " + kind(v)
	}
	return s
}

// kind names a decoded JSON value's type for a message.
func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}

// WithState returns raw with only thread.metadata.instance.state replaced;
// every other key — unknown ones too, numbers as written — is kept byte for
// byte, so a person's keys survive the runner's write. The instance mapping
// is created when missing.
//
// A policy in bhw-run's older spelling is the one other key written anew:
// in blobhub-worker's shape, which the worker reads no wider (the older
// rule {effect: write, path, decision: deny} is an allow-every-write rule
// to it). The run warns when it reads one (docs/configuration.md).
func WithState(raw json.RawMessage, state string) (json.RawMessage, error) {
	st, _ := json.Marshal(state)
	out, err := SetPath(raw, []string{"thread", "metadata", "instance", "state"}, st)
	if err != nil {
		return out, err
	}
	return upgradePolicy(out), nil
}

// upgradePolicy writes thread.metadata.policy in the worker's shape when
// it is in bhw-run's older spelling and reads cleanly; raw otherwise.
func upgradePolicy(raw json.RawMessage) json.RawMessage {
	var doc struct {
		Thread struct {
			Metadata struct {
				Policy json.RawMessage `json:"policy"`
			} `json:"metadata"`
		} `json:"thread"`
	}
	if json.Unmarshal(raw, &doc) != nil || len(doc.Thread.Metadata.Policy) == 0 {
		return raw
	}
	var p policy.Policy
	if json.Unmarshal(doc.Thread.Metadata.Policy, &p) != nil || len(p.Notes) == 0 || p.Validate() != nil {
		return raw
	}
	b, err := json.Marshal(p)
	if err != nil {
		return raw
	}
	out, err := SetPath(raw, []string{"thread", "metadata", "policy"}, b)
	if err != nil {
		return raw
	}
	return out
}

// SetPath returns raw with the value at path (a key of a mapping at each
// step) replaced by v, creating the mappings on the way; every other key is
// kept as written.
func SetPath(raw json.RawMessage, path []string, v json.RawMessage) (json.RawMessage, error) {
	if len(path) == 0 {
		return v, nil
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("envelope: %s is not a mapping: %w", path[0], err)
		}
	}
	child, err := SetPath(m[path[0]], path[1:], v)
	if err != nil {
		return nil, err
	}
	m[path[0]] = child
	return json.Marshal(m)
}

// DeletePath returns raw without the key at path, keeping every other key as
// written; a mapping the removal leaves empty goes too. A path that is not
// there changes nothing.
func DeletePath(raw json.RawMessage, path []string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("envelope: %s is not a mapping: %w", path[0], err)
	}
	child, ok := m[path[0]]
	switch {
	case !ok:
		return raw, nil
	case len(path) == 1:
		delete(m, path[0])
	default:
		var sub map[string]json.RawMessage
		if json.Unmarshal(child, &sub) != nil {
			return raw, nil // not a mapping: the path is not there
		}
		nc, err := DeletePath(child, path[1:])
		if err != nil || bytes.Equal(nc, child) {
			return raw, err
		}
		if bytes.Equal(bytes.TrimSpace(nc), []byte("{}")) {
			delete(m, path[0])
		} else {
			m[path[0]] = nc
		}
	}
	return json.Marshal(m)
}

// NewThread builds the envelope a person hands off with `thread new`.
func NewThread(workFolder, agentType, permissions, name string) json.RawMessage {
	agent := map[string]any{"type": agentType}
	if permissions != "" {
		agent["permissions"] = permissions
	}
	v := map[string]any{
		"type": "thread",
		"thread": map[string]any{
			"attributes": map[string]any{"name": name},
			"metadata": map[string]any{
				"workspace": map[string]any{"work_folder": workFolder},
				"agent":     agent,
				"instance":  map[string]any{"state": StatePending},
			},
		},
	}
	b, _ := json.Marshal(v)
	return b
}

// EmptyValue reports whether a decoded JSON value is one Python reads as
// false: null, "", 0, false, an empty list or mapping. It is how
// blobhub-worker reads an envelope's policy, and which fields of an item
// too large to post it leaves alone.
func EmptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case json.Number:
		return x == "0"
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}
