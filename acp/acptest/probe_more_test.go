//go:build realcli

package acptest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// turn sends a prompt and returns its response and the text of the agent
// message chunks that came with it.
func turn(t testing.TB, a *agentProc, sid, text string, d time.Duration) (*rpcMsg, string) {
	t.Helper()
	res, ups := a.collectUntil(a.prompt(sid, text), d)
	var b strings.Builder
	for _, m := range ups {
		if k, u := m.update(); k == "agent_message_chunk" {
			c, _ := u["content"].(map[string]any)
			s, _ := c["text"].(string)
			b.WriteString(s)
		}
	}
	return res, b.String()
}

func mustEndTurn(t testing.TB, what string, res *rpcMsg) {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("%s: %v", what, res.Error)
	}
	if s := stopReason(t, res); s != "end_turn" {
		t.Fatalf("%s: stopReason %q", what, s)
	}
}

func unknownSession(r *recipe) string {
	if r == opencode {
		return "ses_doesnotexist000000000000" // OpenCode's id shape
	}
	return "00000000-0000-4000-8000-000000000000"
}

func (a *agentProc) loadError(sid, cwd string) *rpcError {
	m := a.wait(a.send("session/load", map[string]any{"sessionId": sid, "cwd": cwd, "mcpServers": []any{}}), stepWait)
	return m.Error
}

// requestsFor are the model requests whose last user text holds s.
func requestsFor(g *rig, s string) []Request {
	var out []Request
	for _, q := range g.model().Requests() {
		if q.IsModelTurn() && strings.Contains(q.LastUserText(), s) {
			out = append(out, q)
		}
	}
	return out
}

// probeErrors: no such session, a model that fails once, a rate limit with
// a reset time, a refused API key; the session stays usable after each.
func probeErrors(t *testing.T, r *recipe) {
	g := newRig(t, r)
	a := g.start()
	a.initialize(t)
	unknown := unknownSession(r)
	if e := a.loadError(unknown, g.h.work); e == nil || !r.noSession(e) {
		t.Errorf("load of an unknown session in an empty home: %v, want the agent's no-such-session error", e)
	} else {
		t.Logf("fact: unknown session, empty home: %v", e)
	}
	sid := a.newSession(t, g.h.work)
	res, _ := turn(t, a, sid, "hello", stepWait)
	mustEndTurn(t, "first turn", res)
	if e := a.loadError(unknown, g.h.work); e == nil || !r.noSession(e) {
		t.Errorf("load of an unknown session next to a stored one: %v", e)
	}
	if m := a.wait(a.prompt(unknown, "hi"), stepWait); m.Error == nil ||
		!strings.Contains(strings.ToLower(m.Error.Message+string(m.Error.Data)), "not found") {
		t.Errorf("prompt on an unknown session: %s", m)
	} else {
		t.Logf("fact: prompt on an unknown session: %v", m.Error)
	}

	g.model().Inject(Fault{Status: 500, Times: 1})
	res, _ = turn(t, a, sid, "after one 500", stepWait)
	mustEndTurn(t, "a turn whose first model request got 500", res)
	if q := requestsFor(g, "after one 500"); len(q) != 2 || q[0].Status != 500 {
		t.Errorf("500 once: %d requests", len(q))
	} else {
		t.Logf("fact: retried a 500 after %s", q[1].Time.Sub(q[0].Time).Round(10*time.Millisecond))
	}

	const reset = 2 * time.Second
	g.model().Inject(Fault{Status: 429, Times: 1, RetryAfter: reset})
	res, _ = turn(t, a, sid, "after one 429", stepWait)
	mustEndTurn(t, "a turn whose first model request got 429", res)
	if q := requestsFor(g, "after one 429"); len(q) != 2 || q[0].Status != 429 {
		t.Errorf("429 once: %d requests", len(q))
	} else if gap := q[1].Time.Sub(q[0].Time); gap < reset*9/10 {
		t.Errorf("retried a 429 after %s, before its reset time %s", gap, reset)
	} else {
		t.Logf("fact: retried a 429 with Retry-After %s after %s", reset, gap.Round(10*time.Millisecond))
	}

	g.model().RequireKey("another-key", 401)
	res, text := turn(t, a, sid, "with a refused key", stepWait)
	if !r.turnFailed(res, text) {
		t.Errorf("refused key: %s %q does not read as a failed turn", res, text)
	}
	t.Logf("fact: refused key (401): %d requests, %s %q", len(requestsFor(g, "with a refused key")), res, clip(text, 300))
	g.model().RequireKey("", 0)
	res, _ = turn(t, a, sid, "key accepted again", stepWait)
	mustEndTurn(t, "the turn after a refused key", res)

	a.closeStdin()
	if code, _ := a.waitExit(exitWait); code != 0 {
		t.Errorf("exit %d", code)
	}
	a.save(r.Type, "errors")
}

