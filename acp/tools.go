package acp

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// toolState is what is known of one tool call, by its toolCallId, from the
// tool_call, its updates and its permission requests, whichever comes
// first (Gemini CLI sends no tool_call before its request; OpenCode sends
// the arguments in an update after the tool_call).
type toolState struct {
	id        string
	kind      string            // the tool_call's kind (the requests' may differ)
	title     string            // the latest title
	toolName  string            // the agent's own tool name, when it says (Qwen Code)
	locations []json.RawMessage // every locations list seen
	rawInputs []json.RawMessage // every non-empty rawInput seen, latest last
	contents  []json.RawMessage // every content list seen
	status    string

	announced bool // its tool_call item is out
	done      bool // its tool_result item is out
	// decided is the verdict of its first permission request: it answers
	// the later requests of the same call (OpenCode and Copilot ask twice
	// for a write outside the cwd), so one decision or grant covers them.
	decided *policy.Action
}

func (t *turn) tool(id string) *toolState {
	if st := t.tools[id]; st != nil {
		return st
	}
	st := &toolState{id: id}
	t.tools[id] = st
	t.order = append(t.order, id)
	return st
}

// merge takes what one tool_call, update or request says about the call.
func (st *toolState) merge(kind, title *string, locations, rawInput, content json.RawMessage, toolName string) {
	if kind != nil && *kind != "" && st.kind == "" {
		st.kind = *kind
	}
	if title != nil && *title != "" {
		st.title = *title
	}
	if toolName != "" {
		st.toolName = toolName
	}
	if nonEmpty(locations) {
		st.locations = append(st.locations, locations)
	}
	if nonEmpty(rawInput) {
		st.rawInputs = append(st.rawInputs, rawInput)
	}
	if nonEmpty(content) {
		st.contents = append(st.contents, content)
	}
}

// nonEmpty: raw is a value other than null, {}, [] or "".
func nonEmpty(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "{}", "[]", `""`:
		return false
	}
	return true
}

// toolUpdate takes a tool_call or tool_call_update: the call is announced
// once its arguments are known (or anything else happens), and its result
// is relayed when it completes or fails.
func (t *turn) toolUpdate(u update) {
	id := u.ToolCallID
	if id == "" {
		t.s.Proc.Logf("skipped a %s without a toolCallId", u.Kind)
		return
	}
	_, known := t.tools[id]
	st := t.tool(id)
	st.merge(u.ToolKind, u.Title, u.Locations, u.RawInput, u.Content, u.Meta.ToolName)
	// A call is announced once started, asked for, finished, or when
	// another item comes: a pending one may not carry its arguments yet.
	if u.Status != nil {
		st.status = *u.Status
	}
	if !known {
		t.pending = append(t.pending, id)
	}
	switch {
	case st.status == "completed" || st.status == "failed":
		t.announce(st)
		if !st.done {
			st.done = true
			t.h.Emit(agent.ToolResultItem(id, toolOutput(u, st.status), st.status == "failed"))
		}
	case st.status != "" && st.status != "pending":
		// Started: its arguments are known by now (OpenCode sends them in
		// the update after a tool_call that has only the cwd; Qwen Code's
		// pending tool_call has none).
		t.announce(st)
	}
}

// toolOutput is a finished call's output: the text of its content, else
// what its rawOutput says, else the files its diffs change, else its
// status.
func toolOutput(u update, status string) string {
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Path    string          `json:"path"`
	}
	_ = json.Unmarshal(u.Content, &blocks)
	var texts, diffs []string
	for _, b := range blocks {
		switch b.Type {
		case "content":
			if s := chunkText(b.Content); s != "" {
				texts = append(texts, s)
			}
		case "diff":
			diffs = append(diffs, "changed "+b.Path)
		}
	}
	if len(texts) == 0 && nonEmpty(u.RawOutput) {
		var o map[string]any
		if json.Unmarshal(u.RawOutput, &o) == nil {
			for _, k := range []string{"output", "content", "error", "message"} {
				if s, ok := o[k].(string); ok && s != "" {
					texts = append(texts, s)
					break
				}
			}
		} else if s := strings.Trim(string(u.RawOutput), `"`); s != "" {
			texts = append(texts, s)
		}
	}
	switch {
	case len(texts) > 0:
		return strings.Join(texts, "\n")
	case len(diffs) > 0:
		return strings.Join(diffs, "\n")
	}
	return status
}

