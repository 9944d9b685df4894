//go:build realcli

package e2e

// End-to-end tests of the confinement (docs/security.md) with the real
// agent CLIs: in autonomous posture the gate says yes to everything, so
// only the kernel stands between the agent's shell and bhw-run's secrets,
// other threads' folders and the rest of the user's files.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// confineProbe is what one confined thread looks out on: a key in
// ~/.blobhub/credentials.yaml, another thread's record and work folder,
// a ~/.bashrc and a file outside every folder of the agent's.
type confineProbe struct {
	key                          string
	cred, otherYAML, otherSecret string
	otherWork, bashrc, outside   string
	// outputHidden: the agent relays no tool output to bhw-run (Gemini
	// CLI's tool_call_update says only "completed"), so no refusal in it
	// can be named on the thread.
	outputHidden bool
}

const confineOriginal = "original\n"

func newConfineProbe(t testing.TB, e *e2eEnv) *confineProbe {
	t.Helper()
	p := &confineProbe{
		key:       "bhk_confine_probe_secret_0123456789",
		cred:      filepath.Join(e.home, ".blobhub", "credentials.yaml"),
		otherWork: filepath.Join(e.root, "other-work"),
		bashrc:    filepath.Join(e.home, ".bashrc"),
		outside:   filepath.Join(e.root, "outside.txt"),
	}
	p.otherSecret = filepath.Join(p.otherWork, "secret.txt")
	p.otherYAML = filepath.Join(setup.ThreadDir(e.jobDir(), "projects/p1/other"), "thread.yaml")
	write := func(path, body string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.cred, "default: probe\nprofiles:\n  probe:\n    api_key: "+p.key+"\n")
	write(p.otherYAML, fmt.Sprintf("workspace:\n  work_folder: %s\n  resolved_work_folder: %s\n", p.otherWork, p.otherWork))
	write(p.otherSecret, confineOriginal)
	write(p.bashrc, confineOriginal)
	return p
}

// script is the shell line the model asks for: every door, each read
// and write outside refused, each inside done.
func (p *confineProbe) script() string {
	return strings.Join([]string{
		"cat " + p.cred, "cat " + p.otherYAML, "cat " + p.otherSecret, "ls " + p.otherWork,
		"echo x >> " + p.bashrc, "echo x > " + p.outside, "echo x > " + p.otherWork + "/new.txt",
		"echo in > inside.txt",
		"git init -q repo && git -C repo -c user.email=a@b.c -c user.name=a commit -q --allow-empty -m one && echo git-ok",
		`echo t > "$TMPDIR/t" && echo tmp-ok`,
		"true",
	}, "; ")
}

// check wants every door outside closed and every one inside open, on
// disk and in what reached the model (bodies); the key in no body, no
// item.
func (p *confineProbe) check(t testing.TB, e *e2eEnv, alias string, bodies [][]byte) {
	t.Helper()
	all := bytes.Join(bodies, []byte("\n"))
	for _, f := range []string{p.otherSecret, p.bashrc} {
		fileIs(t, f, confineOriginal)
	}
	fileAbsent(t, p.outside)
	fileAbsent(t, filepath.Join(p.otherWork, "new.txt"))
	fileIs(t, filepath.Join(e.work, "inside.txt"), "in\n")
	if _, err := os.Stat(filepath.Join(e.work, "repo", ".git", "HEAD")); err != nil {
		t.Errorf("git in the work folder did not work: %v", err)
	}
	if bytes.Contains(all, []byte(p.key)) {
		t.Errorf("the BlobHub key reached the model")
	}
	for _, it := range e.items(alias) {
		if b, _ := json.Marshal(it); bytes.Contains(b, []byte(p.key)) {
			t.Errorf("the BlobHub key reached item %s", it.ID)
		}
	}
	// The reads were refused by the kernel, not missed: the tool said so.
	for _, want := range []string{p.cred + ": Permission denied", p.otherYAML + ": Permission denied", p.otherSecret + ": Permission denied", "git-ok", "tmp-ok"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("no model request carried %q", want)
		}
	}
	// And the thread says the confinement refused them, not the files'
	// own permissions. outside.txt would be new in a folder on the way to
	// the state tree, which the rule set does not cover: denied, not
	// read-only.
	if p.outputHidden {
		return
	}
	refused := map[string]string{}
	for _, it := range e.itemsOfType(alias, "status") {
		if m := meta(t, it); m.Status == "confinement_refused" {
			path, _ := m.All["path"].(string)
			refused[path], _ = m.All["access"].(string)
		}
	}
	for path, access := range map[string]string{p.cred: "denied", p.otherYAML: "denied", p.otherSecret: "denied", p.bashrc: "read_only", p.outside: "denied"} {
		if refused[path] != access {
			t.Errorf("confinement_refused for %s: %q, want %q (all: %v)", path, refused[path], access, refused)
		}
	}
}

// confinedLog wants the thread's agent started confined (or not).
func confinedLog(t testing.TB, e *e2eEnv, alias string, want bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Contains(b, []byte(" confined: ")); got != want {
		t.Errorf("thread.log says confined %v, want %v", got, want)
	}
}

// probeAndResume runs the probe's turn on alias, then a second turn
// (resumed() queues its reply): its own session files keep working. It
// checks the probe against what bodies() says reached the model.
func probeAndResume(t *testing.T, e *e2eEnv, p *confineProbe, alias string, resumed func(), bodies func() [][]byte) {
	t.Helper()
	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	confinedLog(t, e, alias, true)
	e.post(alias, "again")
	resumed()
	if s2 := e.activate(alias, 0, run.OutcomeTurnCompleted); s2.AgentSessionID != s1.AgentSessionID {
		t.Errorf("agent_session_id %q after the resume, want %q", s2.AgentSessionID, s1.AgentSessionID)
	}
	p.check(t, e, alias, bodies())
}