// probeModelDown: every model request fails; how the failed turn ends, how
// long the agent retries, and that the session is usable afterwards.
func probeModelDown(t *testing.T, r *recipe) {
	g := newRig(t, r)
	a := g.start()
	a.initialize(t)
	sid := a.newSession(t, g.h.work)
	// A short Retry-After: agents that honour it retry quickly.
	g.model().Inject(Fault{Status: 500, RetryAfter: 10 * time.Millisecond})
	t0 := time.Now()
	res, text := turn(t, a, sid, "the model is down", 5*time.Minute)
	if !r.turnFailed(res, text) {
		t.Errorf("500 on every request: %s %q does not read as a failed turn", res, text)
	}
	t.Logf("fact: 500 always: failed after %s and %d requests: %s %q", time.Since(t0).Round(10*time.Millisecond),
		len(requestsFor(g, "the model is down")), clip(res.String(), 400), clip(text, 300))
	g.model().ClearFaults()
	res, _ = turn(t, a, sid, "the model is back", stepWait)
	mustEndTurn(t, "the turn after a failed one", res)
	a.closeStdin()
	a.waitExit(exitWait)
	a.save(r.Type, "model-down")
}

// startShell starts a turn whose shell call blocks on a FIFO, allows it,
// and waits until the command runs.
func startShell(t testing.TB, g *rig, a *agentProc) {
	t.Helper()
	sid := a.newSession(t, g.h.work)
	a.prompt(sid, Marker(g.r.ShellTool, g.r.ShellArgs("cat hold.fifo")))
	perm, _ := a.next(isPermission, stepWait)
	a.choose(perm, parsePermission(t, perm).option(t, "allow_once"))
	waitProcess(t, a, "cat hold.fifo")
}

