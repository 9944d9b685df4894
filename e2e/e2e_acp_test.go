//go:build realcli

package e2e

// End-to-end tests of bhw-run with the four real pinned ACP agents (Gemini
// CLI, Qwen Code, OpenCode, Copilot CLI) against the scripted fake models
// of acp/acptest, and of the generic acp type with Qwen Code declared by
// hand in config.yaml: the built binary runs as a subprocess, the way cron
// or a person's shell runs it. Each agent goes through the scenarios the
// Claude and Codex tests go through: an autonomous turn and its resume in
// a new process, an approval parked and answered yes (the call runs once)
// or no, the guarded posture, a lost session, a model answering 500, a
// SIGTERM and a kill -9 mid-turn.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// acpE2E is an e2eEnv whose config points one ACP agent type at a real CLI
// talking to a fake model.
type acpE2E struct {
	*e2eEnv
	a     *acptest.Agent
	typ   string // agent.type of the threads: the preset's, or "acp"
	model acptest.Fake
	home  string // the generic type's declared QWEN_HOME
	// held: the scenario holds one of acpSlots.
	held bool
}

// acquire and release take and give back the scenario's place among
// those running at once (acpSlots).
func (e *acpE2E) acquire() {
	if !e.held {
		acpSlots.Acquire(e.t, acpSlotWait)
		e.held = true
	}
}

func (e *acpE2E) release() {
	if e.held {
		acpSlots.Release()
		e.held = false
	}
}

// genericType is the generic ACP type, driven here with Qwen Code.
const genericType = "acp"

func newACPE2E(t testing.TB, a *acptest.Agent, generic bool) *acpE2E {
	t.Helper()
	e := &acpE2E{e2eEnv: newE2E(t), a: a, typ: a.Type, model: a.NewFake(t)}
	s := a.Setup(t, e.model.BaseURL())
	// A turn that hangs ends within the test's bounds.
	e.Env = append(e.Env, "BHW_MAX_DURATION=6m", "BHW_STALL_TIMEOUT=4m")
	if generic {
		e.declareGeneric(s)
	} else {
		ac := e.agentConfig(e.typ)
		ac.Executable, ac.Model = a.Bin(t), s.Model
		for k, v := range s.Own {
			ac.Own[k] = v
		}
		// The key and endpoint come from bhw-run's own environment: they
		// reach the agent through its allowlisted prefixes.
		for k, v := range s.Env {
			e.Env = append(e.Env, k+"="+v)
		}
	}
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpLogs()
		}
	})
	return e
}

// dumpLogs writes every thread.log of the state tree to the test log, each
// line cut short.
func (e *acpE2E) dumpLogs() {
	_ = filepath.WalkDir(e.state, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "thread.log" {
			return nil
		}
		b, _ := os.ReadFile(path)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			lines = append(lines, agent.Shorten(l, 600))
		}
		e.t.Logf("%s:\n%s", path, strings.Join(lines, "\n"))
		return nil
	})
}

// declareGeneric declares Qwen Code as the generic acp type, by hand: the
// executable, its flags, its environment and its settings file, as a
// machine owner would for an agent bhw-run has no preset for.
func (e *acpE2E) declareGeneric(s acptest.Setup) {
	e.t.Helper()
	e.typ = genericType
	e.home = filepath.Join(e.root, "qwen-home")
	settings := map[string]any{
		"security":    map[string]any{"auth": map[string]any{"selectedType": "openai"}},
		"privacy":     map[string]any{"usageStatisticsEnabled": false},
		"telemetry":   map[string]any{"enabled": false},
		"general":     map[string]any{"enableAutoUpdate": false},
		"model":       map[string]any{"name": s.Model, "generationConfig": map[string]any{"maxRetries": 0}},
		"ui":          map[string]any{"enableFollowupSuggestions": false},
		"memory":      map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
		"permissions": map[string]any{"ask": []string{"Bash", "Write", "Edit", "NotebookEdit", "WebFetch"}},
	}
	b, _ := json.Marshal(settings)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "settings.json"), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	ac := e.agentConfig(genericType)
	ac.Executable = e.a.Bin(e.t)
	ac.ExtraArgs = []string{"--acp", "--approval-mode", "default"}
	ac.Env = map[string]string{"QWEN_HOME": e.home, "OPENAI_MODEL": s.Model}
	// A home bhw-run does not know of (the generic type has none): the
	// owner lets the confined agent write it, as docs/security.md says.
	e.Config.Confine.Writable = append(e.Config.Confine.Writable, e.home)
	for k, v := range s.Env {
		ac.Env[k] = v
	}
}

