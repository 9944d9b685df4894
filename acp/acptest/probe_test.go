//go:build realcli

package acptest

// Probe tests: they run the real pinned agents against the fakes and check
// the facts the ACP adapter depends on (docs/agents-acp.md). A version bump
// that changes one of them fails here first. With -record they also write
// the JSON-RPC transcripts under testdata/acp/<agent>/ for decoder tests.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds for one step of a probe; generous, as two cores are shared (at
// a load of 10–16, Qwen Code's and OpenCode's steps outlasted 90 s).
const (
	stepWait = 5 * time.Minute
	exitWait = 2 * time.Minute
	// slotWait bounds the wait for an agent slot: the whole queue of
	// probes in front, each a few minutes at worst.
	slotWait = 30 * time.Minute
)

// probeSlots: four agents at once. The probes run side by side (most of
// their time is spent waiting on the agents, and on Gemini CLI's minute
// rule, which a probe waits out with no agent running), but twenty-one
// agents started together on two cores made their start-ups outlast
// stepWait.
var probeSlots = NewSlots(4)

func forEachAgent(t *testing.T, f func(t *testing.T, r *recipe)) {
	var named []namedTest
	for _, r := range recipes {
		named = append(named, namedTest{r.Type, func(t *testing.T) { f(t, r) }})
	}
	concurrently(t, named...)
}

type namedTest struct {
	name string
	f    func(t *testing.T)
}

// concurrently runs each test as a subtest of t, all at once; their agent
// processes take turns for probeSlots. Subtests started from goroutines do
// not wait for a -parallel slot (2 on a 2-core machine), which would queue
// everything behind Gemini's wait for the minute to turn.
func concurrently(t *testing.T, tests ...namedTest) {
	var wg sync.WaitGroup
	for _, nt := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(nt.name, nt.f)
		}()
	}
	wg.Wait()
}

// TestProbe runs every scenario on every agent, as many at once as
// probeSlots admits.
func TestProbe(t *testing.T) {
	forEachAgent(t, func(t *testing.T, r *recipe) {
		tests := []namedTest{
			{"park_resume", func(t *testing.T) { probeParkResume(t, r) }},
			{"errors", func(t *testing.T) { probeErrors(t, r) }},
			{"model_down", func(t *testing.T) { probeModelDown(t, r) }},
			{"stop", func(t *testing.T) { probeStop(t, r) }},
			{"workspace_config", func(t *testing.T) { probeWorkspaceConfig(t, r) }},
		}
		if r == gemini {
			tests = append(tests, namedTest{"launcher", probeGeminiLauncher})
		}
		concurrently(t, tests...)
	})
}

// parked is what the first process leaves for the resume.
type parked struct {
	sessionID string
	created   time.Time
	perm      permission
	tool      string
	args      map[string]any
	file      string // the file the call makes, absent until it runs
}

