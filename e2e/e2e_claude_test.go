//go:build realcli

package e2e

// End-to-end tests of bhw-run with the real pinned Claude Code CLI against
// the scripted fake model (claudetest.ModelServer): the built binary runs as
// a subprocess, the way cron or a person's shell runs it, with an isolated
// CLAUDE_CONFIG_DIR (agents.claude_code.config_dir) and the model server's
// environment (agents.claude_code.env).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// claudeE2E is an e2eEnv whose config points agents.claude_code at the real
// CLI with its own config dir, talking to a scripted model.
type claudeE2E struct {
	*e2eEnv
	model     *claudetest.ModelServer
	configDir string
}

func newClaudeE2E(t testing.TB, steps ...claudetest.Step) *claudeE2E {
	t.Helper()
	e := &claudeE2E{e2eEnv: newE2E(t), model: claudetest.NewModelServer(t, steps...)}
	e.configDir = e.realCLI(claudeType, claudeBin(t), "config_dir", "claude-config")
	// The model server's variables; HOME and CLAUDE_CONFIG_DIR come from
	// bhw-run itself (its HOME, config_dir), PATH from its environment.
	e.agentConfig(claudeType).Env = map[string]string{}
	for _, kv := range e.model.Env(e.configDir) {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "HOME" && k != "CLAUDE_CONFIG_DIR" {
			e.agentConfig(claudeType).Env[k] = v
		}
	}
	e.writeConfig()
	return e
}

func (e *claudeE2E) allowAutonomous() {
	e.Config.Policy.AllowAutonomous = true
	e.writeConfig()
}

func (e *claudeE2E) path(name string) string { return filepath.Join(e.work, name) }

// wantItems fails unless the thread's item types are want, in order.
func (e *claudeE2E) wantItems(alias string, want ...string) {
	e.t.Helper()
	if got := e.itemTypes(alias); !slices.Equal(got, want) {
		e.t.Fatalf("items %v\nwant  %v", got, want)
	}
}

// lastRequest is the model's latest request.
func (e *claudeE2E) lastRequest() claudetest.Request {
	e.t.Helper()
	reqs := e.model.Requests()
	if len(reqs) == 0 {
		e.t.Fatal("the model got no request")
	}
	return reqs[len(reqs)-1]
}

func fileIs(t testing.TB, p, want string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != want {
		t.Fatalf("%s = %q, %v; want %q", p, b, err, want)
	}
}

func fileAbsent(t testing.TB, p string) {
	t.Helper()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("%s exists (or cannot be checked: %v); want absent", p, err)
	}
}

func writeTool(p, content string) claudetest.Step {
	return claudetest.Tool("Write", map[string]any{"file_path": p, "content": content})
}

func TestE2EClaudeAutonomousWriteAndResume(t *testing.T) {
	e := newClaudeE2E(t)
	x := e.path("x.txt")
	e.model.Push(writeTool(x, "hi\n"), claudetest.Text("FIRST-DONE"))
	e.allowAutonomous()
	const alias = "projects/p1/claude-auto"
	e.handOff(alias, claudeType, "autonomous", "please write x.txt")

	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, x, "hi\n")
	e.wantItems(alias, "person", "text", "tool_call", "tool_result", "text", "turn_end")
	if s1.AgentSessionID == "" || s1.ItemsPosted != 5 {
		t.Errorf("summary %+v, want an agent_session_id and 5 items posted", s1)
	}
	e.wantCompletedIdle(alias, s1.AgentSessionID)

	// A second message: a new bhw-run resumes the same session, and the
	// model sees the earlier history.
	e.post(alias, "second message")
	e.model.Push(claudetest.Text("resumed"))
	s2 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s2.AgentSessionID != s1.AgentSessionID {
		t.Errorf("agent_session_id %q after the resume, want %q", s2.AgentSessionID, s1.AgentSessionID)
	}
	last := e.lastRequest()
	if !last.Contains("please write x.txt") || !last.Contains("FIRST-DONE") || !last.Contains("toolu_fake_0001_0") {
		t.Errorf("the resumed request lacks the first turn's history")
	}
	if !strings.Contains(last.LastUserText(), "second message") {
		t.Errorf("the resumed request's last user text %q", last.LastUserText())
	}
	e.wantItems(alias, "person", "text", "tool_call", "tool_result", "text", "turn_end", "person", "text", "turn_end")
}