func (e *acpE2E) file(name string) string { return filepath.Join(e.work, name) }

// threadHome is the agent's home in the thread's folder.
func (e *acpE2E) threadHome(alias string) string {
	return filepath.Join(setup.ThreadDir(e.jobDir(), alias), setup.ThreadHomeDir)
}

// modelRequests are the fake's scripted requests (those offering tools).
func (e *acpE2E) modelRequests() []acptest.Request { return e.model.ModelRequests() }

// lastRequest is the last scripted request whose last user text holds s.
func (e *acpE2E) lastRequest(s string) (acptest.Request, bool) {
	reqs := e.modelRequests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if strings.Contains(reqs[i].LastUserText(), s) {
			return reqs[i], true
		}
	}
	return acptest.Request{}, false
}

// acpScenario is one scenario an ACP agent type is put through.
type acpScenario struct {
	name string
	f    func(t *testing.T, e *acpE2E)
	// only, when set, is the one agent type the scenario is about (a
	// behaviour only it shows).
	only string
}

// acpScenarios is what every ACP agent type is put through.
var acpScenarios = []acpScenario{
	{"autonomous_and_resume", acpAutonomous, ""},
	{"approve", acpApprove, ""},
	{"deny", acpDeny, ""},
	{"guarded", acpGuarded, ""},
	{"lost_session", acpLostSession, ""},
	{"model_500", acpModel500, ""},
	{"sigterm", acpSIGTERM, ""},
	{"kill9", acpKill9, ""},
}

// acpSlots bounds how many scenarios run at once: an agent takes 0.3–0.6
// GB and seconds of CPU to start, and two cores are shared; most of a
// scenario's time is spent waiting on the agents (and on Gemini CLI's
// minute rule), so a few run side by side.
var acpSlots = acptest.NewSlots(4)

// acpSlotWait bounds a scenario's wait for its slot: the forty scenarios
// in front take 10–20 minutes on a loaded two-core machine.
const acpSlotWait = 40 * time.Minute

// beforeResume waits, for Gemini CLI, until the UTC minute in which the
// thread's session was created has passed, outside the scenario's slot:
// bhw-run would wait for it too (a load in that minute overwrites the
// session), holding an agent slot for nothing. The wait is for a clock
// boundary, not for an event anyone signals.
func (e *acpE2E) beforeResume(alias string) {
	if e.a != acptest.Gemini || e.typ == genericType {
		return
	}
	sid := e.threadYAML(alias).Agent.AgentSessionID
	// Recorded in the state tree's cache, out of the agent's reach.
	b, err := os.ReadFile(filepath.Join(e.state, "cache", "acp-sessions", sid))
	if err != nil {
		e.t.Fatalf("the session's creation was not recorded: %v", err)
	}
	created, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		e.t.Fatal(err)
	}
	d := time.Until(created.Truncate(time.Minute).Add(time.Minute))
	if d <= 0 {
		return
	}
	e.release()
	time.Sleep(d)
	e.acquire()
}

// acpCase is an ACP agent type the scenarios run on: a preset, or the
// generic type driving the agent by hand.
type acpCase struct {
	name    string
	a       *acptest.Agent
	generic bool
}

// TestE2EACP runs every scenario on every ACP agent type.
func TestE2EACP(t *testing.T) {
	var cases []acpCase
	for _, a := range acptest.Agents {
		cases = append(cases, acpCase{a.Type, a, false})
	}
	runACPScenarios(t, append(cases, acpCase{genericType + "_qwen", acptest.Qwen, true}), acpScenarios)
}