func probeParkResume(t *testing.T, r *recipe) {
	g := newRig(t, r)
	write := &parked{tool: r.WriteTool, file: filepath.Join(g.h.work, "w.txt")}
	write.args = r.WriteArgs(write.file, "parked write\n")
	shell := &parked{tool: r.ShellTool, file: filepath.Join(g.h.work, "s.txt")}
	shell.args = r.ShellArgs("echo ran > s.txt")

	// Process 1: two sessions, each parked at its call.
	p1 := g.start()
	ini := p1.initialize(t)
	checkInitialize(t, r, ini)
	for _, c := range []*parked{write, shell} {
		c.created = time.Now().UTC()
		c.sessionID = p1.newSession(t, g.h.work)
		before := len(g.model().ModelRequests())
		pc := p1.prompt(c.sessionID, Marker(c.tool, c.args))
		perm, ahead := p1.next(isPermission, stepWait)
		c.perm = parsePermission(t, perm)
		checkPermission(t, r, c, ahead)
		if exists(c.file) {
			t.Fatalf("%s ran before it was answered", c.tool)
		}
		asked := len(g.model().ModelRequests())
		r.park(p1, c.sessionID, perm)
		res, _ := p1.collectUntil(pc, stepWait)
		if stop := stopReason(t, res); stop != "cancelled" {
			t.Fatalf("parked prompt ended %q, want \"cancelled\" (%s)", stop, res)
		}
		if n := len(g.model().ModelRequests()); n != asked {
			t.Errorf("%d model requests after the park (the turn went on)", n-asked)
		}
		if asked-before != 1 {
			t.Errorf("%d model requests for one call", asked-before)
		}
	}
	p1.closeStdin()
	if code, d := p1.waitExit(exitWait); code != 0 {
		t.Errorf("exit %d after stdin closed (%s)", code, d)
	} else {
		t.Logf("fact: parked process exits 0 %s after stdin closes", d.Round(time.Millisecond))
	}
	checkNoneLeft(t, p1)
	for _, c := range []*parked{write, shell} {
		if exists(c.file) {
			t.Errorf("the parked %s ran", c.tool)
		}
	}
	p1.save(r.Type, "park")

	if r.loadMinute {
		waitMinuteTurn(t, write.created, shell.created)
	}

	// Process 2: load each session, the model re-issues its call, the
	// grant is matched and allowed once.
	p2 := g.start()
	p2.initialize(t)
	for _, c := range []*parked{write, shell} {
		replay := loadSession(t, p2, c.sessionID, g.h.work)
		logReplay(t, c.tool, replay)
		mark := len(g.model().Requests())
		argsJSON, _ := json.Marshal(c.args)
		pc := p2.prompt(c.sessionID, "A person approved your call "+c.tool+" "+string(argsJSON)+". Run it again now, unchanged.")
		perm, _ := p2.next(isPermission, stepWait)
		again := parsePermission(t, perm)
		checkFingerprint(t, r, c.perm, again)
		checkResumedRequest(t, g, mark, c)
		p2.choose(perm, again.option(t, "allow_once"))
		res, _ := p2.collectUntil(pc, stepWait)
		if stop := stopReason(t, res); stop != "end_turn" {
			t.Fatalf("resumed prompt ended %q (%s)", stop, res)
		}
		if !exists(c.file) {
			t.Fatalf("the re-issued %s did not run after allow_once", c.tool)
		}
	}
	// The grant was for one call: the same call again asks again.
	pc := p2.prompt(shell.sessionID, Marker(shell.tool, shell.args))
	perm, _ := p2.next(isPermission, stepWait)
	p2.choose(perm, parsePermission(t, perm).option(t, "reject_once"))
	if res, _ := p2.collectUntil(pc, stepWait); stopReason(t, res) != "end_turn" {
		t.Errorf("rejected prompt: %s", res)
	}
	p2.closeStdin()
	if code, _ := p2.waitExit(exitWait); code != 0 {
		t.Errorf("exit %d", code)
	}
	checkNoneLeft(t, p2)
	for _, a := range []*agentProc{p1, p2} {
		a.checkStdout(t)
	}
	p2.save(r.Type, "resume")
}

func checkInitialize(t testing.TB, r *recipe, ini map[string]any) {
	t.Helper()
	info, _ := ini["agentInfo"].(map[string]any)
	if v, _ := info["version"].(string); v != r.Version {
		t.Errorf("agentInfo.version %q, want the pinned %s", v, r.Version)
	}
	caps, _ := ini["agentCapabilities"].(map[string]any)
	if caps["loadSession"] != true {
		t.Errorf("loadSession %v: resume needs session/load", caps["loadSession"])
	}
	if pv, _ := ini["protocolVersion"].(float64); pv != 1 {
		t.Errorf("protocolVersion %v", ini["protocolVersion"])
	}
}