// announce emits the call's tool_call item, once, after the calls seen
// before it.
func (t *turn) announce(st *toolState) {
	if st.announced {
		return
	}
	for len(t.pending) > 0 {
		id := t.pending[0]
		t.pending = t.pending[1:]
		if id == st.id {
			break
		}
		t.announceOne(t.tools[id])
	}
	t.announceOne(st)
}

func (t *turn) announcePending() {
	for len(t.pending) > 0 {
		id := t.pending[0]
		t.pending = t.pending[1:]
		t.announceOne(t.tools[id])
	}
}

func (t *turn) announceOne(st *toolState) {
	if st == nil || st.announced {
		return
	}
	st.announced = true
	name := toolName(st.kind)
	target := t.target(effectOf(st.kind), st, nil)
	in := latest(st.rawInputs)
	if in == nil {
		m := map[string]any{"title": st.title}
		if len(target.Paths) > 0 {
			m["paths"] = target.Paths
		}
		in, _ = json.Marshal(m)
	}
	summary := (policy.Call{Target: target}).What()
	if summary == "" {
		summary = st.title
	}
	t.h.Emit(agent.ToolCallItem(name, st.id, in, summary))
}

// closeOpen gives every call without a result one, so each tool_call has
// its tool_result.
func (t *turn) closeOpen(text string) {
	t.flush()
	t.announcePending()
	for _, id := range t.order {
		if st := t.tools[id]; st.announced && !st.done {
			st.done = true
			t.h.Emit(agent.ToolResultItem(id, text, true))
		}
	}
}

// permission is one session/request_permission.
type permission struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string          `json:"toolCallId"`
		Kind       *string         `json:"kind"`
		Title      *string         `json:"title"`
		Locations  json.RawMessage `json:"locations"`
		Content    json.RawMessage `json:"content"`
		RawInput   json.RawMessage `json:"rawInput"`
		Meta       struct {
			ToolName string `json:"toolName"`
		} `json:"_meta"`
	} `json:"toolCall"`
	Options []struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
	} `json:"options"`
}

// fingerprintFields are what a one-shot grant is keyed on: between a parked
// request and the re-issued call's they were byte-equal on every agent
// measured, for writes and commands; the toolCallId and the request id
// change and are left out (docs/agents-acp.md, grant fingerprint).
var fingerprintFields = []string{"kind", "title", "locations", "content", "rawInput"}