// handOffWrite hands off an approval thread whose model writes x.txt
// (then plays after); it returns the file's path.
func (e *claudeE2E) handOffWrite(alias string, after ...claudetest.Step) string {
	e.t.Helper()
	x := e.path("x.txt")
	e.model.Push(append([]claudetest.Step{writeTool(x, "approved content")}, after...)...)
	e.handOff(alias, claudeType, "approval", "write x.txt")
	return x
}

// parkOnWrite hands off an approval thread whose model writes x.txt and
// runs it until it parks; it returns the file's path.
func (e *claudeE2E) parkOnWrite(alias string, after ...claudetest.Step) string {
	e.t.Helper()
	x := e.handOffWrite(alias, after...)
	e.activate(alias, 0, run.OutcomeParked)
	fileAbsent(e.t, x)
	e.wantItems(alias, "person", "text", "tool_call", "pending_prompt", "tool_result", "turn_end")
	e.wantParkedResult(alias)
	pp := meta(e.t, e.itemsOfType(alias, "pending_prompt")[0])
	if pp.Prompt["kind"] != "approval" {
		e.t.Fatalf("pending_prompt %+v, want kind approval", pp.Prompt)
	}
	if th := e.threadYAML(alias); th.Prompt == nil || th.Prompt.Call.Tool != "Write" || th.Agent.Process != nil {
		e.t.Fatalf("thread.yaml prompt %+v process %+v", th.Prompt, th.Agent.Process)
	}
	return x
}

func (e *claudeE2E) resolved(alias string) itemMeta {
	e.t.Helper()
	m := meta(e.t, e.onlyOfType(alias, "pending_prompt_resolved"))
	p := e.itemsOfType(alias, "pending_prompt")[0]
	if m.PromptItemID != p.ID {
		e.t.Errorf("prompt_item_id %q, want %q", m.PromptItemID, p.ID)
	}
	// The two name one prompt as blobhub-worker names it (docs/wire.md).
	id, _ := meta(e.t, p).Prompt["prompt_id"].(string)
	if !strings.HasPrefix(id, "prm_") || m.Prompt["prompt_id"] != id || m.Prompt["prompt_state"] != wantPromptState(m.Resolution) {
		e.t.Errorf("pending_prompt prompt_id %q, its resolution's prompt %v", id, m.Prompt)
	}
	return m
}

// wantPromptState is the prompt_state a pending_prompt_resolved of
// resolution carries.
func wantPromptState(resolution string) string {
	if resolution == "failed" {
		return "cancelled"
	}
	return resolution
}

func TestE2EClaudeApprovalParkThenApprove(t *testing.T) {
	e := newClaudeE2E(t)
	const alias = "projects/p1/claude-approve"
	x := e.parkOnWrite(alias, writeTool(e.path("x.txt"), "approved content"), claudetest.Text("written"))
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("%d model requests after the park, want 1", n)
	}

	// No answer: still parked, the CLI not started.
	e.activate(alias, 0, run.OutcomeParked)
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("a parked run without an answer made %d model requests, want 1", n)
	}

	e.post(alias, "yes")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, x, "approved content")
	if n := len(e.model.Requests()); n != 3 {
		t.Errorf("%d model requests, want 3 (park, re-issue, final text)", n)
	}
	if !e.model.Requests()[1].Contains("A person approved your call to Write " + x) {
		t.Error("the resume message did not reach the model")
	}
	if n := len(e.itemsOfType(alias, "pending_prompt")); n != 1 {
		t.Errorf("%d pending_prompt items, want exactly 1 (the grant allows the re-issued Write)", n)
	}
	if m := e.resolved(alias); m.Decision != "approved" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved decision %q resolution %q", m.Decision, m.Resolution)
	}
	if th := e.threadYAML(alias); th.Prompt != nil || len(th.Grants) != 0 {
		t.Errorf("thread.yaml after the approved turn: prompt %+v grants %v", th.Prompt, th.Grants)
	}
}

