package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// noPermissions is the answer that grants nothing: a refusal, or a
// question that waits for a person.
var noPermissions = map[string]any{"permissions": map[string]any{}, "scope": "turn"}

// permissionsApprovalParams is item/permissions/requestApproval: Codex asks
// to widen the sandbox profile it runs under (permissions), with the
// model's reason.
type permissionsApprovalParams struct {
	ItemID      string          `json:"itemId"`
	Reason      string          `json:"reason"`
	Permissions json.RawMessage `json:"permissions"`
}

// approvePermissions puts a permissions request to the gate as a call with
// no effect, which only the thread's default answers (under approval, a
// person), as blobhub-worker asks a person. An allow grants the asked
// permissions for this turn only: never for the session, which would
// outlive the one-shot grant (docs/gate.md). A park or a refusal grants
// nothing.
func (t *turn) approvePermissions(m jsonrpc.Message) {
	var p permissionsApprovalParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.s.logger.Warn("codex: undecodable permissions request refused", "error", err)
		t.s.respond(m.ID, noPermissions)
		return
	}
	perms := p.Permissions
	if len(perms) == 0 || string(perms) == "null" {
		perms = json.RawMessage("{}")
	}
	sum := sha256.Sum256(append([]byte(methodPermissionsApproval+"\x00"), perms...))
	summary := "permissions → " + string(perms)
	if p.Reason != "" {
		summary += " (" + p.Reason + ")"
	}
	call := policy.Call{Tool: methodPermissionsApproval, Subject: methodPermissionsApproval, Kind: policy.KindApproval, InvocationID: p.ItemID,
		Input: m.Params, Summary: summary, Fingerprint: "sha256:" + hex.EncodeToString(sum[:])}
	if t.parked {
		t.s.respond(m.ID, noPermissions)
		return
	}
	switch v := t.h.Decide(call); v.Action {
	case policy.Allow:
		t.s.respond(m.ID, map[string]any{"permissions": perms, "scope": "turn"})
	case policy.Park:
		t.parked = true
		t.s.respond(m.ID, noPermissions)
	default:
		t.s.respond(m.ID, noPermissions)
	}
}