// checkPermission checks the request's shape and logs which notifications
// about the same call came before it.
func checkPermission(t testing.TB, r *recipe, c *parked, ahead []*rpcMsg) {
	t.Helper()
	p := c.perm
	want := "edit"
	if c.tool == r.ShellTool {
		want = "execute"
	}
	if p.ToolCall.Kind != want {
		t.Errorf("%s: permission kind %q, want %q", c.tool, p.ToolCall.Kind, want)
	}
	if p.SessionID != c.sessionID {
		t.Errorf("permission for session %q, want %q", p.SessionID, c.sessionID)
	}
	kinds := map[string]bool{}
	for _, o := range p.Options {
		kinds[o.Kind] = true
	}
	for _, k := range []string{"allow_once", "reject_once"} {
		if !kinds[k] {
			t.Errorf("%s: no %s option in %+v", c.tool, k, p.Options)
		}
	}
	if want == "edit" && !bytes.Contains(p.ToolCall.Locations, []byte(c.file)) {
		t.Errorf("edit locations %s do not name %s", p.ToolCall.Locations, c.file)
	}
	var seen []string
	for _, m := range ahead {
		if kind, u := m.update(); kind == "tool_call" || kind == "tool_call_update" {
			if u["toolCallId"] == p.ToolCall.ToolCallID {
				st, _ := u["status"].(string)
				seen = append(seen, kind+"("+st+")")
			}
		}
	}
	t.Logf("fact: %s permission (title %q, rawInput %s, options %+v) preceded by %v", c.tool, p.ToolCall.Title, p.ToolCall.RawInput, p.Options, seen)
}

func stopReason(t testing.TB, m *rpcMsg) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("prompt failed: %v", m.Error)
	}
	var res struct {
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(m.Result, &res)
	return res.StopReason
}

// waitMinuteTurn waits until the UTC minute differs from every creation
// time: Gemini CLI names its session file by the minute, and a load in the
// creation's minute overwrites the stored history.
func waitMinuteTurn(t testing.TB, created ...time.Time) {
	t.Helper()
	for _, c := range created {
		next := c.Truncate(time.Minute).Add(time.Minute)
		if d := time.Until(next); d > 0 {
			t.Logf("waiting %s for the UTC minute to turn", d.Round(time.Millisecond))
			// A clock boundary, not an event another party signals.
			time.Sleep(d)
		}
	}
}