func TestE2EClaudeApprovalDenyReachesModel(t *testing.T) {
	e := newClaudeE2E(t)
	const alias = "projects/p1/claude-deny"
	x := e.parkOnWrite(alias, claudetest.Text("understood, using the other file"))
	e.post(alias, "no, use the other file")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileAbsent(t, x)
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	last := reqs[1].LastUserText()
	if !strings.Contains(last, "A person denied your call to Write") || !strings.Contains(last, "no, use the other file") {
		t.Errorf("the model's resumed message %q lacks the deny and its reason", last)
	}
	if m := e.resolved(alias); m.Decision != "denied" || m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved decision %q resolution %q", m.Decision, m.Resolution)
	}
}

// Claude Code runs a read-only call inside the work folder without asking,
// so under approval it never reaches the gate (docs/gate.md, postures).
func TestE2EClaudeApprovalReadInWorkFolderUnasked(t *testing.T) {
	e := newClaudeE2E(t)
	r := e.path("notes.txt")
	if err := os.WriteFile(r, []byte("READ-ME-MARKER\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.model.Push(claudetest.Tool("Read", map[string]any{"file_path": r}), claudetest.Text("read it"))
	const alias = "projects/p1/claude-read"
	e.handOff(alias, claudeType, "approval", "read notes.txt")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	e.wantItems(alias, "person", "text", "tool_call", "tool_result", "text", "turn_end")
	out, _ := meta(t, e.itemsOfType(alias, "tool_result")[0]).Tool["output"].(string)
	if !strings.Contains(out, "READ-ME-MARKER") {
		t.Errorf("Read's tool_result output %q", out)
	}
}

// An allow rule in the work folder's .claude/settings.local.json must not
// approve a Write under approval: with the stock launch it would, so bhw-run
// passes --setting-sources= and no settings file is read (docs/agents.md).
func TestE2EClaudeSettingsLocalAllowDoesNotApprove(t *testing.T) {
	e := newClaudeE2E(t)
	if err := os.MkdirAll(e.path(".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	rules := `{"permissions":{"allow":["Write","Write(*)","Edit","Bash"],"defaultMode":"bypassPermissions"}}`
	if err := os.WriteFile(e.path(".claude/settings.local.json"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	e.parkOnWrite("projects/p1/claude-settings")
}

func TestE2EClaudeAskUserQuestion(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Tool("AskUserQuestion", map[string]any{"questions": []any{map[string]any{
		"question": "Which target?", "header": "Target", "multiSelect": false,
		"options": []any{map[string]any{"label": "staging", "description": "s"}, map[string]any{"label": "production", "description": "p"}},
	}}}), claudetest.Text("deploying to the chosen target"))
	const alias = "projects/p1/claude-ask"
	e.handOff(alias, claudeType, "approval", "ask me where to deploy")
	e.activate(alias, 0, run.OutcomeParked)
	if p := meta(t, e.onlyOfType(alias, "pending_prompt")).Prompt; p["kind"] != "ask_user_question" {
		t.Fatalf("pending_prompt %+v, want kind ask_user_question", p)
	}
	e.post(alias, "2")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	last := e.lastRequest().LastUserText()
	if !strings.Contains(last, "Which target?") || !strings.Contains(last, "production") || strings.Contains(last, "staging") {
		t.Errorf("the model's resumed message %q, want the second option's label", last)
	}
	if m := e.resolved(alias); m.Resolution != "answered" {
		t.Errorf("pending_prompt_resolved resolution %q", m.Resolution)
	}
}

func TestE2EClaudeSIGTERMDuringBashThenResume(t *testing.T) {
	e := newClaudeE2E(t)
	marker := e.path("started.marker")
	e.model.Push(claudetest.Tool("Bash", map[string]any{
		"command": "touch " + marker + " && sleep 300", "description": "wait a long time"}))
	e.allowAutonomous()
	const alias = "projects/p1/claude-sigterm"
	e.handOff(alias, claudeType, "autonomous", "run the long command")

	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	waitFor(t, 2*time.Minute, "the Bash command's marker", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	th := e.threadYAML(alias)
	if th.Agent.Process == nil || th.Agent.Process.Pgid <= 0 {
		t.Fatalf("thread.yaml names no agent group while the agent runs: %+v", th.Agent)
	}
	pgid := th.Agent.Process.Pgid
	sleeps := pidsWithCmd(t, "sleep 300", e.work)
	if len(sleeps) == 0 {
		t.Fatal("no `sleep 300` process while the marker exists")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	t.Logf("stdout: %s\nstderr:\n%s", p.stdout, tail(p.stderr.String(), 4000))
	if code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143", code)
	}
	if s := parseSummary(t, p.stdout.String()); s.Outcome != run.OutcomeInterrupted {
		t.Errorf("outcome %q, want interrupted", s.Outcome)
	}
	noProcessesLeft(t, []int{pgid}, e.work)
	for _, pid := range sleeps {
		if pi, ok := readProc(pid); ok && pi.state != 'Z' && strings.Contains(pi.cmd, "sleep 300") {
			t.Errorf("the Bash command's sleep (pid %d) outlived bhw-run", pid)
		}
	}
	th = e.threadYAML(alias)
	if th.Turn.State != "interrupted" || th.Agent.Process != nil {
		t.Errorf("thread.yaml after SIGTERM: turn %+v process %+v", th.Turn, th.Agent.Process)
	}

	s := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s.AgentSessionID != th.Agent.AgentSessionID {
		t.Errorf("agent_session_id %q after the resume, want %q", s.AgentSessionID, th.Agent.AgentSessionID)
	}
	if !slices.Contains(e.statusTokens(alias), "interrupted_turn_resumed") {
		t.Errorf("no interrupted_turn_resumed status item: %v", e.itemTypes(alias))
	}
	if !e.lastRequest().Contains("run the long command") {
		t.Error("the resumed request lacks the interrupted turn's history")
	}
}

// pidsWithCmd are the live processes whose command line contains s and
// whose working directory is dir (other tests may run the same command).
func pidsWithCmd(t testing.TB, s, dir string) []int {
	t.Helper()
	var out []int
	for _, pid := range procPIDs(t) {
		if pi, ok := readProc(pid); ok && pi.state != 'Z' && strings.Contains(pi.cmd, s) && pi.cwd == dir {
			out = append(out, pid)
		}
	}
	return out
}

// TestE2EClaudeAPIErrorTurnFailed: a model that answers every request
// 500 ends the turn failed once the turn has been resumed turn_retries (3)
// times (the default), each announced by a retrying status item.
func TestE2EClaudeAPIErrorTurnFailed(t *testing.T) {
	e := newClaudeE2E(t)
	e.model.Then(func(claudetest.Request) claudetest.Reply { return claudetest.Reply{Status: 500} })
	if e.agentConfig(claudeType).Env["CLAUDE_CODE_MAX_RETRIES"] != "0" {
		t.Fatal("the model env must turn the CLI's retries off")
	}
	const alias = "projects/p1/claude-500"
	e.handOff(alias, claudeType, "approval", "hello")
	e.activate(alias, 3, run.OutcomeTurnFailed)
	types := e.itemTypes(alias)
	if types[len(types)-1] != "turn_end" || count(types, "status") != 4 || count(types, "turn_end") != 1 {
		t.Errorf("items %v, want three retrying statuses, a turn_failed status and one final turn_end", types)
	}
	if n := len(e.model.Requests()); n != 4 {
		t.Errorf("%d model requests, want 4 (the turn and 3 resumes)", n)
	}
	if got := meta(t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "failed" {
		t.Errorf("turn_end outcome %q, want failed", got)
	}
	if st := e.wireState(alias); st != "active" {
		t.Errorf("wire state %q, want active", st)
	}
}

func TestE2EClaudeStopWhileParked(t *testing.T) {
	e := newClaudeE2E(t)
	const alias = "projects/p1/claude-stop"
	e.parkOnWrite(alias)
	e.asPerson("thread", "stop", alias)
	e.activate(alias, 0, run.OutcomeStopped)
	if m := e.resolved(alias); m.Resolution != "cancelled" {
		t.Errorf("pending_prompt_resolved resolution %q, want cancelled", m.Resolution)
	}
	if th := e.threadYAML(alias); th.Agent.State != "completed" || th.Prompt != nil {
		t.Errorf("thread.yaml agent.state %q prompt %+v; want completed, no prompt", th.Agent.State, th.Prompt)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1 (the stop starts no agent)", n)
	}
}

// BenchmarkE2EClaudeTurnOverhead runs, per iteration, one autonomous
// one-tool turn (Write, then a final text) through the built bhw-run and
// the real CLI, and reports the medians overheadRuns says, the CLI's as
// claude-cpu-ms/op and claude-rss-MB.
//
// new_thread hands off a new thread per iteration (outside the timer), so
// each turn is a first activation: the thread's folder and files are made,
// pending becomes active, a new session starts. same_thread has a person
// post to one thread per iteration, as the weeks of a long-lived thread
// go: each turn resumes the session (its first turn, untimed, is the
// hand-off's).
func BenchmarkE2EClaudeTurnOverhead(b *testing.B) {
	b.Run("new_thread", func(b *testing.B) { claudeTurnOverhead(b, false) })
	b.Run("same_thread", func(b *testing.B) { claudeTurnOverhead(b, true) })
}

func claudeTurnOverhead(b *testing.B, sameThread bool) {
	e := newClaudeE2E(b)
	report := e.rusageReport()
	e.agentConfig(claudeType).Executable = rusageWrapBin
	e.agentConfig(claudeType).Env[rusageWrapperEnv] = claudeBin(b) + "," + report
	e.allowAutonomous()
	var runs overheadRuns
	if sameThread {
		e.model.Push(writeTool(e.path("first.txt"), "x"), claudetest.Text("done"))
		e.handOff("bench/claude", claudeType, "autonomous", "write a file")
		if r := e.runWrapped(b, "bench/claude", report); r.code != 0 {
			b.Fatalf("first turn: exit %d\n%s", r.code, tail(r.stderr, 4000))
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		alias := fmt.Sprintf("bench/claude-%d", i)
		e.model.Push(writeTool(e.path(fmt.Sprintf("b%d.txt", i)), "x"), claudetest.Text("done"))
		if sameThread {
			alias = "bench/claude"
			e.post(alias, "write another file")
		} else {
			e.handOff(alias, claudeType, "autonomous", "write a file")
		}
		runs.timed(b, e.e2eEnv, alias, report)
		b.StartTimer()
	}
	b.StopTimer()
	runs.report(b, "claude")
}

// BenchmarkRelayItems relays one turn of 10,000 steps (text and tool steps
// alternating: 15,000 items) from the fake claude agent (this test binary)
// through the built bhw-run to the loopback bhtest BlobHub, and reports
// items posted per second of the activation's wall time: with stderr a
// pipe (a scheduler's), a terminal (a pty: the status line redrawn while
// the turn runs), and a terminal with -v (every item printed as well).
//
// The fake BlobHub's store fsyncs every item it appends (the durability a
// real BlobHub provides on its side); on a disk that alone caps the rate at
// a few hundred items/s whatever bhw-run does, so the store lives on tmpfs
// (/dev/shm) when there is one. The rate includes the end-of-turn scan:
// bhw-run pages through the thread for person items (~150 pages of 100;
// the store finds each page's start by binary search). cpu-µs/item
// (bhw-run and the fake agent, its reaped child) is the relay's own cost.
func BenchmarkRelayItems(b *testing.B) {
	e := newE2E(b)
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "bhw-relay-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		e.srv = bhtest.New(b, bhtest.WithDir(dir))
	} else {
		b.Log("no /dev/shm: the store is on disk, and its per-item fsync bounds the rate")
	}
	var steps []claudetest.FakeStep
	for i := range 10000 {
		if i%2 == 0 {
			steps = append(steps, claudetest.FakeStep{Text: fmt.Sprintf("step %d: thinking out loud about the next change", i)})
		} else {
			steps = append(steps, claudetest.FakeStep{Tool: &claudetest.FakeTool{Name: "Read",
				Input: map[string]any{"file_path": "/src/file.go"}, Result: fmt.Sprintf("line 1\nline 2 of call %d", i)}})
		}
	}
	e.Config.Policy.AllowAutonomous = true
	e.fakeClaude(steps)
	seq := 0 // aliases stay unique across the rounds of b.N
	for _, bc := range []struct {
		name string
		tty  bool
		args []string
	}{
		{"stderr=pipe", false, []string{"-q"}},
		{"stderr=terminal", true, nil},
		{"stderr=terminal-v", true, []string{"-v"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.StopTimer()
			var items int
			var wall, cpu time.Duration
			var shown int64
			for i := 0; i < b.N; i++ {
				seq++
				alias := fmt.Sprintf("bench/relay-%d", seq)
				e.handOff(alias, claudeType, "autonomous", "go")
				cmd := exec.Command(bhwBin, append(bc.args, "--json", "--log-format", "text", alias)...)
				cmd.Env = e.environ(bhtest.RunnerKey)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				var drained chan int64
				if bc.tty {
					master, slave, err := openPTY()
					if err != nil {
						b.Fatal(err)
					}
					cmd.Stderr = slave
					drained = make(chan int64, 1)
					go func() {
						n, _ := io.Copy(io.Discard, master)
						drained <- n
					}()
					defer master.Close()
					defer slave.Close()
				}
				b.StartTimer()
				start := time.Now()
				err := cmd.Run()
				wall += time.Since(start)
				b.StopTimer()
				// bhw-run's CPU with the fake agent's (a reaped child) folded in.
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				s := parseSummary(b, stdout.String())
				if err != nil || s.Outcome != run.OutcomeTurnCompleted || s.ItemsPosted < 15000 {
					b.Fatalf("%v: outcome %q items %d\n%s", err, s.Outcome, s.ItemsPosted, tail(stderr.String(), 4000))
				}
				items += s.ItemsPosted
				if bc.tty {
					cmd.Stderr.(*os.File).Close()
					shown += <-drained
				}
			}
			b.ReportMetric(float64(items)/wall.Seconds(), "items/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(items), "cpu-µs/item")
			if bc.tty {
				b.ReportMetric(float64(shown)/float64(b.N), "tty-bytes/run")
			}
		})
	}
}

// TestE2EClaudeLostSessionStartsFresh: the session's transcript is gone
// from the config dir (a wiped ~/.claude, another machine's record), so
// `claude --resume` answers "No conversation found". bhw-run then starts a
// new session with the same message and a note, and says so in a status
// item — not an error turn.
func TestE2EClaudeLostSessionStartsFresh(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Text("LOST-HISTORY-MARKER"))
	e.allowAutonomous()
	const alias = "projects/p1/claude-lost"
	e.handOff(alias, claudeType, "autonomous", "first message")
	s1 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if err := os.RemoveAll(filepath.Join(e.configDir, "projects")); err != nil {
		t.Fatal(err)
	}
	before := len(e.model.Requests())

	e.post(alias, "second message")
	e.model.Push(claudetest.Text("FRESH"))
	s2 := e.activate(alias, 0, run.OutcomeTurnCompleted)
	if s2.AgentSessionID == "" || s2.AgentSessionID == s1.AgentSessionID {
		t.Fatalf("agent_session_id %q after a lost session, want a new one (was %q)", s2.AgentSessionID, s1.AgentSessionID)
	}
	reqs := e.model.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("the model got %d requests, want 1", len(reqs)-before)
	}
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.LastUserText(), "second message") || !strings.Contains(last.LastUserText(), "could not be resumed") {
		t.Fatalf("the fresh session's message %q lacks the person's text or the note", last.LastUserText())
	}
	if last.Contains("LOST-HISTORY-MARKER") {
		t.Fatal("the fresh session carries the lost history")
	}
	if tokens := e.statusTokens(alias); !slices.Contains(tokens, "resume_failed") {
		t.Fatalf("status tokens %v, want resume_failed", tokens)
	}
	e.wantItems(alias, "person", "text", "turn_end", "person", "status", "text", "turn_end")
}

// TestE2EClaudeOutboxArtifacts: the real agent writes a report into the
// thread's outbox; after the completed turn it comes back as an artifact
// (object, artifacts_published item), the work folder's git status stays
// clean, and a second run publishes nothing new.
func TestE2EClaudeOutboxArtifacts(t *testing.T) {
	e := newClaudeE2E(t)
	e.allowAutonomous()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", e.work, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	writeFile(t, filepath.Join(e.work, "README"), "repo\n")
	git("add", "README")
	git("commit", "-qm", "init")

	const alias = "projects/p1/claude-outbox"
	var v map[string]any
	if err := json.Unmarshal(envelope.NewThread(e.work, claudeType, setup.PermAutonomous, alias), &v); err != nil {
		t.Fatal(err)
	}
	v["thread"].(map[string]any)["metadata"].(map[string]any)["artifacts"] = map[string]any{"source": ".bhw/outbox"}
	b, _ := json.Marshal(v)
	e.srv.Put(alias, string(b))
	e.post(alias, "write the report")
	report := filepath.Join(e.work, ".bhw", "outbox", "report.md")
	e.model.Push(writeTool(report, "# Report\nall good\n"), claudetest.Text("done"))

	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, report, "# Report\nall good\n")
	e.onlyOfType(alias, "artifacts_published")
	obj, ok := e.srv.Get(alias + "/artifacts/report.md")
	if !ok || !strings.Contains(string(obj.Value), `"type":"artifact"`) || !strings.Contains(string(obj.Value), "all good") {
		t.Fatalf("artifact object %v %s", ok, obj.Value)
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("git status is not clean:\n%s", st)
	}

	e.post(alias, "anything else?")
	e.model.Push(claudetest.Text("nothing"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	if n := len(e.itemsOfType(alias, "artifacts_published")); n != 1 {
		t.Fatalf("%d artifacts_published after an unchanged run, want 1", n)
	}
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A CLAUDE.md that is a link to a file outside the work folder — any file
// the user can read — never reaches the model: bhw-run skips it with a
// status item. A link that stays inside (CLAUDE.md → docs/RULES.md, as
// repositories sharing AGENTS.md do) is passed on.
func TestE2EClaudeMDLinkOutsideNotSent(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Text("ok"))
	const marker = "OUTSIDE-FILE-TEXT-6620"
	outside := filepath.Join(e.root, "private", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(outside), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, e.path("CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	const alias = "projects/p1/claude-md-outside"
	e.handOff(alias, claudeType, "approval", "hi")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	for i, r := range e.model.Requests() {
		if strings.Contains(string(r.Body), marker) {
			t.Fatalf("request %d to the model holds the outside file's text", i)
		}
	}
	skipped := 0
	for _, it := range e.itemsOfType(alias, "status") {
		if m := meta(t, it); m.Status == "instructions_skipped" && m.All["path"] == "CLAUDE.md" {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("%d instructions_skipped status items, want 1: %v", skipped, e.itemTypes(alias))
	}

	// A link inside the work folder is read through and passed on (to a new
	// session: a resumed one keeps the system prompt it started with).
	const rule = "PROJECT-RULE-5518: answer in French"
	if err := os.MkdirAll(e.path("docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.path("docs/RULES.md"), []byte(rule+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.path("CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("docs/RULES.md", e.path("CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	const inside = "projects/p1/claude-md-inside"
	e.handOff(inside, claudeType, "approval", "hi")
	e.model.Push(claudetest.Text("d'accord"))
	e.activate(inside, 0, run.OutcomeTurnCompleted)
	if !strings.Contains(string(e.lastRequest().System), rule) {
		t.Fatalf("the inside link's text is not in the system prompt: %s", e.lastRequest().System)
	}
	if n := len(e.itemsOfType(inside, "status")); n != 0 {
		t.Fatalf("%d status items for a CLAUDE.md inside the work folder", n)
	}
}
