package codex

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// approve answers one approval request through the gate. Answers are only
// accept, decline and cancel: acceptForSession and execpolicy amendments
// would outlive the one-shot grant (the execpolicy one even persists in
// $CODEX_HOME/rules; docs/gate.md, one-shot grants).
func (t *turn) approve(m jsonrpc.Message) {
	var call policy.Call
	isFile := m.Method == methodFileChangeApproval
	if isFile {
		p, ok := approvalParams[fileChangeApprovalParams](t, m, "file change")
		if !ok {
			return
		}
		call = t.fileChangeCall(p)
	} else {
		p, ok := approvalParams[commandApprovalParams](t, m, "command")
		if !ok {
			return
		}
		call = t.commandCall(p)
	}

	if t.parked {
		// Only the first call of a parked turn is asked: the others of it
		// (parallel tool calls) are cancelled with no prompt of their own.
		t.cancel(m.ID, call, agent.ToolResultItem(call.InvocationID, notRunText, false))
		return
	}
	v := t.h.Decide(call)
	switch v.Action {
	case policy.Allow:
		t.s.respond(m.ID, map[string]any{"decision": "accept"})
	case policy.Park:
		t.parked = true
		t.cancel(m.ID, call, agent.ParkedResultItem(call.InvocationID))
	default:
		// A decline cannot carry v.Message to the model (the schema has no
		// field for it): the model reads "rejected by user".
		t.s.respond(m.ID, map[string]any{"decision": "decline"})
	}
}

// approvalParams decodes the params of an approval request for what (a
// file change, a command); one it cannot read is declined, and ok is false.
func approvalParams[P any](t *turn, m jsonrpc.Message, what string) (p P, ok bool) {
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.s.logger.Warn("codex: undecodable "+what+" approval declined", "error", err)
		t.s.respond(m.ID, map[string]any{"decision": "decline"})
		return p, false
	}
	return p, true
}

// cancel answers cancel and closes the call at once with result: a
// cancelled file change never gets item/completed, a cancelled command's
// ("declined", the model reads "aborted by user") is how it was stopped,
// and the call did not run.
func (t *turn) cancel(reqID jsonrpc.ID, call policy.Call, result agent.Item) {
	t.s.respond(reqID, map[string]any{"decision": "cancel"})
	id := call.InvocationID
	if id == "" {
		return
	}
	if !t.calls[id] {
		// Normally announced by item/started; a tool_call still comes first.
		t.calls[id] = true
		t.h.Emit(agent.ToolCallItem(call.Tool, id, call.Input, strings.TrimPrefix(call.Summary, call.Tool+" → ")))
	}
	if !t.results[id] {
		t.results[id] = true
		t.h.Emit(result)
	}
}

// commandCall describes a command approval: effect exec, the script inside
// `bash -lc '…'` as the target, fingerprint over {command, cwd} as Codex
// sends them (ids and the model's reason are not part of it). A request of
// another kind (writeStdin: input to a running terminal) or for network
// access carries those in its fingerprint too, so a grant for running the
// command never covers it; a request without a command gets none.
func (t *turn) commandCall(p commandApprovalParams) policy.Call {
	command, cwd := "", t.cwd
	if p.Command != nil {
		command = *p.Command
	}
	if p.Cwd != nil && *p.Cwd != "" {
		cwd = *p.Cwd
	}
	script := policy.CodexExecCommand(command)
	if command == "" && len(p.CommandActions) == 1 {
		script = p.CommandActions[0].Command
	}
	key := map[string]any{"command": command, "cwd": cwd}
	if p.Kind != nil && *p.Kind != "" && *p.Kind != "command" {
		key["kind"] = *p.Kind
	}
	if len(p.NetworkApprovalContext) > 0 && string(p.NetworkApprovalContext) != "null" {
		key["network"] = p.NetworkApprovalContext
	}
	fp := ""
	if command != "" {
		fp = policy.Fingerprint(key)
	}
	in := maps.Clone(key)
	if p.Reason != nil && *p.Reason != "" {
		in["reason"] = *p.Reason
	}
	input, _ := json.Marshal(in)
	target := policy.Target{Command: script, Cwd: cwd}
	return policy.Call{
		Tool:         ToolExec,
		Effect:       policy.EffectExec,
		InvocationID: p.ItemID,
		Input:        input,
		Target:       target,
		Fingerprint:  fp, // "" never matches a grant
		Kind:         policy.KindApproval,
		Summary:      policy.Summary(ToolExec, target),
		// As blobhub-worker keys a command approval: its method and the
		// command as sent. Another kind of request (writeStdin, network)
		// gets no key, so such a grant never covers it.
		Subject:  methodCommandApproval,
		GrantKey: commandGrantKey(command, key),
	}
}

// commandGrantKey is the worker's grant key of a command approval, "" for
// a request that is not a plain run of a command.
func commandGrantKey(command string, key map[string]any) string {
	if command == "" || len(key) != 2 {
		return ""
	}
	return methodCommandApproval + ":" + command
}

// fileChangeCall describes a file-change approval. The request carries no
// diff (docs/agents.md, Codex approvals): paths and fingerprint come from the changes of
// the item's item/started.
func (t *turn) fileChangeCall(p fileChangeApprovalParams) policy.Call {
	changes := orNull(t.changes[p.ItemID])
	target := policy.Target{Paths: changePaths(changes, t.cwd), Cwd: t.cwd}
	in := map[string]any{"changes": json.RawMessage(changes)}
	grant := ""
	if p.GrantRoot != nil {
		grant = *p.GrantRoot
		in["grant_root"] = grant
	}
	if p.Reason != nil && *p.Reason != "" {
		in["reason"] = *p.Reason
	}
	input, _ := json.Marshal(in)
	summary := policy.Summary(ToolApplyPatch, target)
	if grant != "" {
		// grantRoot widens the sandbox for the rest of the session: say so.
		summary += " (and write access under " + grant + ")"
	}
	fp := ""
	switch {
	case string(changes) == "null":
	case grant != "":
		// A grant for the same changes without the wider root must not
		// cover this call.
		fp = policy.Fingerprint(map[string]any{"changes": json.RawMessage(changes), "grant_root": grant})
	default:
		fp = policy.Fingerprint(json.RawMessage(changes))
	}
	return policy.Call{
		// The worker names a file change by its method alone (it carries
		// no path): no grant key.
		Subject:      methodFileChangeApproval,
		Tool:         ToolApplyPatch,
		Effect:       policy.EffectWrite,
		InvocationID: p.ItemID,
		Input:        input,
		Target:       target,
		Fingerprint:  fp, // "" (unknown changes) never matches a grant
		Kind:         policy.KindApproval,
		GrantRoot:    grant,
		Summary:      summary,
	}
}
