package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// TestGrantCovers: a grant covers its own call, and the re-attempt of a
// command after a cd into a folder inside the work folder, as the worker's
// does; nothing else: another command, a second clause, a folder outside
// or spelled with a shell expansion, another tool.
func TestGrantCovers(t *testing.T) {
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	const stored = "Bash:make test"
	for _, c := range []struct {
		requested string
		want      bool
	}{
		{"Bash:make test", true},
		{"Bash:cd sub && make test", true},
		{"Bash:cd " + work + " && make test", true},
		{`Bash:cd "sub" && make test`, true},
		{"Bash:cd sub && make test; rm -rf /", false},
		{"Bash:cd sub && make install", false},
		{"Bash:cd .. && make test", false},
		{"Bash:cd " + outside + " && make test", false},
		{"Bash:cd out && make test", false}, // a link leading outside
		{"Bash:cd ~ && make test", false},
		{"Bash:cd $HOME && make test", false},
		{"Bash:cd - && make test", false},
		{"Bash:cd missing && make test", false},
		{"Bash:echo x && cd sub && make test", false},
		{"Write:cd sub && make test", false},
	} {
		if got := grantCovers(stored, c.requested, work); got != c.want {
			t.Errorf("grantCovers(%q, %q) = %v, want %v", stored, c.requested, got, c.want)
		}
	}
	if grantCovers(stored, "Bash:cd sub && make test", "") {
		t.Error("a cd is covered with no work folder to check it against")
	}
}

// TestDaemonGrantSpent: the one-shot grant the daemon recorded
// (agent.grant, no fingerprint grant of bhw-run's) lets through, once,
// the call a person approved, and its `cd <dir> && ` re-attempt, as the
// worker's does, with an approval_granted item naming the prompt behind
// it; another call of the same tool still asks, and a call a rule denies
// stays denied.
func TestDaemonGrantSpent(t *testing.T) {
	h := newHarness(t, false)
	const alias = "projects/p1/daemon-grant"
	h.handOff(alias, setup.PermApproval, "")
	a := gateActivation(t, h, alias)
	a.rec.t.Workspace = envelope.Workspace{WorkFolder: h.work}
	if err := os.Mkdir(filepath.Join(h.work, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	th := &turnHandler{a: a, gate: a.r.gate(setup.PermApproval, policy.Policy{}, h.work, ""), posture: setup.PermApproval}
	bash := func(cmd string) policy.Call {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		return policy.Call{Tool: "Bash", Effect: policy.EffectExec, InvocationID: "toolu_" + cmd, Input: in,
			Target: policy.Target{Command: cmd}, Fingerprint: "sha256:" + cmd, Kind: policy.KindApproval}
	}
	grant := func() {
		a.rec.t.Agent.Grant = &envelope.Grant{Subject: "Bash", Verdict: envelope.GrantApprove, GrantedBy: "prm_01DAEMON", GrantKey: "Bash:make test"}
	}

	grant()
	if v, _ := th.decide(bash("make install")); v.Action != policy.Park {
		t.Fatalf("another command under the grant: %v, want a question", v.Action)
	}
	th.prompt = nil
	a.rec.t.Prompt = nil
	if a.rec.t.Agent.Grant == nil {
		t.Fatal("a call the grant does not cover spent it")
	}
	if v, _ := th.decide(bash("cd sub && make test")); v.Action != policy.Allow {
		t.Fatalf("the approved command after a cd into the work folder: %v, want allowed", v.Action)
	}
	if a.rec.t.Agent.Grant != nil {
		t.Error("the grant was not spent")
	}
	if v, _ := th.decide(bash("make test")); v.Action != policy.Park {
		t.Errorf("the approved command a second time: %v, want a question (the grant is one-shot)", v.Action)
	}
	var granted []map[string]any
	for _, it := range h.srv.Items(alias) {
		var m map[string]any
		if json.Unmarshal(it.Metadata, &m) == nil && m["type"] == itemApprovalGranted {
			granted = append(granted, m)
		}
	}
	if len(granted) != 1 || granted[0]["granted_by"] != "prm_01DAEMON" || granted[0]["subject"] != "Bash" {
		t.Errorf("approval_granted items %v, want one naming prm_01DAEMON", granted)
	}

	// A Codex command: the worker names it by its request's method and
	// keys it on the command as sent; a grant with no key (a file change)
	// is not spent by bhw-run.
	codexCall := func(cmd, subject, key string) policy.Call {
		c := bash(cmd)
		c.Tool, c.Subject, c.GrantKey = "exec", subject, key
		return c
	}
	const method = "item/commandExecution/requestApproval"
	th.prompt, a.rec.t.Prompt = nil, nil
	a.rec.t.Agent.Grant = &envelope.Grant{Subject: method, Verdict: envelope.GrantApprove, GrantedBy: "prm_02", GrantKey: method + ":make test"}
	if v, _ := th.decide(codexCall("make test", method, method+":make test")); v.Action != policy.Allow || a.rec.t.Agent.Grant != nil {
		t.Errorf("the daemon's Codex command grant: %v, grant left %+v", v.Action, a.rec.t.Agent.Grant)
	}
	// A grant with no key (the worker's for a Codex file change or
	// permissions request, which name no call) is spent as the worker
	// spends it: by the next request of its subject, which names no call
	// either; not by another subject, nor by a call that names one.
	const fileChange, permissions = "item/fileChange/requestApproval", "item/permissions/requestApproval"
	keyless := func(subject string) {
		th.prompt, a.rec.t.Prompt = nil, nil
		a.rec.t.Agent.Grant = &envelope.Grant{Subject: subject, Verdict: envelope.GrantApprove, GrantedBy: "prm_03"}
	}
	keyless(fileChange)
	if v, _ := th.decide(codexCall("x", permissions, "")); v.Action != policy.Park || a.rec.t.Agent.Grant == nil {
		t.Errorf("a file change grant and a permissions request: %v, grant %+v; want a question and the grant left", v.Action, a.rec.t.Agent.Grant)
	}
	keyless(fileChange)
	if v, _ := th.decide(codexCall("x", fileChange, "")); v.Action != policy.Allow || a.rec.t.Agent.Grant != nil {
		t.Errorf("a keyless file change grant: %v, grant %+v; want the change allowed and the grant spent", v.Action, a.rec.t.Agent.Grant)
	}
	keyless(permissions)
	if v, _ := th.decide(codexCall("x", permissions, "")); v.Action != policy.Allow || a.rec.t.Agent.Grant != nil {
		t.Errorf("a keyless permissions grant: %v, grant %+v; want the request allowed and the grant spent", v.Action, a.rec.t.Agent.Grant)
	}
	keyless("Bash")
	if v, _ := th.decide(bash("rm -rf x")); v.Action != policy.Park || a.rec.t.Agent.Grant == nil {
		t.Errorf("a keyless Bash grant: %v, grant %+v; want a question (bhw-run spends it on no call that names one)", v.Action, a.rec.t.Agent.Grant)
	}
	granted = nil
	for _, it := range h.srv.Items(alias) {
		var m map[string]any
		if json.Unmarshal(it.Metadata, &m) == nil && m["type"] == itemApprovalGranted && m["granted_by"] == "prm_03" {
			granted = append(granted, m)
		}
	}
	if len(granted) != 2 || granted[0]["subject"] != fileChange || granted[1]["subject"] != permissions {
		t.Errorf("approval_granted items of the keyless grants %v, want the file change's and the permissions'", granted)
	}
}