// runACPScenarios runs every scenario on every case, each in its own
// environment, as many at once as acpSlots admits.
func runACPScenarios(t *testing.T, cases []acpCase, scenarios []acpScenario) {
	var wg sync.WaitGroup
	for _, c := range cases {
		for _, sc := range scenarios {
			if sc.only != "" && sc.only != c.a.Type {
				continue
			}
			wg.Add(1)
			// Subtests started from goroutines do not wait for a -parallel
			// slot; acpSlots bounds them instead.
			go func() {
				defer wg.Done()
				t.Run(c.name+"/"+sc.name, func(t *testing.T) {
					e := newACPE2E(t, c.a, c.generic)
					e.acquire()
					defer e.release()
					t0 := time.Now()
					sc.f(t, e)
					t.Logf("%s/%s took %s", c.name, sc.name, time.Since(t0).Round(100*time.Millisecond))
				})
			}()
		}
	}
	wg.Wait()
}

func acpAutonomous(t *testing.T, e *acpE2E) {
	x := e.file("x.txt")
	const alias = "projects/p1/acp-auto"
	e.handOff(alias, e.typ, "autonomous", "please write x.txt "+e.a.Write(x, "hi\n"))
	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, x, "hi\n")
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result", "text", "turn_end")
	if s1.AgentSessionID == "" || s1.ItemsPosted != 4 {
		t.Errorf("summary %+v, want an agent_session_id and 4 items posted", s1)
	}
	if r := meta(t, e.itemsOfType(alias, "tool_result")[0]); r.Tool["is_error"] != false {
		t.Errorf("tool_result %+v", r.Tool)
	}
	e.wantCompletedIdle(alias, s1.AgentSessionID)
	if e.typ != genericType {
		if _, err := os.Stat(e.threadHome(alias)); err != nil {
			t.Errorf("no home in the thread's folder: %v", err)
		}
	}

	// Nothing new: idle, the agent not started.
	n := len(e.model.Requests())
	e.activate(alias, 0, run.OutcomeIdle)
	if len(e.model.Requests()) != n {
		t.Fatal("an idle run reached the model")
	}

	// A second message: a new bhw-run loads the same session, and the
	// model sees the earlier call in its history.
	e.post(alias, "second message")
	e.beforeResume(alias)
	s2 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s2.AgentSessionID != s1.AgentSessionID {
		t.Errorf("agent_session_id %q after the resume, want %q", s2.AgentSessionID, s1.AgentSessionID)
	}
	last, ok := e.lastRequest("second message")
	if !ok {
		t.Fatal("no model request carried the second message")
	}
	if !slices.ContainsFunc(last.Calls(), func(c acptest.Call) bool { return c.Name == e.a.WriteTool }) {
		t.Errorf("the resumed request lacks the first turn's call: %+v", last.Turns)
	}
	// The replay of the loaded session is not posted again.
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result", "text", "turn_end", "person", "text", "turn_end")
}

// parkOn hands off an approval thread whose model makes the call marker
// names and runs it to the park; a run with no answer stays parked
// without starting the agent.
func (e *acpE2E) parkOn(alias, marker string) itemMeta {
	t := e.t
	e.handOff(alias, e.typ, "approval", marker)
	e.activate(alias, 0, run.OutcomeParked)
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "pending_prompt", "tool_result", "turn_end")
	if r := meta(t, e.itemsOfType(alias, "tool_result")[0]); r.Tool["output"] != agent.WaitingText || r.Tool["is_error"] != false {
		t.Errorf("the parked call's result %+v", r.Tool)
	}
	pm := meta(t, e.itemsOfType(alias, "pending_prompt")[0])
	if pm.Prompt["kind"] != policy.KindApproval {
		t.Fatalf("pending_prompt %+v", pm.Prompt)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "parked" {
		t.Errorf("turn_end outcome %q", got)
	}
	if th := e.threadYAML(alias); th.Prompt == nil || th.Agent.Process != nil {
		t.Fatalf("thread.yaml prompt %+v process %+v", th.Prompt, th.Agent.Process)
	}
	n := len(e.model.Requests())
	e.srv.ResetCounts()
	e.activate(alias, 0, run.OutcomeParked)
	if len(e.model.Requests()) != n {
		t.Fatal("the model got requests while parked with no answer")
	}
	if total, cmds := e.srv.Requests(); total != 2 {
		t.Errorf("the idle parked run made %d BlobHub requests %v, want 2", total, cmds)
	}
	return pm
}