// loadSession loads sid and returns the replayed updates: those before the
// response and those after it up to available_commands_update, which every
// agent sends once the replay is done.
func loadSession(t testing.TB, a *agentProc, sid, cwd string) []*rpcMsg {
	t.Helper()
	lc := a.send("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}})
	res, replay := a.collectUntil(lc, stepWait)
	if res.Error != nil {
		t.Fatalf("session/load %s: %v", sid, res.Error)
	}
	// A stand-in message marks where the response came, for the log.
	replay = append(replay, &rpcMsg{Method: "<response>"})
	if !hasUpdate(replay, "available_commands_update") {
		m, more := a.next(func(m *rpcMsg) bool { k, _ := m.update(); return k == "available_commands_update" }, stepWait)
		replay = append(append(replay, more...), m)
	}
	return replay
}

func hasUpdate(ms []*rpcMsg, kind string) bool {
	for _, m := range ms {
		if k, _ := m.update(); k == kind {
			return true
		}
	}
	return false
}

func logReplay(t testing.TB, tool string, replay []*rpcMsg) {
	var kinds []string
	for _, m := range replay {
		k, u := m.update()
		switch {
		case k == "":
			kinds = append(kinds, m.Method)
		case k == "tool_call" || k == "tool_call_update":
			st, _ := u["status"].(string)
			kinds = append(kinds, k+"("+st+")")
		default:
			kinds = append(kinds, k)
		}
	}
	t.Logf("fact: load of the %s session replays %v", tool, kinds)
}

// checkFingerprint compares the re-issued call's permission request with
// the parked one's: the fields a one-shot grant is keyed on must be equal.
func checkFingerprint(t testing.TB, r *recipe, was, now permission) {
	t.Helper()
	fields := map[string][2]string{
		"kind":       {was.ToolCall.Kind, now.ToolCall.Kind},
		"title":      {was.ToolCall.Title, now.ToolCall.Title},
		"locations":  {string(was.ToolCall.Locations), string(now.ToolCall.Locations)},
		"content":    {string(was.ToolCall.Content), string(now.ToolCall.Content)},
		"rawInput":   {string(was.ToolCall.RawInput), string(now.ToolCall.RawInput)},
		"toolCallId": {was.ToolCall.ToolCallID, now.ToolCall.ToolCallID},
	}
	var equal, differ []string
	for _, k := range []string{"kind", "title", "locations", "content", "rawInput", "toolCallId"} {
		if fields[k][0] == fields[k][1] {
			equal = append(equal, k)
		} else {
			differ = append(differ, k)
		}
	}
	t.Logf("fact: re-issued %s request: equal %v, differ %v", was.ToolCall.Kind, equal, differ)
	for _, k := range fingerprintFields {
		if f := fields[k]; f[0] != f[1] {
			t.Errorf("grant fingerprint field %s changed on resume: %s → %s", k, f[0], f[1])
		}
	}
}

// fingerprintFields are what a one-shot grant is keyed on, for every agent.
var fingerprintFields = []string{"kind", "title", "locations", "content", "rawInput"}

// checkResumedRequest checks the first model request after the approval:
// it carries the model's own earlier call, with the same arguments, and
// the configured model.
func checkResumedRequest(t testing.TB, g *rig, mark int, c *parked) {
	t.Helper()
	reqs := g.model().Requests()[mark:]
	for _, q := range reqs {
		if !q.IsModelTurn() || !strings.Contains(q.LastUserText(), "approved") {
			continue
		}
		if q.Rule != RuleReissue {
			t.Errorf("resumed request answered by %q: the model's call was not in the history", q.Rule)
		}
		var got map[string]any
		if q.Answer == nil || json.Unmarshal(q.Answer.Args, &got) != nil {
			t.Fatalf("resumed request answered %+v", q.Answer)
		}
		if q.Answer.Name != c.tool || !sameJSON(got, c.args) {
			t.Errorf("re-issued %s %v, want %s %v", q.Answer.Name, got, c.tool, c.args)
		}
		want := "fake-model"
		switch g.r {
		case gemini:
			want = geminiModel
		case copilot:
			want = "gpt-4.1"
		}
		if q.Model != want {
			t.Errorf("resumed request for model %q, want %q", q.Model, want)
		}
		return
	}
	t.Fatalf("no model request carried the approval (%d requests after the load)", len(reqs))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkNoneLeft fails when a process the agent started is still running.
func checkNoneLeft(t testing.TB, a *agentProc) {
	t.Helper()
	if left := leftovers(a); len(left) > 0 {
		t.Errorf("processes left behind: %v", describe(left))
	}
	if m := groupMembers(a.pgid()); len(m) > 0 {
		t.Errorf("process group %d still has members: %v", a.pgid(), m)
	}
}

// leftovers are the agent's processes still running after it exited. A
// child signalled just before the agent exited may take a moment to die:
// it gets a short, bounded while (polled; there is no event to wait on).
func leftovers(a *agentProc) []int {
	deadline := time.Now().Add(30 * time.Second)
	for len(tagged(a.tag)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return tagged(a.tag)
}

func describe(pids []int) []string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
		out = append(out, strconv.Itoa(p)+" "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return out
}

// checkStdout: stdout carried nothing but JSON-RPC; logs the longest line
// (a reader's line bound must exceed it).
func (a *agentProc) checkStdout(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	noise, longest := a.noise, a.longest
	a.mu.Unlock()
	if len(noise) > 0 {
		t.Errorf("%s: %d non-JSON-RPC lines on stdout: %q", a.label, len(noise), noise)
	}
	t.Logf("fact: %s: longest stdout line %d bytes", a.label, longest)
}