// waitProcess polls the agent's processes until one runs cmdline.
func waitProcess(t testing.TB, a *agentProc, cmdline string) int {
	t.Helper()
	deadline := time.Now().Add(stepWait)
	for time.Now().Before(deadline) {
		for _, p := range tagged(a.tag) {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
			if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmdline) {
				return p
			}
		}
		select {
		case <-a.exited:
			t.Fatalf("the agent exited before running %q", cmdline)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no process runs %q", cmdline)
	return 0
}

// stop is how the adapter ends an agent: close stdin (agents that exit on
// EOF end their own tool children), then SIGTERM to the group, then
// SIGKILL. It returns the step that ended it.
func stop(a *agentProc, grace time.Duration) string {
	a.closeStdin()
	select {
	case <-a.exited:
		return "stdin closed"
	case <-time.After(grace):
	}
	_ = syscall.Kill(-a.pgid(), syscall.SIGTERM)
	select {
	case <-a.exited:
		return "SIGTERM to the group"
	case <-time.After(grace):
	}
	_ = syscall.Kill(-a.pgid(), syscall.SIGKILL)
	<-a.exited
	return "SIGKILL to the group"
}

// stopGrace covers Copilot, which exits 2 s after stdin closes mid-call.
const stopGrace = 4 * time.Second

func probeStop(t *testing.T, r *recipe) {
	g := newRig(t, r)
	if err := syscall.Mkfifo(filepath.Join(g.h.work, "hold.fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	// SIGTERM to the group while a shell call runs.
	a := g.start()
	a.initialize(t)
	startShell(t, g, a)
	t0 := time.Now()
	_ = syscall.Kill(-a.pgid(), syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(exitWait):
		t.Fatalf("still running %s after SIGTERM to its group", exitWait)
	}
	left := leftovers(a)
	t.Logf("fact: SIGTERM to the group mid-shell: exit %v after %s, left behind %v", a.procStat,
		time.Since(t0).Round(time.Millisecond), describe(left))
	if len(left) > 0 && !r.shellOutlivesTerm {
		t.Errorf("SIGTERM to the group left %v", describe(left))
	}
	for _, p := range left {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}

	// The adapter's stop while a shell call runs: nothing is left.
	a = g.start()
	a.initialize(t)
	startShell(t, g, a)
	t0 = time.Now()
	how := stop(a, stopGrace)
	t.Logf("fact: stop mid-shell: ended by %s after %s", how, time.Since(t0).Round(time.Millisecond))
	checkNoneLeft(t, a)

	// SIGTERM to the group while a model request is in flight.
	a = g.start()
	a.initialize(t)
	sid := a.newSession(t, g.h.work)
	mark := len(g.model().Requests())
	a.prompt(sid, "<<sleep 60s>> a slow model")
	ctx, cancel := waitCtx(stepWait)
	defer cancel()
	if _, err := g.modelWait(ctx, func(q Request) bool { return q.Seq > mark && q.IsModelTurn() }); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	_ = syscall.Kill(-a.pgid(), syscall.SIGTERM)
	select {
	case <-a.exited:
		t.Logf("fact: SIGTERM to the group mid-request: exit %v after %s", a.procStat, time.Since(t0).Round(time.Millisecond))
	case <-time.After(exitWait):
		t.Fatalf("still running %s after SIGTERM to its group", exitWait)
	}
	checkNoneLeft(t, a)
}

// modelWait waits for a model request, whichever fake the rig runs.
func (g *rig) modelWait(ctx context.Context, ok func(Request) bool) (Request, error) {
	if g.gem != nil {
		return g.gem.WaitFor(ctx, ok)
	}
	return g.chat.WaitFor(ctx, ok)
}

// probeWorkspaceConfig: a workspace's own agent config that allows
// everything must not make a write or a shell call run unasked.
func probeWorkspaceConfig(t *testing.T, r *recipe) {
	g := newRig(t, r)
	r.permissiveWorkspace(t, g.h.work)
	a := g.start()
	a.initialize(t)
	sid := a.newSession(t, g.h.work)
	for _, c := range []struct{ tool, file string }{
		{r.WriteTool, filepath.Join(g.h.work, "ws-write.txt")},
		{r.ShellTool, filepath.Join(g.h.work, "ws-shell.txt")},
	} {
		args := r.WriteArgs(c.file, "unasked\n")
		if c.tool == r.ShellTool {
			args = r.ShellArgs("echo unasked > ws-shell.txt")
		}
		pc := a.prompt(sid, Marker(c.tool, args))
		perm, _, err := a.tryNext(isPermission, 30*time.Second)
		if err != nil {
			t.Fatalf("%s under a permissive workspace config: no permission request (%v); ran: %v", c.tool, err, exists(c.file))
		}
		a.choose(perm, parsePermission(t, perm).option(t, "reject_once"))
		res, _ := a.collectUntil(pc, stepWait)
		mustEndTurn(t, "rejected call", res)
		if exists(c.file) {
			t.Errorf("%s ran although it was rejected", c.tool)
		}
	}
	a.closeStdin()
	a.waitExit(exitWait)
}

// probeGeminiLauncher: without GEMINI_CLI_NO_RELAUNCH the CLI is a launcher
// that ignores SIGTERM plus a relaunched child; with it, one process that
// exits on SIGTERM.
func probeGeminiLauncher(t *testing.T) {
	g := newRig(t, gemini)
	a := g.start()
	a.initialize(t)
	if n := len(tagged(a.tag)); n != 1 {
		t.Errorf("%d processes with GEMINI_CLI_NO_RELAUNCH=1", n)
	}
	_ = syscall.Kill(a.pgid(), syscall.SIGTERM)
	if code, _ := a.waitExit(exitWait); code != 0 {
		t.Logf("fact: exit %d on SIGTERM to the pid", code)
	}

	var env []string
	for _, e := range g.env {
		if !strings.HasPrefix(e, "GEMINI_CLI_NO_RELAUNCH=") {
			env = append(env, e)
		}
	}
	g.env = env
	a = g.start()
	a.initialize(t)
	procs := describe(tagged(a.tag))
	_ = syscall.Kill(a.pgid(), syscall.SIGTERM)
	// Still serving after SIGTERM to its own pid: the launcher ignores it.
	a.newSession(t, g.h.work)
	t.Logf("fact: relaunching Gemini CLI (%d processes: %v) still answers after SIGTERM to the launcher pid", len(procs), procs)
	t0 := time.Now()
	_ = syscall.Kill(-a.pgid(), syscall.SIGTERM)
	a.waitExit(exitWait)
	t.Logf("fact: SIGTERM to the group ends it in %s", time.Since(t0).Round(time.Millisecond))
	checkNoneLeft(t, a)
}

// TestProbeLimits: how each agent ends a turn whose every model request
// is rate limited (429 with a short reset) and one whose key is refused
// 403; with -record it writes testdata/acp/<agent>/limits.jsonl, from
// which the adapter's limit and login signals are recognised.
func TestProbeLimits(t *testing.T) {
	forEachAgent(t, probeLimits)
}

func probeLimits(t *testing.T, r *recipe) {
	g := newRig(t, r)
	a := g.start()
	a.initialize(t)
	sid := a.newSession(t, g.h.work)
	g.model().Inject(Fault{Status: 429, RetryAfter: time.Second})
	t0 := time.Now()
	res, text := turn(t, a, sid, "rate limited every time", stepWait)
	if !r.turnFailed(res, text) {
		t.Errorf("429 every time: %s %q does not read as a failed turn", res, text)
	}
	t.Logf("fact: 429 every time (1 s reset): %d requests over %s, %s %q", len(requestsFor(g, "rate limited every time")),
		time.Since(t0).Round(100*time.Millisecond), res, clip(text, 300))
	g.model().ClearFaults()
	if r == gemini {
		// A reset beyond its longest retry (300 s) fails the turn at once,
		// naming the reset; the other agents wait it out retrying.
		g.model().Inject(Fault{Status: 429, RetryAfter: 2 * time.Hour})
		t0 = time.Now()
		res, text = turn(t, a, sid, "rate limited for two hours", stepWait)
		if !r.turnFailed(res, text) || !strings.Contains(res.String(), "7200s") {
			t.Errorf("429 with a 2 h reset: %s %q, want a failed turn naming 7200s", res, text)
		}
		t.Logf("fact: 429 with a 2 h reset: %d requests over %s, %s", len(requestsFor(g, "rate limited for two hours")),
			time.Since(t0).Round(100*time.Millisecond), res)
		g.model().ClearFaults()
	}
	g.model().RequireKey("another-key", 403)
	res, text = turn(t, a, sid, "with a forbidden key", stepWait)
	if !r.turnFailed(res, text) {
		t.Errorf("forbidden key: %s %q does not read as a failed turn", res, text)
	}
	t.Logf("fact: forbidden key (403): %d requests, %s %q", len(requestsFor(g, "with a forbidden key")), res, clip(text, 300))
	g.model().RequireKey("", 0)
	a.closeStdin()
	if code, _ := a.waitExit(exitWait); code != 0 {
		t.Errorf("exit %d", code)
	}
	a.save(r.Type, "limits")
}