func TestE2EConfineClaude(t *testing.T) {
	e := newClaudeE2E(t)
	p := newConfineProbe(t, e.e2eEnv)
	e.model.Push(claudetest.Tool("Bash", map[string]any{"command": p.script()}), claudetest.Text("PROBED"))
	e.allowAutonomous()
	const alias = "projects/p1/claude-confined"
	e.handOff(alias, claudeType, "autonomous", "probe the doors")
	probeAndResume(t, e.e2eEnv, p, alias, func() { e.model.Push(claudetest.Text("resumed")) }, func() (out [][]byte) {
		for _, r := range e.model.Requests() {
			out = append(out, r.Body)
		}
		return out
	})
}

func TestE2EConfineCodex(t *testing.T) {
	e := newCodexE2E(t)
	p := newConfineProbe(t, e.e2eEnv)
	e.model.Push(codextest.Run(p.script()), codextest.Say("PROBED"))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	const alias = "projects/p1/codex-confined"
	e.handOff(alias, codexType, "autonomous", "probe the doors")
	probeAndResume(t, e.e2eEnv, p, alias, func() { e.model.Push(codextest.Say("resumed")) }, func() (out [][]byte) {
		for _, r := range e.model.Requests() {
			out = append(out, r.Body)
		}
		return out
	})
}

// TestE2EConfineCodexApproval: an approval Codex thread runs confined
// too, with no Codex sandbox (bubblewrap cannot run inside Landlock) and
// Codex asking before every command ("untrusted"; codex 0.171.0 asks
// before an ls). The probe parks; the person's yes lets the re-issued
// call run once, and only the kernel stands between it and the doors.
func TestE2EConfineCodexApproval(t *testing.T) {
	e := newCodexE2E(t)
	p := newConfineProbe(t, e.e2eEnv)
	e.model.Push(codextest.Run(p.script()))
	const alias = "projects/p1/codex-approval-confined"
	e.handOff(alias, codexType, "approval", "probe the doors")
	e.activate(alias, 0, run.OutcomeParked)
	confinedLog(t, e.e2eEnv, alias, true)
	call, _ := meta(t, e.onlyOfType(alias, "pending_prompt")).Prompt["call"].(map[string]any)
	if target, _ := call["target"].(map[string]any); target["command"] != p.script() {
		t.Fatalf("the thread parked on %v, want the probe", call)
	}
	fileAbsent(t, filepath.Join(e.work, "inside.txt")) // the parked call did not run

	e.post(alias, "yes")
	e.model.Push(codextest.Run(p.script()), codextest.Say("PROBED"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if m := promptResolved(t, e, alias); m.Decision != "approved" {
		t.Errorf("decision %q", m.Decision)
	}
	if n := len(e.itemsOfType(alias, "pending_prompt")); n != 1 {
		t.Errorf("%d pending prompts after the grant, want still 1", n)
	}
	var bodies [][]byte
	for _, r := range e.model.Requests() {
		bodies = append(bodies, r.Body)
	}
	p.check(t, e.e2eEnv, alias, bodies)
	if e.model.Remaining() != 0 {
		t.Errorf("%d model steps left", e.model.Remaining())
	}
}

// TestE2EConfineUnavailable: on a kernel without Landlock a thread fails
// its checklist with CONFINEMENT_UNAVAILABLE, the agent never started;
// with confine.mode off from the machine owner it runs.
func TestE2EConfineUnavailable(t *testing.T) {
	e := newClaudeE2E(t)
	e.Env = append(e.Env, confine.NoLandlockEnv+"=1")
	e.allowAutonomous()
	const alias = "projects/p1/no-landlock"
	e.handOff(alias, claudeType, "autonomous", "hello")
	s := e.activate(alias, 1, run.OutcomeFailed)
	if s.Error == nil || s.Error.Code != exit.CodeConfinementUnavailable || !strings.Contains(s.Error.Message, "confine: off") {
		t.Fatalf("summary error %+v, want %s naming the fix", s.Error, exit.CodeConfinementUnavailable)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("the agent reached the model %d times", n)
	}

	e.Config.Confine.Mode = "off"
	e.writeConfig()
	const alias2 = "projects/p1/unconfined"
	e.model.Push(claudetest.Text("ran"))
	e.handOff(alias2, claudeType, "autonomous", "hello")
	e.activate(alias2, 0, run.OutcomeTurnCompleted)
	confinedLog(t, e.e2eEnv, alias2, false)
}

// TestE2EConfineACP runs the probe on every ACP preset.
func TestE2EConfineACP(t *testing.T) {
	var cases []acpCase
	for _, a := range acptest.Agents {
		cases = append(cases, acpCase{a.Type, a, false})
	}
	runACPScenarios(t, cases, []acpScenario{{"confined", acpConfined, ""}})
}

func acpConfined(t *testing.T, e *acpE2E) {
	p := newConfineProbe(t, e.e2eEnv)
	p.outputHidden = e.a == acptest.Gemini
	const alias = "projects/p1/acp-confined"
	e.handOff(alias, e.typ, "autonomous", "probe the doors "+e.a.Shell(p.script()))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	confinedLog(t, e.e2eEnv, alias, true)
	var bodies [][]byte
	for _, r := range e.model.Requests() {
		bodies = append(bodies, r.Body)
	}
	p.check(t, e.e2eEnv, alias, bodies)
}
