//go:build realcli

package e2e

// End-to-end tests of bhw-run with the real pinned Codex CLI against the
// scripted fake model (codextest): the built binary runs as a subprocess,
// the way cron or a person's shell runs it.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
)

// codexE2E is an e2eEnv whose config points agents.codex at the real CLI
// with an isolated CODEX_HOME talking to a fake model.
type codexE2E struct {
	*e2eEnv
	model     *codextest.ModelServer
	codexHome string
}

func newCodexE2E(t testing.TB, steps ...codextest.Step) *codexE2E {
	t.Helper()
	e := &codexE2E{e2eEnv: newE2E(t), model: codextest.NewModelServer(t, steps...)}
	e.codexHome = e.realCLI(codexType, codexBin(t), "codex_home", "codex-home")
	codextest.WriteCodexHome(t, e.codexHome, e.model.URL)
	// The fake provider's key (codextest's config.toml names it); not in
	// the agent environment's allowlist, so the config passes it.
	e.agentConfig(codexType).Env = map[string]string{"FAKE_OPENAI_API_KEY": "dummy"}
	e.writeConfig()
	return e
}

func (e *codexE2E) file(name string) string { return filepath.Join(e.work, name) }

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func wantTypes(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("items %v\nwant  %v", got, want)
	}
}

// TestE2ECodexAutonomousCommandPatchAndResume runs over HTTP (bhtest) and
// over the same store as file:// (no BlobHub account).
func TestE2ECodexAutonomousCommandPatchAndResume(t *testing.T) {
	for _, local := range []bool{false, true} {
		name := "http"
		if local {
			name = "file"
		}
		t.Run(name, func(t *testing.T) { testCodexAutonomous(t, local) })
	}
}