func (e *acpE2E) resolved(alias string) itemMeta {
	e.t.Helper()
	r := e.itemsOfType(alias, "pending_prompt_resolved")
	if len(r) != 1 || count(e.itemTypes(alias), "pending_prompt") != 1 {
		e.t.Fatalf("items %v: want one pending_prompt and one pending_prompt_resolved", e.itemTypes(alias))
	}
	m := meta(e.t, r[0])
	if want := e.itemsOfType(alias, "pending_prompt")[0].ID; m.PromptItemID != want {
		e.t.Errorf("prompt_item_id %q, want %q", m.PromptItemID, want)
	}
	return m
}

func acpApprove(t *testing.T, e *acpE2E) {
	const cmd = "echo ran >> esc.log"
	const alias = "projects/p1/acp-approve"
	pm := e.parkOn(alias, e.a.Shell(cmd))
	call, _ := pm.Prompt["call"].(map[string]any)
	target, _ := call["target"].(map[string]any)
	if call["effect"] != policy.EffectExec || target["command"] != cmd || target["cwd"] != e.work {
		t.Fatalf("pending_prompt call %+v", call)
	}
	if exists(e.file("esc.log")) {
		t.Fatal("the parked command ran")
	}

	// The person says yes: the resumed session re-issues the identical
	// call, the grant allows it once.
	e.post(alias, "yes")
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, e.file("esc.log"), "ran\n")
	if m := e.resolved(alias); m.Decision != "approved" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved %+v", m)
	}
	if _, ok := e.lastRequest("A person approved your call to execute `" + cmd + "`"); !ok {
		t.Error("the resume message did not reach the model")
	}
	if th := e.threadYAML(alias); th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("thread.yaml after the approved turn: prompt %+v grants %v", th.Prompt, th.Grants)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q", st)
	}
}

func acpDeny(t *testing.T, e *acpE2E) {
	x := e.file("x.txt")
	const alias = "projects/p1/acp-deny"
	pm := e.parkOn(alias, e.a.Write(x, "never\n"))
	call, _ := pm.Prompt["call"].(map[string]any)
	target, _ := call["target"].(map[string]any)
	if paths, _ := target["paths"].([]any); call["effect"] != policy.EffectWrite || !slices.Contains(paths, any(x)) {
		t.Fatalf("pending_prompt call %+v", call)
	}
	e.post(alias, "no, use the other file")
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileAbsent(t, x)
	if m := e.resolved(alias); m.Decision != "denied" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved %+v", m)
	}
	if _, ok := e.lastRequest("A person denied your call to edit " + x + ": no, use the other file"); !ok {
		t.Error("the model was not told of the deny and its reason")
	}
}