// permission answers one permission request: through the gate, or by the
// decision already taken for the same call, or cancelled in a turn already
// parked or interrupted.
func (t *turn) permission(m jsonrpc.Message) {
	s := t.s
	if m.Method != "session/request_permission" {
		s.replyError(m.ID, jsonrpc.CodeMethodNotFound, "bhw-run does not support "+m.Method)
		return
	}
	var p permission
	var raw struct {
		ToolCall map[string]json.RawMessage `json:"toolCall"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || json.Unmarshal(m.Params, &raw) != nil {
		s.Proc.Logf("a permission request that does not decode (%v): cancelled", err)
		s.reply(m.ID, cancelled)
		return
	}
	s.mu.Lock()
	interrupted := s.interrupted
	s.mu.Unlock()
	if t.parked || interrupted {
		// Only the first call of a parked turn is asked.
		s.reply(m.ID, cancelled)
		return
	}
	tc := p.ToolCall
	id := tc.ToolCallID
	if id == "" {
		id = "request-" + m.ID.String()
	}
	_, known := t.tools[id]
	st := t.tool(id)
	reqKind := ""
	if tc.Kind != nil {
		reqKind = *tc.Kind
	}
	st.merge(tc.Kind, tc.Title, tc.Locations, tc.RawInput, tc.Content, tc.Meta.ToolName)
	if !known {
		t.pending = append(t.pending, id)
	}
	if st.decided != nil {
		s.Proc.Logf("another permission request for %s (kind %s): answered as the first (%s)", id, reqKind, *st.decided)
		t.answer(m.ID, p, *st.decided)
		return
	}
	call := t.call(p, raw.ToolCall, st, reqKind)
	t.flush()
	t.announce(st)
	v := t.h.Decide(call)
	st.decided = &v.Action
	switch v.Action {
	case policy.Park:
		t.parked = true
		st.done = true
		t.h.Emit(agent.ParkedResultItem(id))
		t.park(m.ID)
	case policy.Deny:
		st.done = true
		msg := v.Message
		if msg == "" {
			msg = "denied"
		}
		t.h.Emit(agent.ToolResultItem(id, msg, true))
		t.answer(m.ID, p, policy.Deny)
	default:
		t.answer(m.ID, p, v.Action)
	}
}

// answer selects the agent's own option of the kind the action needs:
// allow_once to run the call, reject_once to refuse it and let the turn go
// on (ACP's answer carries no message: the model reads the agent's own
// "rejected" text). Never an *_always option: it widens the grant to
// later calls of the process. With no such option the call is cancelled.
func (t *turn) answer(id jsonrpc.ID, p permission, a policy.Action) {
	kind := "reject_once"
	if a == policy.Allow {
		kind = "allow_once"
	}
	for _, o := range p.Options {
		if o.Kind == kind {
			t.s.reply(id, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}})
			return
		}
	}
	t.s.Proc.Logf("the permission request offers no %s option: cancelled", kind)
	t.s.reply(id, cancelled)
}

// park stops the turn at the call: the session/cancel notification, then
// the open request answered as the preset parks (a JSON-RPC error for
// Gemini CLI, "cancelled" for the others). Answering a reject or
// "cancelled" alone lets the turn go on (the model is told the user
// refused).
func (t *turn) park(id jsonrpc.ID) {
	s := t.s
	if err := s.rpc.Notify("session/cancel", map[string]any{"sessionId": t.sid}); err != nil {
		s.logger.Warn("acp: session/cancel for a park", "error", err)
	}
	if s.p.park == parkError {
		s.replyError(id, -32000, "parked: waiting for a person")
		return
	}
	s.reply(id, cancelled)
}

// effects by ACP tool kind; think, other, switch_mode and unknown kinds have
// none (only the thread's default answers them).
var effects = map[string]string{
	"read": policy.EffectRead, "search": policy.EffectRead,
	"edit": policy.EffectWrite, "delete": policy.EffectWrite, "move": policy.EffectWrite,
	"execute": policy.EffectExec,
	"fetch":   policy.EffectNetwork,
}

func effectOf(kind string) string { return effects[kind] }

// strength orders effects for a call asked under two kinds (OpenCode asks
// "other" for the folder of a write outside the cwd, Copilot "read"): the
// call is judged by the stronger, so one decision may cover both.
var strength = map[string]int{"": 0, policy.EffectRead: 1, policy.EffectNetwork: 2, policy.EffectWrite: 3, policy.EffectExec: 4}

func toolName(kind string) string {
	if kind == "" {
		return "tool"
	}
	return kind
}

// call describes one permission request for the gate: the effect of the
// stronger of its kind and its tool_call's, the target from its locations
// and arguments, and the fingerprint over the request's own fields.
func (t *turn) call(p permission, raw map[string]json.RawMessage, st *toolState, reqKind string) policy.Call {
	effect := effectOf(reqKind)
	if e := effectOf(st.kind); strength[e] > strength[effect] {
		effect = e
	}
	key := map[string]json.RawMessage{}
	for _, f := range fingerprintFields {
		if v, ok := raw[f]; ok {
			key[f] = v
		}
	}
	input, _ := json.Marshal(key)
	kind := reqKind
	if kind == "" {
		kind = st.kind
	}
	if k := kindOfEffect(effect); k != "" && effectOf(kind) != effect {
		kind = k
	}
	target := t.target(effect, st, p.ToolCall.RawInput)
	tool := toolName(kind)
	summary := policy.Summary(tool, target)
	if summary == tool && st.title != "" {
		summary = tool + " → " + st.title
	}
	return policy.Call{
		Tool: tool, Effect: effect, InvocationID: st.id, Input: input, Target: target,
		Fingerprint: policy.Fingerprint(key), Kind: policy.KindApproval, Summary: agent.Shorten(summary, 300),
	}
}

// kindOfEffect is the ACP kind that names effect.
func kindOfEffect(effect string) string {
	return map[string]string{policy.EffectExec: "execute", policy.EffectWrite: "edit",
		policy.EffectRead: "read", policy.EffectNetwork: "fetch"}[effect]
}

// target is what a call of effect acts on: for a command, the command line
// (its arguments' command, else the title: Gemini CLI's title is the exact
// line) and its folder; for a fetch, the URL; for the others, the paths of
// its locations, its arguments and its diffs, absolute. req, when set, is
// the request's own arguments, read first.
func (t *turn) target(effect string, st *toolState, req json.RawMessage) policy.Target {
	inputs := slices.Clone(st.rawInputs)
	slices.Reverse(inputs) // the latest first
	if nonEmpty(req) {
		inputs = append([]json.RawMessage{req}, inputs...)
	}
	var args []map[string]any
	for _, in := range inputs {
		var m map[string]any
		if json.Unmarshal(in, &m) == nil {
			args = append(args, m)
		}
	}
	str := func(keys ...string) string {
		for _, a := range args {
			for _, k := range keys {
				if s, ok := a[k].(string); ok && s != "" {
					return s
				}
			}
		}
		return ""
	}
	cwd := t.s.cwd
	switch effect {
	case policy.EffectExec:
		cmd := str("command", "cmd")
		if cmd == "" {
			cmd = st.title
		}
		if d := str("cwd", "dir_path", "directory", "workdir"); d != "" {
			cwd = t.abs(d)
		}
		return policy.Target{Command: cmd, Cwd: cwd}
	case policy.EffectNetwork:
		u := str("url")
		if u == "" {
			for _, a := range args {
				if l, ok := a["urls"].([]any); ok && len(l) > 0 {
					u, _ = l[0].(string)
					break
				}
			}
		}
		if u == "" {
			u = st.title
		}
		return policy.Target{URL: u, Cwd: cwd}
	}
	var paths []string
	add := func(p string) {
		if p == "" {
			return
		}
		if p = t.abs(p); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	for _, a := range args {
		for _, k := range []string{"file_path", "filePath", "filepath", "path", "fileName", "absolute_path", "notebook_path", "source", "destination"} {
			if s, ok := a[k].(string); ok {
				add(s)
			}
		}
	}
	for _, raw := range st.locations {
		var locs []struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(raw, &locs)
		for _, l := range locs {
			add(l.Path)
		}
	}
	for _, raw := range st.contents {
		var blocks []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		}
		_ = json.Unmarshal(raw, &blocks)
		for _, b := range blocks {
			if b.Type == "diff" {
				add(b.Path)
			}
		}
	}
	return policy.Target{Paths: paths, Cwd: cwd}
}

func (t *turn) abs(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.s.cwd, p)
	}
	return filepath.Clean(p)
}

func latest(list []json.RawMessage) json.RawMessage {
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}