func testCodexAutonomous(t *testing.T, local bool) {
	e := newCodexE2E(t,
		codextest.Run("echo made > made.txt && echo done-cmd"),
		codextest.Patch(codextest.AddFile("hello.txt", "hello")),
		codextest.Say("all done"),
	)
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	if local {
		e.useFileStore()
	}
	const alias = "projects/p1/auto"
	e.handOff(alias, codexType, "autonomous", "make two files")

	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s1.AgentSessionID == "" {
		t.Fatal("no agent_session_id in the summary")
	}
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result", "tool_call", "tool_result", "text", "turn_end")
	if s1.ItemsPosted != 6 {
		t.Errorf("items_posted %d, want 6", s1.ItemsPosted)
	}
	if b, err := os.ReadFile(e.file("hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
	if b, err := os.ReadFile(e.file("made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("made.txt = %q, %v", b, err)
	}
	results := e.itemsOfType(alias, "tool_result")
	if out, _ := meta(t, results[0]).Tool["output"].(string); !strings.Contains(out, "done-cmd") {
		t.Errorf("command result output %q", out)
	}
	e.wantCompletedIdle(alias, s1.AgentSessionID)

	// Nothing new: idle, codex not started.
	before := len(e.model.Requests())
	e.activate(alias, 0, run.OutcomeIdle)

	// A second person message: a new bhw-run process resumes the same Codex
	// thread, and the model sees the whole history.
	e.post(alias, "second message")
	e.model.Push(codextest.Say("resumed"))
	s2 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s2.AgentSessionID != s1.AgentSessionID {
		t.Errorf("agent_session_id %q after the resume, want %q", s2.AgentSessionID, s1.AgentSessionID)
	}
	reqs := e.model.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d model requests, want %d", len(reqs), before+1)
	}
	last := reqs[len(reqs)-1]
	if texts := strings.Join(last.UserTexts(), "\n"); !strings.Contains(texts, "make two files") {
		t.Errorf("the resumed request lacks the first message: %q", last.UserTexts())
	}
	if !strings.Contains(last.LastUserText(), "second message") {
		t.Errorf("the resumed request's last user text %q", last.LastUserText())
	}
	if outs := last.ToolOutputs(); len(outs) != 2 {
		t.Errorf("tool outputs in the resumed history: %v", outs)
	}
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result", "tool_call", "tool_result", "text", "turn_end",
		"person", "text", "turn_end")
}

// promptResolved is the one pending_prompt_resolved item of the thread,
// checked against the one pending_prompt.
func promptResolved(t testing.TB, e *codexE2E, alias string) itemMeta {
	t.Helper()
	types := e.itemTypes(alias)
	if n := count(types, "pending_prompt"); n != 1 {
		t.Fatalf("%d pending_prompt items, want exactly 1: %v", n, types)
	}
	res := e.itemsOfType(alias, "pending_prompt_resolved")
	if len(res) != 1 {
		t.Fatalf("%d pending_prompt_resolved items, want 1: %v", len(res), types)
	}
	m := meta(t, res[0])
	if prompt := e.itemsOfType(alias, "pending_prompt")[0]; m.PromptItemID != prompt.ID {
		t.Errorf("prompt_item_id %q, want %q", m.PromptItemID, prompt.ID)
	}
	return m
}

// parkOnEscalation hands off an approval thread whose model asks to run
// cmd outside the sandbox, runs it to the park, and checks that nothing ran
// and that a run with no answer stays parked without starting codex.
func parkOnEscalation(t *testing.T, e *codexE2E, alias, cmd, marker string) {
	t.Helper()
	e.handOff(alias, codexType, "approval", "append to the log outside the sandbox")
	e.activate(alias, 0, run.OutcomeParked)
	if exists(e.file(marker)) {
		t.Fatalf("%s exists: the parked call ran", marker)
	}
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "pending_prompt", "tool_result", "turn_end")
	e.wantParkedResult(alias)
	pm := meta(t, e.itemsOfType(alias, "pending_prompt")[0])
	call, _ := pm.Prompt["call"].(map[string]any)
	target, _ := call["target"].(map[string]any)
	if pm.Prompt["kind"] != "approval" || target["command"] != cmd || target["cwd"] != e.work {
		t.Fatalf("pending_prompt metadata %+v", pm.Prompt)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "parked" {
		t.Errorf("turn_end outcome %q, want parked", got)
	}
	th := e.threadYAML(alias)
	if th.Prompt == nil || th.Agent.Process != nil {
		t.Fatalf("thread.yaml prompt %+v process %+v", th.Prompt, th.Agent.Process)
	}

	// No answer yet: still parked, and codex is not started (the model
	// gets no request; bhw-run reads the envelope and one page).
	n := len(e.model.Requests())
	e.srv.ResetCounts()
	e.activate(alias, 0, run.OutcomeParked)
	if got := len(e.model.Requests()); got != n {
		t.Fatalf("the model got %d new requests while parked with no answer", got-n)
	}
	if total, cmds := e.srv.Requests(); total != 2 {
		t.Errorf("the idle parked run made %d BlobHub requests %v, want 2", total, cmds)
	}
}

// TestE2ECodexApprovalParkThenApprove runs confined (the default: no
// Codex sandbox, Codex asks before every command) and unconfined (Codex's
// own sandbox, the call asks to leave it).
func TestE2ECodexApprovalParkThenApprove(t *testing.T) {
	for _, confine := range []string{"on", "off"} {
		t.Run("confine-"+confine, func(t *testing.T) { testCodexApprove(t, confine) })
	}
}

func testCodexApprove(t *testing.T, confine string) {
	const cmd = "echo ran >> esc.log"
	e := newCodexE2E(t, codextest.Escalate(cmd, "needs to leave the sandbox"))
	e.agentConfig(codexType).Confine = confine
	e.writeConfig()
	const alias = "projects/p1/approve"
	parkOnEscalation(t, e, alias, cmd, "esc.log")
	confinedLog(t, e.e2eEnv, alias, confine == "on")

	// The person says yes: the resumed turn re-issues the identical call,
	// the grant allows it, and it runs once.
	e.post(alias, "yes")
	e.model.Push(codextest.Escalate(cmd, "needs to leave the sandbox"), codextest.Say("done"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if b, err := os.ReadFile(e.file("esc.log")); err != nil || string(b) != "ran\n" {
		t.Fatalf("esc.log = %q, %v: the approved command should have run exactly once", b, err)
	}
	m := promptResolved(t, e, alias)
	if m.Decision != "approved" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved decision %q resolution %q", m.Decision, m.Resolution)
	}
	reqs := e.model.Requests()
	if told := reqs[len(reqs)-2].LastUserText(); !strings.Contains(told, "A person approved your call") {
		t.Errorf("the resume message %q", told)
	}
	th := e.threadYAML(alias)
	if th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("after the approved turn: prompt %+v grants %v", th.Prompt, th.Grants)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q", st)
	}
}

func TestE2ECodexApprovalParkThenDeny(t *testing.T) {
	const cmd = "echo ran >> deny.log"
	e := newCodexE2E(t, codextest.Escalate(cmd, "wants out"))
	const alias = "projects/p1/deny"
	parkOnEscalation(t, e, alias, cmd, "deny.log")

	e.post(alias, "no")
	e.model.Push(codextest.Say("understood, not running it"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if exists(e.file("deny.log")) {
		t.Fatal("deny.log exists: the denied command ran")
	}
	m := promptResolved(t, e, alias)
	if m.Decision != "denied" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved decision %q resolution %q", m.Decision, m.Resolution)
	}
	// The model is told, in bhw-run's resume message.
	reqs := e.model.Requests()
	told := reqs[len(reqs)-1].LastUserText()
	if !strings.Contains(told, "A person denied your call to") || !strings.Contains(told, "deny.log") {
		t.Errorf("the model was told %q", told)
	}
	if th := e.threadYAML(alias); th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("after the denied turn: prompt %+v grants %v", th.Prompt, th.Grants)
	}
}

func TestE2ECodexReadOnlyFileChangeParkThenGrant(t *testing.T) {
	patch := codextest.AddFile("p.txt", "hello from the fake")
	e := newCodexE2E(t, codextest.Patch(patch))
	// Codex's read-only sandbox is there only unconfined (a confined
	// thread asks before every change in any case).
	e.agentConfig(codexType).Confine = "off"
	e.agentConfig(codexType).Own["sandbox"] = "read-only"
	e.writeConfig()
	const alias = "projects/p1/readonly"
	e.handOff(alias, codexType, "approval", "write p.txt")
	e.activate(alias, 0, run.OutcomeParked)
	if exists(e.file("p.txt")) {
		t.Fatal("p.txt exists after a park")
	}
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "pending_prompt", "tool_result", "turn_end")
	e.wantParkedResult(alias)

	e.post(alias, "approve")
	e.model.Push(codextest.Patch(patch), codextest.Say("written"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if b, err := os.ReadFile(e.file("p.txt")); err != nil || string(b) != "hello from the fake\n" {
		t.Fatalf("p.txt = %q, %v", b, err)
	}
	// The grant applied the re-issued patch without a second question.
	if m := promptResolved(t, e, alias); m.Decision != "approved" {
		t.Errorf("decision %q", m.Decision)
	}
	if e.model.Remaining() != 0 {
		t.Errorf("%d model steps left", e.model.Remaining())
	}
}

func TestE2ECodexSIGTERMMidCommandThenResume(t *testing.T) {
	// The command says it runs (the marker), then sleeps long enough that
	// only the signal can end it.
	e := newCodexE2E(t, codextest.Run("touch started.marker && sleep 60 && touch late.txt"))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	const alias = "projects/p1/sigterm"
	e.handOff(alias, codexType, "autonomous", "sleep a while")

	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	waitFor(t, 2*time.Minute, "the command to start", func() bool { return exists(e.file("started.marker")) })
	th := e.threadYAML(alias)
	if th.Agent.Process == nil || th.Agent.Process.Pgid <= 0 {
		t.Fatalf("no agent group recorded while the agent runs: %+v", th.Agent.Process)
	}
	pgid := th.Agent.Process.Pgid
	// Codex announces the command (item/started) a little after it starts
	// it: wait for the tool_call, so the signal lands with a call open.
	waitFor(t, 2*time.Minute, "the tool_call item", func() bool { return count(e.itemTypes(alias), "tool_call") == 1 })
	// The check below can see what it looks for: the agent's group and the
	// sleeping command are alive now.
	live := liveProcesses([]int{pgid}, e.work)
	if !slices.ContainsFunc(live, func(pi procInfo) bool { return pi.pgid == pgid }) ||
		!slices.ContainsFunc(live, func(pi procInfo) bool { return strings.HasPrefix(pi.cmd, "sleep 60") }) {
		t.Fatalf("before the signal the agent's group %d and the sleep should be found; found %+v", pgid, live)
	}
	t.Logf("running before the signal: %+v", live)
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	t.Logf("SIGTERM → exit %d after %v\nstdout: %s\nstderr:\n%s", code, time.Since(t0), p.stdout, tail(p.stderr.String(), 4000))
	if code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143", code)
	}
	if s := parseSummary(t, p.stdout.String()); s.Outcome != run.OutcomeInterrupted || s.ExitCode != 143 || s.ItemsPosted != 2 {
		t.Errorf("summary %+v", s)
	}
	noProcessesLeft(t, []int{pgid}, e.work)
	// The open call is closed as an error; no turn_end: the turn is not over.
	wantTypes(t, e.itemTypes(alias), "person", "tool_call", "tool_result")
	if r := meta(t, e.itemsOfType(alias, "tool_result")[0]); r.Tool["is_error"] != true {
		t.Errorf("the interrupted call's result %+v", r.Tool)
	}
	if exists(e.file("late.txt")) {
		t.Fatal("the interrupted command finished")
	}
	th = e.threadYAML(alias)
	if th.Turn.State != "interrupted" || th.Agent.Process != nil {
		t.Fatalf("thread.yaml after SIGTERM: turn %+v process %+v", th.Turn, th.Agent.Process)
	}

	// The next run resumes the interrupted turn.
	e.model.Push(codextest.Say("picked up where I left off"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	th = e.threadYAML(alias)
	if th.Turn.State != "idle" {
		t.Errorf("turn state %q after the resumed turn", th.Turn.State)
	}
	if !slices.Contains(e.statusTokens(alias), "interrupted_turn_resumed") {
		t.Errorf("no interrupted_turn_resumed status item: %v", e.itemTypes(alias))
	}
	reqs := e.model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(strings.Join(last.UserTexts(), "\n"), "sleep a while") {
		t.Errorf("the resumed turn lacks the interrupted turn's message: %q", last.UserTexts())
	}
}

func TestE2ECodexHTTP500FailsTurn(t *testing.T) {
	e := newCodexE2E(t, codextest.Fail(500))
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	const alias = "projects/p1/http500"
	e.handOff(alias, codexType, "autonomous", "hello")
	e.activate(alias, 3, run.OutcomeTurnFailed)
	types := e.itemTypes(alias)
	if count(types, "status") == 0 || count(types, "turn_end") != 1 {
		t.Fatalf("items %v: want a status and a turn_end", types)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "failed" {
		t.Errorf("turn_end outcome %q, want failed", got)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
	th := e.threadYAML(alias)
	if th.Agent.State != "active" || th.Turn.State != "idle" {
		t.Errorf("thread.yaml agent %q turn %q", th.Agent.State, th.Turn.State)
	}
}

// TestE2ECodexStreamingIsNotStalled: the stall watchdog takes a model that
// streams its answer as an agent that speaks, though none of the deltas is
// relayed one by one (they are not even decoded): ten deltas 600 ms apart,
// 6 s with no item, under a 3 s --stall-timeout, complete the turn. A
// stream that then falls silent for longer than the timeout is still
// stalled.
func TestE2ECodexStreamingIsNotStalled(t *testing.T) {
	const answer = "a slow answer, in ten pieces, each after a pause"
	tests := []struct {
		name    string
		reply   codextest.Reply
		exit    int
		outcome string
		turnEnd string
	}{
		{"streaming", codextest.Reply{Text: answer, Deltas: 10, DeltaEvery: 600 * time.Millisecond}, 0, run.OutcomeTurnCompleted, "completed"},
		{"silent mid-stream", codextest.Reply{Text: answer, Deltas: 2, DeltaEvery: 8 * time.Second}, 3, run.OutcomeTurnFailed, "stalled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newCodexE2E(t, func(codextest.Request) codextest.Reply { return tc.reply })
			e.Config.Policy.AllowAutonomous = true
			e.writeConfig()
			const alias = "projects/p1/slow"
			e.handOff(alias, codexType, "autonomous", "take your time")
			code, out, _ := e.run("--json", "--stall-timeout", "3s", alias)
			if s := parseSummary(t, out); code != tc.exit || s.Outcome != tc.outcome {
				t.Fatalf("exit %d outcome %q, want %d %q", code, s.Outcome, tc.exit, tc.outcome)
			}
			if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != tc.turnEnd {
				t.Errorf("turn_end outcome %q, want %q", got, tc.turnEnd)
			}
			texts := e.itemsOfType(alias, "text")
			if tc.turnEnd == "completed" && (len(texts) != 1 || len(texts[0].Content) != 1 || texts[0].Content[0].Text != answer) {
				t.Errorf("text items %v, want the whole answer once", texts)
			}
		})
	}
}

// TestE2ECodexThreadDeletedStopsTheTurn: the person deletes the thread
// while Codex works (here, as the model asks for a 20 s command); the
// run's first post then finds the thread gone, and the run interrupts
// Codex instead of letting it work on in the folder: it ends
// THREAD_NOT_FOUND in seconds, the command's file never made, the model
// never asked again.
func TestE2ECodexThreadDeletedStopsTheTurn(t *testing.T) {
	var e *codexE2E
	const alias = "projects/p1/deleted"
	e = newCodexE2E(t,
		func(codextest.Request) codextest.Reply {
			e.srv.Delete(alias)
			return codextest.Reply{Exec: &codextest.Exec{Cmd: "sleep 20 && touch late.txt"}}
		},
		codextest.Say("done"),
	)
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
	e.handOff(alias, codexType, "autonomous", "work for a while")
	start := time.Now()
	code, out, _ := e.run("--json", alias)
	s := parseSummary(t, out)
	if code != 66 || s.Error == nil || s.Error.Code != exit.CodeNoThread || !strings.Contains(s.Error.Message, "stopped") {
		t.Fatalf("exit %d, error %+v: want 66 THREAD_NOT_FOUND saying the agent was stopped", code, s.Error)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the run took %s: Codex was not stopped", d)
	}
	if exists(e.file("late.txt")) {
		t.Error("the command ran to its end")
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want 1", n)
	}
}

// BenchmarkE2ECodexTurnOverhead runs one turn with one command per
// iteration and reports the medians overheadRuns says of what bhw-run
// itself costs next to Codex (codex-cpu-ms/op, codex-rss-MB: codex and the
// commands it waited for), for an autonomous thread, an approval one run
// unconfined (the command runs in Codex's sandbox unasked; the run first
// checks that the sandbox works, once per executable since the check is
// cached in the state tree, and that check, a codex bhw-run starts
// itself, counts as bhw-run's) and a confined guarded one. The wall time
// is one whole activation: lock, BlobHub requests, codex start, one model
// round trip with a command, a second for the answer, items posted, codex
// stopped.
//
// new_thread hands off a new thread per iteration (a first activation, as
// in BenchmarkE2EClaudeTurnOverhead); same_thread posts to one thread per
// iteration, each turn resuming its Codex thread.
func BenchmarkE2ECodexTurnOverhead(b *testing.B) {
	for _, perm := range []string{"autonomous", "approval"} {
		b.Run(perm+"/new_thread", func(b *testing.B) { codexTurnOverhead(b, codexTurn{permissions: perm}) })
		b.Run(perm+"/same_thread", func(b *testing.B) { codexTurnOverhead(b, codexTurn{permissions: perm, sameThread: true}) })
	}
	// The same autonomous turn unconfined: what the confinement adds.
	b.Run("autonomous/new_thread_unconfined", func(b *testing.B) {
		codexTurnOverhead(b, codexTurn{permissions: "autonomous", unconfined: true})
	})
	// A confined guarded thread: Codex asks before the command and the
	// thread's rule allows it (where a confined approval thread would
	// park), the default for a gated Codex thread.
	for _, shape := range []string{"new_thread", "same_thread"} {
		b.Run("guarded_confined/"+shape, func(b *testing.B) {
			codexTurnOverhead(b, codexTurn{permissions: "guarded", sameThread: shape == "same_thread"})
		})
	}
	// The same turn with its closing message streamed as a model streams
	// tokens: 200 deltas, one notification each for bhw-run to read.
	b.Run("autonomous/new_thread_streamed", func(b *testing.B) {
		codexTurnOverhead(b, codexTurn{permissions: "autonomous", deltas: streamedDeltas})
	})
	// A turn of ten commands, as a real task has several: what each tool
	// call adds to both sides, next to what a turn costs however short.
	b.Run("autonomous/new_thread_ten_commands", func(b *testing.B) {
		codexTurnOverhead(b, codexTurn{permissions: "autonomous", commands: 10})
	})
}

// codexTurn is the turn a codexTurnOverhead iteration runs: commands
// (default 1) `echo hi` calls, then a closing message, in deltas pieces
// when over 1; on one thread throughout (sameThread) or a new one each.
type codexTurn struct {
	permissions      string
	sameThread       bool
	deltas, commands int
	unconfined       bool // confine: off (an approval turn always is)
}

// steps are the model's answers for one turn.
func (c codexTurn) steps() []codextest.Step {
	var out []codextest.Step
	for range max(c.commands, 1) {
		out = append(out, codextest.Run("echo hi"))
	}
	if c.deltas > 1 {
		return append(out, codextest.SayStreamed(streamedText, c.deltas))
	}
	return append(out, codextest.Say("ok"))
}

// streamedDeltas is how many deltas the streamed variant's closing message
// comes in: about the tokens of a short summary.
const streamedDeltas = 200

// streamedText is the streamed variant's closing message, ~1,200 bytes.
var streamedText = strings.Repeat("The command printed hi, as expected. ", 32)

func codexTurnOverhead(b *testing.B, c codexTurn) {
	e := newCodexE2E(b)
	report := e.rusageReport()
	e.Config.Policy.AllowAutonomous = true
	e.agentConfig(codexType).Executable = rusageWrapBin
	e.agentConfig(codexType).Env[rusageWrapperEnv] = codexBin(b) + "," + report
	if c.unconfined || c.permissions == "approval" {
		// An approval turn confined: Codex would ask before the command
		// and the run park.
		e.agentConfig(codexType).Confine = "off"
	}
	e.writeConfig()
	handOff := func(alias string) {
		if c.permissions == "guarded" {
			e.handOffGuarded(alias, codexType, &policy.Policy{Default: policy.DecisionAsk, Rules: []policy.Rule{
				{Effect: policy.EffectExec, Command: []string{"echo hi"}, Action: policy.DecisionAllow},
			}}, "run it")
			return
		}
		e.handOff(alias, codexType, c.permissions, "run it")
	}

	var runs overheadRuns
	if c.sameThread {
		handOff("bench/t")
		e.model.Push(c.steps()...)
		if r := e.runWrapped(b, "bench/t", report); r.code != 0 {
			b.Fatalf("first turn: exit %d\n%s", r.code, r.stderr)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		alias := fmt.Sprintf("bench/t%d", i)
		if c.sameThread {
			alias = "bench/t"
			e.post(alias, "run it again")
		} else {
			handOff(alias)
		}
		e.model.Push(c.steps()...)
		runs.timed(b, e.e2eEnv, alias, report)
		b.StartTimer()
	}
	b.StopTimer()
	runs.report(b, "codex")
}