// acpGuarded: the guarded scenario of the Claude and Codex tests: the
// rules in force first, the allowed command unasked, the worker's deny
// winning over the thread's allow with the turn going on, the asked call
// parked and run once on "yes", and policy explain agreeing. Gemini CLI
// refuses every write outside its workspace by itself, without asking, so
// its denied call is a command the worker denies.
func acpGuarded(t *testing.T, e *acpE2E) {
	s := newGuardedScenario(e.e2eEnv, e.typ, func() int { return len(e.modelRequests()) })
	pol := s.threadPolicy()
	denied := e.a.Write(s.deniedPath, "should never land\n")
	deniedCmd := "rm -rf denied-dir"
	if e.a == acptest.Gemini {
		e.Config.Policy.Rules = []policy.Rule{{ID: "no-rm-rf", Effect: policy.EffectExec, Command: []string{"rm -rf *"}, Action: policy.DecisionDeny}}
		e.writeConfig()
		pol.Rules = append(pol.Rules[:2], policy.Rule{Effect: policy.EffectExec, Command: []string{"rm *"}, Action: policy.DecisionAllow})
		denied = e.a.Shell(deniedCmd)
		s.rules = []string{"worker/exec/deny", "thread/read/allow", "thread/exec/allow", "thread/exec/allow"}
		if err := os.MkdirAll(e.file("denied-dir"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("no policy", s.policyMissing)

	const alias = "projects/p1/acp-guarded"
	asked := e.a.Shell(s.askedCmd)
	first := "make the markers " + e.a.Shell(s.allowedCmd) + " " + denied
	// Qwen Code, OpenCode and Copilot end the turn at a refused call (the
	// model is not asked again), so the asked call comes in a second
	// message there; Gemini CLI tells the model and goes on.
	endsAtReject := e.a != acptest.Gemini
	if !endsAtReject {
		first += " " + asked
	}
	e.handOffGuarded(alias, e.typ, pol, first)
	from := len(e.items(alias))
	n0 := len(e.modelRequests())
	if endsAtReject {
		e.activate(alias, 0, run.OutcomeTurnCompleted)
		if n := len(e.modelRequests()) - n0; n != 2 {
			t.Errorf("%d model requests in the first turn, want 2 (allowed, denied)", n)
		}
		s.checkPolicyFirst(t, alias, from)
		e.post(alias, "and the last one "+asked)
		from = len(e.items(alias))
		e.activate(alias, 0, run.OutcomeParked)
	} else {
		e.activate(alias, 0, run.OutcomeParked)
		// The turn went on after the deny: the model got the call's
		// refusal and asked for the next call (ACP's reject carries no
		// message).
		if n := len(e.modelRequests()) - n0; n != 3 {
			t.Errorf("%d model requests in the parked turn, want 3 (allowed, denied, asked)", n)
		}
	}
	s.checkPolicyFirst(t, alias, from)
	if e.a == acptest.Gemini {
		acpCheckExecDenied(t, e, alias, deniedCmd)
	} else {
		s.checkDenied(t, alias)
	}
	s.checkParked(t, alias)

	e.post(alias, "yes")
	from = len(e.items(alias))
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	s.checkPolicyFirst(t, alias, from)
	s.checkReleased(t, alias)
	if e.a != acptest.Gemini {
		t.Run("explain agrees with the gate", func(t *testing.T) { s.explainAgrees(t, alias) })
	}
}

// acpCheckExecDenied: one policy_denied by the worker's exec rule for the
// command, which did not run.
func acpCheckExecDenied(t *testing.T, e *acpE2E, alias, cmd string) {
	t.Helper()
	denied, m := e.oneDenied(t, alias)
	if m.Rule != "no-rm-rf" || m.Origin != "worker" || m.Detail != cmd || m.Call.Effect != policy.EffectExec || m.Call.Target.Command != cmd {
		t.Errorf("policy_denied %s", denied.Metadata)
	}
	if !exists(e.file("denied-dir")) {
		t.Error("the denied command ran")
	}
}

func acpLostSession(t *testing.T, e *acpE2E) {
	const alias = "projects/p1/acp-lost"
	e.handOff(alias, e.typ, "autonomous", "first message LOST-HISTORY-MARKER")
	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	// The agent's sessions are gone (a wiped home, another machine's
	// record); its settings are written again at the next start.
	home := e.threadHome(alias)
	if e.typ == genericType {
		home = e.home
		ents, _ := os.ReadDir(home)
		for _, de := range ents {
			if de.Name() != "settings.json" {
				if err := os.RemoveAll(filepath.Join(home, de.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	} else if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	e.post(alias, "second message")
	s2 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s2.AgentSessionID == "" || s2.AgentSessionID == s1.AgentSessionID {
		t.Fatalf("agent_session_id %q after a lost session, want a new one (was %q)", s2.AgentSessionID, s1.AgentSessionID)
	}
	last, ok := e.lastRequest("second message")
	if !ok || !strings.Contains(last.LastUserText(), "could not be resumed") {
		t.Fatalf("the fresh session's message %q lacks the note", last.LastUserText())
	}
	if last.Contains("LOST-HISTORY-MARKER") {
		t.Fatal("the fresh session carries the lost history")
	}
	if tokens := e.statusTokens(alias); !slices.Contains(tokens, "resume_failed") {
		t.Fatalf("status tokens %v, want resume_failed", tokens)
	}
	wantTypes(t, e.itemTypes(alias), "person", "text", "turn_end", "person", "status", "text", "turn_end")
}

func acpModel500(t *testing.T, e *acpE2E) {
	// Every scripted request fails 500; a short Retry-After keeps the
	// agents' own retries quick where they honour it.
	e.model.Inject(acptest.Fault{Status: 500, RetryAfter: 100 * time.Millisecond})
	const alias = "projects/p1/acp-500"
	e.handOff(alias, e.typ, "autonomous", "hello")
	t0 := time.Now()
	// Qwen Code retries a 500 seven times (~80 s, no setting, no
	// Retry-After honoured); the agent idles meanwhile, so the scenario
	// gives its slot back for the while.
	e.release()
	e.activate(alias, 3, run.OutcomeTurnFailed)
	e.acquire()
	t.Logf("the failed turn took %s, %d model requests", time.Since(t0).Round(100*time.Millisecond), len(e.modelRequests()))
	types := e.itemTypes(alias)
	if count(types, "status") == 0 || count(types, "turn_end") != 1 || types[len(types)-1] != "turn_end" {
		t.Fatalf("items %v: want a status and a final turn_end", types)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "failed" {
		t.Errorf("turn_end outcome %q, want failed", got)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
	if th := e.threadYAML(alias); th.Agent.State != "active" || th.Turn.State != "idle" {
		t.Errorf("thread.yaml agent %q turn %q", th.Agent.State, th.Turn.State)
	}
}

// longCommand starts a command that says it runs, then sleeps long enough
// that only a signal ends it; run again (the turn redelivered after the
// signal), it says "again" at once.
const longCommand = "if [ -e started.marker ]; then echo again; else touch started.marker && sleep 90 && touch late.txt; fi"

// midCommand starts an autonomous run of the long command and waits until
// the command runs and its tool_call is posted; it returns the run and
// the agent's group.
func (e *acpE2E) midCommand(alias string) (*proc, int) {
	return e.midCommandOf(alias, longCommand)
}

// escapingCommand is longCommand with two tools that leave the agent's
// reach by themselves: a sleep in a process group of its own (bash job
// control, as OpenCode runs its commands) and a double-forked daemon in a
// session of its own whose parent is gone. Both keep the work folder as
// their working folder, so noProcessesLeft finds them.
const escapingCommand = "if [ -e started.marker ]; then echo again; else bash -c 'set -m; sleep 91 & wait' & setsid sh -c '(sleep 92 &)' & touch started.marker && sleep 90 && touch late.txt; fi"

// midCommandOf is midCommand running command.
func (e *acpE2E) midCommandOf(alias, command string) (*proc, int) {
	t := e.t
	e.handOff(alias, e.typ, "autonomous", "sleep a while "+e.a.Shell(command))
	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	waitFor(t, 2*time.Minute, "the command to start", func() bool { return exists(e.file("started.marker")) })
	waitFor(t, time.Minute, "the tool_call item", func() bool { return count(e.itemTypes(alias), "tool_call") == 1 })
	th := e.threadYAML(alias)
	if th.Agent.Process == nil || th.Agent.Process.Pgid <= 0 {
		t.Fatalf("no agent group recorded while the agent runs: %+v", th.Agent.Process)
	}
	pgid := th.Agent.Process.Pgid
	live := liveProcesses([]int{pgid}, e.work)
	if !slices.ContainsFunc(live, func(pi procInfo) bool { return pi.pgid == pgid }) ||
		!slices.ContainsFunc(live, func(pi procInfo) bool { return strings.Contains(pi.cmd, "sleep 90") }) {
		t.Fatalf("before the signal the agent's group %d and the sleep should be found; found %+v", pgid, live)
	}
	return p, pgid
}

// wantResumedAfterSignal: the next run resumed the interrupted turn, whose
// message came again.
func (e *acpE2E) wantResumedAfterSignal(alias string) {
	t := e.t
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if th := e.threadYAML(alias); th.Turn.State != "idle" || th.Agent.Process != nil {
		t.Errorf("thread.yaml after the resumed turn: turn %+v process %+v", th.Turn, th.Agent.Process)
	}
	if !slices.Contains(e.statusTokens(alias), "interrupted_turn_resumed") {
		t.Errorf("no interrupted_turn_resumed status item: %v", e.itemTypes(alias))
	}
	if _, ok := e.lastRequest("sleep a while"); !ok {
		t.Error("the resumed turn lacks the interrupted turn's message")
	}
	noProcessesLeft(t, nil, e.work)
	if exists(e.file("late.txt")) {
		t.Error("the interrupted command finished")
	}
}

func acpSIGTERM(t *testing.T, e *acpE2E) {
	const alias = "projects/p1/acp-sigterm"
	p, pgid := e.midCommand(alias)
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	t.Logf("SIGTERM → exit %d after %v\nstderr:\n%s", code, time.Since(t0), tail(p.stderr.String(), 3000))
	if code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143", code)
	}
	if s := parseSummary(t, p.stdout.String()); s.Outcome != run.OutcomeInterrupted || s.ExitCode != 143 {
		t.Errorf("summary %+v", s)
	}
	noProcessesLeft(t, []int{pgid}, e.work)
	// The open call has its result (the agent's own, "cancelled", or
	// bhw-run's when the agent gave none); no turn_end: the turn is not
	// over.
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result")
	if th := e.threadYAML(alias); th.Turn.State != "interrupted" || th.Agent.Process != nil {
		t.Fatalf("thread.yaml after SIGTERM: turn %+v process %+v", th.Turn, th.Agent.Process)
	}
	e.wantResumedAfterSignal(alias)
}

// acpKill9: bhw-run killed with -9 mid-command leaves its agent behind;
// the next run stops that group, finishes what was journaled and runs the
// turn again: every item is posted once, and one turn_end closes the turn.
//
// The command's tools include one in a process group of its own and a
// double-forked daemon: once bhw-run is killed, only the supervisor it
// started the agent below can still find them (docs/processes.md).
func acpKill9(t *testing.T, e *acpE2E) {
	const alias = "projects/p1/acp-kill9"
	p, pgid := e.midCommandOf(alias, escapingCommand)
	waitFor(t, time.Minute, "the tools that leave the agent's group", func() bool {
		live := liveProcesses(nil, e.work)
		return slices.ContainsFunc(live, func(pi procInfo) bool { return strings.Contains(pi.cmd, "sleep 91") }) &&
			slices.ContainsFunc(live, func(pi procInfo) bool { return strings.Contains(pi.cmd, "sleep 92") })
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d after kill -9", code)
	}
	e.wantResumedAfterSignalKill(alias)
	noProcessesLeft(t, []int{pgid}, e.work)
}

func (e *acpE2E) wantResumedAfterSignalKill(alias string) {
	t := e.t
	e.beforeResume(alias)
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	wantEachEmissionOnce(t, e.e2eEnv, alias)
	types := e.itemTypes(alias)
	if count(types, "person") != 1 || count(types, "turn_end") != 1 || types[len(types)-1] != "turn_end" {
		t.Errorf("items %v: want one person message and one final turn_end", types)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "completed" {
		t.Errorf("turn_end outcome %q", got)
	}
	if _, ok := e.lastRequest("sleep a while"); !ok {
		t.Error("the turn after the kill lacks the interrupted turn's message")
	}
	if th := e.threadYAML(alias); th.Turn.State != "idle" || th.Agent.Process != nil {
		t.Errorf("thread.yaml: turn %+v process %+v", th.Turn, th.Agent.Process)
	}
	if exists(e.file("late.txt")) {
		t.Error("the killed run's command finished")
	}
	noProcessesLeft(t, nil, e.work)
}
