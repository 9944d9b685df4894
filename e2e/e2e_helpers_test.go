// Package e2e holds the binary-level tests of bhw-run: the binary, built
// once by TestMain, runs as a subprocess exactly as cron or a shell would
// run it. Beside them: the testscript scenarios (testdata/script), the
// benchmarks, and the checks of the README, the docs and the recipes in
// contrib/ against the code.
//
// The tests that drive the real agent CLIs (installed by `make tools`)
// carry the build tag realcli, which the Makefile always sets: a bare
// `go test ./...` runs the hermetic, fake-backed rest, and `make test`
// runs everything. Under the tag a missing CLI fails its test.
package e2e

// End-to-end helpers: bhw-run runs against a BlobHub (bhtest over HTTP, or
// the same store as file://), a state tree and a work folder of the test's
// own. Nothing here is specific to one agent: the Codex tests and the
// Claude tests share it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/acp"
	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/antigravity/agytest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/internal/hermetic"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// bhwBin is the bhw-run binary TestMain built.
var bhwBin string

// rusageWrapBin is the benchmarks' measuring wrapper (rusageWrapperEnv).
var rusageWrapBin string

func TestMain(m *testing.M) {
	// The test binary doubles as a fake agent (and as a stand-in service
	// manager) when its environment says so.
	claudetest.MaybeRunFakeAgent()
	agenttest.MaybeRunFake()
	acptest.MaybeRunFakeAgent()
	codextest.MaybeRunFakeAppServer()
	agytest.MaybeRun()
	maybeRunServiceManager()
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	// Nothing of the person's machine: no agent CLI on PATH, a HOME of
	// this process's own, none of their keys (internal/hermetic).
	cleanup, err := hermetic.Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer cleanup()
	// The tests run from the module root, as a person runs make, the
	// README's commands and the recipes from a checkout: README.md,
	// contrib/, the Makefile and .tools/ are where they say; this
	// package's own files are under e2e/testdata.
	if err = os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "bhw-run-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bhwBin = filepath.Join(dir, "bhw-run")
	// Built as `make build` builds it: static, no cgo, no urfave/cli docs.
	build := exec.Command("go", "build", "-tags", buildTags(), "-o", bhwBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build: %v\n%s", err, out)
		return 1
	}
	rusageWrapBin = filepath.Join(dir, "rusagewrap")
	build = exec.Command("go", "build", "-o", rusageWrapBin, "./e2e/testdata/rusagewrap")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build rusagewrap: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// buildTags are the tags bhw-run is built with: urfave_cli_no_docs, after
// those a -tags in GOFLAGS names (the cpuprofile build of cpuprofile.go),
// which a -tags of the command line would otherwise replace.
func buildTags() string {
	tags := "urfave_cli_no_docs"
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if v, ok := strings.CutPrefix(f, "-tags="); ok && v != "" {
			tags = v + "," + tags
		}
	}
	return tags
}

// codexBin is the pinned real codex.
func codexBin(t testing.TB) string { return codextest.Bin(t) }

// claudeBin is the pinned real Claude Code.
func claudeBin(t testing.TB) string { return claudetest.Bin(t) }

// e2eEnv is one user's machine: a BlobHub, a state tree with its
// config.yaml, a HOME, a TMPDIR and a work folder.
type e2eEnv struct {
	t     testing.TB
	srv   *bhtest.Server
	local bool // talk to the store as file:// instead of over HTTP

	root  string // everything of this env lives below
	state string // --state-dir
	home  string // HOME of bhw-run (and so of the agent)
	tmp   string // TMPDIR, outside every other folder here
	work  string // the work folder threads are handed off with

	// Config is written to {state}/config.yaml by writeConfig; tests edit
	// it (agents.codex.*, agents.claude_code.*, policy, sections) and call
	// writeConfig again. With no sections, runs pass --revision/--session.
	Config setup.Config
	// Env is added to every bhw-run process (after the defaults, so it
	// can override them).
	Env []string
}

// newE2E makes an env talking HTTP to a fresh bhtest server.
func newE2E(t testing.TB) *e2eEnv {
	t.Helper()
	root := t.TempDir()
	e := &e2eEnv{t: t, srv: bhtest.New(t), root: root}
	e.state = filepath.Join(root, "state")
	e.home = filepath.Join(root, "home")
	e.tmp = filepath.Join(root, "tmp")
	e.work = filepath.Join(root, "work")
	for _, d := range []string{e.state, e.home, e.tmp, e.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig()
	return e
}

// useFileStore makes every later command talk to the server's store as
// file:///dir instead of over HTTP.
func (e *e2eEnv) useFileStore() { e.local = true }

func (e *e2eEnv) configPath() string { return filepath.Join(e.state, "config.yaml") }

// writeConfig writes e.Config as config.yaml.
func (e *e2eEnv) writeConfig() {
	e.t.Helper()
	b, err := yaml.Marshal(&e.Config)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.configPath(), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// jobDir is the state tree's folder for the session (of the first
// section, with its prefix).
func (e *e2eEnv) jobDir() string {
	if len(e.Config.Sections) > 0 {
		return filepath.Join(e.state, "jobs", setup.JobID(e.Config.Sections[0]))
	}
	return filepath.Join(e.state, "jobs", setup.JobType+"-"+bhtest.SessionID)
}

// environ is bhw-run's whole environment: nothing of the test process's
// but PATH; key the runner's unless key says otherwise.
func (e *e2eEnv) environ(key string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + e.home,
		"TMPDIR=" + e.tmp,
		"LANG=C.UTF-8",
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"BHW_STATE_DIR=" + e.state,
		"BHW_CONFIG=" + e.configPath(),
		"BHW_LOG_FORMAT=json",
		// A transient API error's resumes wait milliseconds, not minutes.
		run.RetryDelaysEnv + "=10,20,30",
	}
	if len(e.Config.Sections) == 0 {
		env = append(env, "BHW_REVISION_ID="+bhtest.RevisionID, "BHW_SESSION_ID="+bhtest.SessionID)
	}
	if e.local {
		env = append(env, "BLOBHUB_API_URL=file://"+e.srv.Dir())
	} else {
		env = append(env, "BLOBHUB_API_URL="+e.srv.URL(), "BLOBHUB_API_KEY="+key)
	}
	return append(env, e.Env...)
}

// adapters are the agents of the binary: the list main.go passes to the
// command line.
var adapters = append([]agent.Adapter{claude.Adapter, codex.Adapter}, append(acp.Adapters(), antigravity.Adapter)...)

// resolveConfig resolves text as the config.yaml of a fresh state tree,
// with the binary's adapters, as bhw-run does, for section ("" for the
// only one).
func resolveConfig(t testing.TB, text []byte, section string) (*setup.Setup, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return setup.Resolve(setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: path, Section: section, Home: dir, Adapters: adapters}, "")
}

// The agent types of the end-to-end tests.
var (
	claudeType = claude.Adapter.Type
	codexType  = codex.Adapter.Type
)

// agentConfig is agents.<typ> of e.Config, created when missing; tests
// set its fields (the adapter's own keys in Own) and call writeConfig.
func (e *e2eEnv) agentConfig(typ string) *setup.AgentConfig {
	if e.Config.Agents == nil {
		e.Config.Agents = map[string]*setup.AgentConfig{}
	}
	ac := e.Config.Agents[typ]
	if ac == nil {
		ac = &setup.AgentConfig{Own: map[string]any{}}
		e.Config.Agents[typ] = ac
	}
	return ac
}

// realCLI points agents.typ at the real CLI bin, with a folder of its own
// below e.root named dir as its own option key (its config or home
// folder); it returns the folder, made.
func (e *e2eEnv) realCLI(typ, bin, key, dir string) string {
	e.t.Helper()
	dir = filepath.Join(e.root, dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	e.agentConfig(typ).Executable = bin
	e.agentConfig(typ).Own[key] = dir
	return dir
}

// waitSaid waits, up to a minute, until the thread holds a text item
// that says text.
func (e *e2eEnv) waitSaid(alias, text, what string) {
	e.t.Helper()
	waitFor(e.t, 60*time.Second, what, func() bool {
		for _, it := range e.itemsOfType(alias, agent.ItemText) {
			if it.Content[0].Text == text {
				return true
			}
		}
		return false
	})
}

// proc is a running bhw-run.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
}

// start starts bhw-run with args as the runner, with extra environment.
func (e *e2eEnv) start(key string, extraEnv []string, args ...string) *proc {
	e.t.Helper()
	p := &proc{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	p.cmd = exec.Command(bhwBin, args...)
	p.cmd.Env = append(e.environ(key), extraEnv...)
	p.cmd.Dir = e.root
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("start bhw-run: %v", err)
	}
	e.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// wait waits for the process and returns its exit code (128+n for a
// signal n).
func (p *proc) wait() int {
	err := p.cmd.Wait()
	if err == nil {
		return 0
	}
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	if p.cmd.ProcessState != nil {
		return p.cmd.ProcessState.ExitCode()
	}
	return -1
}

// run runs bhw-run as the runner to the end.
func (e *e2eEnv) run(args ...string) (exitCode int, stdout, stderr string) {
	e.t.Helper()
	p := e.start(bhtest.RunnerKey, nil, args...)
	code := p.wait()
	e.t.Logf("bhw-run %s → exit %d\nstdout: %s\nstderr:\n%s", strings.Join(args, " "), code, p.stdout, tail(p.stderr.String(), 6000))
	return code, p.stdout.String(), p.stderr.String()
}

// asPerson runs a bhw-run command with the person's key.
func (e *e2eEnv) asPerson(args ...string) {
	e.t.Helper()
	p := e.start(bhtest.PersonKey, nil, args...)
	if code := p.wait(); code != 0 {
		e.t.Fatalf("bhw-run %s (as the person) → exit %d\n%s%s", strings.Join(args, " "), code, p.stdout, p.stderr)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// wireError is an error as bhw-run reports it, in the run summary and in
// a thread_failed item.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// summary is the --json run summary.
type summary struct {
	Alias          string     `json:"alias"`
	Outcome        string     `json:"outcome"`
	ExitCode       int        `json:"exit_code"`
	Error          *wireError `json:"error"`
	AgentSessionID string     `json:"agent_session_id"`
	ItemsPosted    int        `json:"items_posted"`
	DurationMS     int64      `json:"duration_ms"`
	// Tools are the turn's tool calls, when a turn ran.
	Tools *agent.ToolCounts `json:"tools"`
	Usage agent.Usage       `json:"usage"`
	// LimitedUntil is the reset of a RATE_LIMITED run.
	LimitedUntil string `json:"limited_until"`
}

// activate runs `bhw-run --json <alias>` and wants exit code and outcome.
func (e *e2eEnv) activate(alias string, wantExit int, wantOutcome string) summary {
	e.t.Helper()
	code, out, _ := e.run("--json", alias)
	s := parseSummary(e.t, out)
	if code != wantExit || s.Outcome != wantOutcome || s.ExitCode != code {
		e.t.Fatalf("bhw-run %s: exit %d outcome %q (summary exit %d, error %+v), want exit %d outcome %q",
			alias, code, s.Outcome, s.ExitCode, s.Error, wantExit, wantOutcome)
	}
	return s
}

func parseSummary(t testing.TB, stdout string) summary {
	t.Helper()
	var s summary
	line := strings.TrimSpace(stdout)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatalf("the --json summary %q: %v", stdout, err)
	}
	return s
}

// handOff creates a pending thread of agentType in the work folder with a
// first message, as a person does with `bhw-run thread new`.
func (e *e2eEnv) handOff(alias, agentType, permissions, message string) {
	e.t.Helper()
	args := []string{"thread", "new", "--work-folder", e.work, "--agent", agentType}
	if permissions != "" {
		args = append(args, "--permissions", permissions)
	}
	if message != "" {
		args = append(args, "--message", message)
	}
	e.asPerson(append(args, alias)...)
}

// handOffGuarded creates a pending guarded thread with pol in
// thread.metadata.policy (nil: none), then posts the first message.
func (e *e2eEnv) handOffGuarded(alias, agentType string, pol *policy.Policy, message string) {
	e.t.Helper()
	var v map[string]any
	if err := json.Unmarshal(envelope.NewThread(e.work, agentType, setup.PermGuarded, alias), &v); err != nil {
		e.t.Fatal(err)
	}
	if pol != nil {
		v["thread"].(map[string]any)["metadata"].(map[string]any)["policy"] = pol
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv.Put(alias, string(b))
	e.post(alias, message)
}

// post posts a person's item with `bhw-run thread post`.
func (e *e2eEnv) post(alias, text string) {
	e.t.Helper()
	e.asPerson("thread", "post", alias, text)
}

// items are the thread's items, read from the store.
func (e *e2eEnv) items(alias string) []blobhub.Item { return e.srv.Items(alias) }

// itemMeta is the part of an item's metadata the tests look at.
type itemMeta struct {
	Type         string `json:"type"`
	EmissionID   string `json:"emission_id"`
	Decision     string `json:"decision"`
	Resolution   string `json:"resolution"`
	PromptItemID string `json:"prompt_item_id"`
	Outcome      string `json:"outcome"`
	// Status is a status item's token, or a turn_end's outcome in
	// blobhub-worker's words.
	Status string         `json:"status"`
	Tool   map[string]any `json:"tool"`
	Prompt map[string]any `json:"prompt"`
	// Tools are a turn_end's tool calls.
	Tools *agent.ToolCounts `json:"tools"`
	// Thread is the thread a worker item (thread_failed,
	// thread_recovered) is about, with a failure's error.
	Thread struct {
		Alias string    `json:"alias"`
		Error wireError `json:"error"`
	} `json:"thread"`
	// All is the whole metadata, for a status item's other fields.
	All map[string]any `json:"-"`
}

func meta(t testing.TB, it blobhub.Item) itemMeta {
	var m itemMeta
	if len(it.Metadata) > 0 {
		if err := json.Unmarshal(it.Metadata, &m); err != nil {
			t.Fatalf("item %s metadata %s: %v", it.ID, it.Metadata, err)
		}
		_ = json.Unmarshal(it.Metadata, &m.All)
	}
	return m
}

// itemsOfType are the thread's items whose metadata.type is typ.
func (e *e2eEnv) itemsOfType(alias, typ string) []blobhub.Item {
	var out []blobhub.Item
	for _, it := range e.items(alias) {
		if meta(e.t, it).Type == typ {
			out = append(out, it)
		}
	}
	return out
}

// onlyOfType is the thread's one item whose metadata.type is typ; it
// fails the test unless there is exactly one.
func (e *e2eEnv) onlyOfType(alias, typ string) blobhub.Item {
	e.t.Helper()
	its := e.itemsOfType(alias, typ)
	if len(its) != 1 {
		e.t.Fatalf("%d %s items, want 1: %v", len(its), typ, e.itemTypes(alias))
	}
	return its[0]
}

// wantParkedResult checks the parked turn's call on the thread: its
// pending_prompt comes right after its tool_call, then its tool_result,
// which says the call waits for a person and names the prompt — not an
// error, and not what the agent was told to stop it (Claude's "The user
// doesn't want to proceed … STOP", Codex's "aborted by user").
func (e *e2eEnv) wantParkedResult(alias string) {
	e.t.Helper()
	items := e.items(alias)
	for i, it := range items {
		if m := meta(e.t, it); m.Type != "pending_prompt" {
			continue
		}
		if i == 0 || i+1 >= len(items) || meta(e.t, items[i-1]).Type != "tool_call" || meta(e.t, items[i+1]).Type != "tool_result" {
			e.t.Fatalf("the pending_prompt does not sit between its tool_call and tool_result: %v", e.itemTypes(alias))
		}
		var r struct {
			Tool struct {
				Output  string `json:"output"`
				IsError bool   `json:"is_error"`
			} `json:"tool"`
			Parked        bool `json:"parked"`
			PendingPrompt struct {
				ItemID string `json:"item_id"`
			} `json:"pending_prompt"`
		}
		res := items[i+1]
		if err := json.Unmarshal(res.Metadata, &r); err != nil {
			e.t.Fatal(err)
		}
		if r.Tool.IsError || !r.Parked || r.Tool.Output != agent.WaitingText || r.PendingPrompt.ItemID != it.ID {
			e.t.Fatalf("the parked call's result %s, want it waiting for the person, naming prompt %s", res.Metadata, it.ID)
		}
	}
	for _, it := range items {
		b, _ := json.Marshal(it)
		for _, s := range []string{"doesn't want to proceed", "STOP what you are doing", "aborted by user"} {
			if strings.Contains(string(b), s) {
				e.t.Fatalf("what the agent was told to stop reached the thread: %s", b)
			}
		}
	}
}

// itemTypes are the metadata types of the thread's items in order; a
// person's item shows as "person".
func (e *e2eEnv) itemTypes(alias string) []string {
	var out []string
	for _, it := range e.items(alias) {
		typ := meta(e.t, it).Type
		if typ == "" {
			typ = "person"
		}
		out = append(out, typ)
	}
	return out
}

// wireState is the envelope's instance.state on the store.
func (e *e2eEnv) wireState(alias string) string {
	o, ok := e.srv.Get(alias)
	if !ok {
		return "<absent>"
	}
	env, err := envelope.Parse(o.Value)
	if err != nil {
		return "<bad: " + err.Error() + ">"
	}
	return env.State
}

// threadYAML is the thread's local record.
func (e *e2eEnv) threadYAML(alias string) *envelope.Thread {
	e.t.Helper()
	th, err := envelope.LoadThread(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "thread.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	return th
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		<-tick.C
	}
}

// procInfo is what noProcessesLeft reads of a process in /proc.
type procInfo struct {
	pid, pgid int
	state     byte
	cwd, cmd  string
}

// procPIDs are the processes /proc lists now.
func procPIDs(tb testing.TB) []int {
	tb.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var out []int
	for _, de := range ents {
		if pid, err := strconv.Atoi(de.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads /proc/<pid>/stat: comm, and the fields after it (state,
// ppid, pgrp, … so that f[k] is field k+3 of proc(5)).
func procStat(pid int) (comm string, f []string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	// comm may hold spaces and parentheses: the fields follow the last ')'.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return s[open+1 : end], strings.Fields(s[end+1:]), true
}

func readProc(pid int) (procInfo, bool) {
	_, f, ok := procStat(pid)
	if !ok || len(f) < 3 {
		return procInfo{}, false
	}
	pi := procInfo{pid: pid, state: f[0][0]}
	pi.pgid, _ = strconv.Atoi(f[2])
	pi.cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	pi.cmd = strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " "))
	return pi, true
}

// liveProcesses are the live processes in one of the process groups pgids
// or with their working directory in a folder of dirs (the agent and every
// command it runs start in the work folder, whatever group or session they
// make for themselves). Zombies are dead and do not count.
func liveProcesses(pgids []int, dirs ...string) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []procInfo
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid == self {
			continue
		}
		pi, ok := readProc(pid)
		if !ok || pi.state == 'Z' || pi.state == 'X' {
			continue
		}
		match := slices.ContainsFunc(pgids, func(g int) bool { return g > 0 && pi.pgid == g })
		for _, d := range dirs {
			if pi.cwd == d || strings.HasPrefix(pi.cwd, d+"/") {
				match = true
			}
		}
		if match {
			out = append(out, pi)
		}
	}
	return out
}

// noProcessesLeft fails the test if liveProcesses finds any.
func noProcessesLeft(t testing.TB, pgids []int, dirs ...string) {
	t.Helper()
	for _, pi := range liveProcesses(pgids, dirs...) {
		t.Errorf("process %d (%s, group %d, cwd %s) outlived the run", pi.pid, pi.cmd, pi.pgid, pi.cwd)
	}
}

// count is how many of s equal v.
func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// rusageWrapperEnv names "real-executable,report-file" for rusageWrapBin
// (testdata/rusagewrap), which then runs the real executable as its child
// and writes the child's rusage (as wait4 reports it: the child and the
// descendants it waited for) and its own (RUSAGE_SELF) to the report file.
// Benchmarks make it the agent's executable to tell the agent's CPU and
// peak RSS apart from bhw-run's.
const rusageWrapperEnv = "BHW_E2E_RUSAGE_WRAP"

// rusageReport is the file the rusage wrapper writes its report to, in a
// folder of its own the confined agent may write (the wrapper is the
// agent's executable, so it runs inside the confinement):
// confine.writable, for the caller's writeConfig to write out.
func (e *e2eEnv) rusageReport() string {
	dir := filepath.Join(e.root, "rusage")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	e.Config.Confine.Writable = append(e.Config.Confine.Writable, dir)
	return filepath.Join(dir, "report.json")
}

// wrapReport is what the wrapper writes.
type wrapReport struct {
	ChildCPU   time.Duration `json:"child_cpu"`
	ChildRSSKB int64         `json:"child_rss_kb"`
	SelfCPU    time.Duration `json:"self_cpu"`
}

// wantCompletedIdle checks what a completed first turn leaves: a turn_end
// with outcome completed, the wire active, and thread.yaml idle on session
// with no agent process recorded.
func (e *e2eEnv) wantCompletedIdle(alias, session string) {
	e.t.Helper()
	if got := meta(e.t, e.itemsOfType(alias, "turn_end")[0]).Outcome; got != "completed" {
		e.t.Errorf("turn_end outcome %q", got)
	}
	if st := e.wireState(alias); st != "active" {
		e.t.Errorf("wire state %q, want active", st)
	}
	th := e.threadYAML(alias)
	if th.Agent.AgentSessionID != session || th.Turn.State != "idle" || th.Agent.Process != nil {
		e.t.Errorf("thread.yaml agent %+v turn %+v", th.Agent, th.Turn)
	}
}

// wrappedRun is one activation whose agent ran behind the rusage wrapper
// (rusageWrapperEnv), measured the way the overhead benchmarks report it.
type wrappedRun struct {
	code       int
	wall       time.Duration
	stdout     string
	stderr     string
	bhwCPU     time.Duration // bhw-run's own: its total minus the agent's and the wrapper's
	agentCPU   time.Duration // the agent's, with the children it waited for
	bhwRSSKB   int64         // bhw-run's VmHWM, sampled while it runs
	agentRSSKB int64         // the agent's peak (its largest process), as wait4 reports it
}

// runWrapped runs `bhw-run --json alias` once and reads the wrapper's
// report from report. wait4 folds reaped children into a process's times
// and rusage times add up, so bhw-run's own CPU is its total minus what the
// wrapper accounted for; its Rusage.Maxrss cannot be used (it is the
// maximum over it and its children, i.e. the agent's), so its VmHWM is
// read from /proc every 2 ms while it runs, a high-water mark that misses
// only growth in the last 2 ms.
func (e *e2eEnv) runWrapped(tb testing.TB, alias, report string) wrappedRun {
	tb.Helper()
	_ = os.Remove(report)
	t0 := time.Now()
	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	hwm := make(chan int64)
	stop := make(chan struct{})
	go func() { hwm <- sampleHWM(p.cmd.Process.Pid, stop) }()
	r := wrappedRun{code: p.wait()}
	r.wall = time.Since(t0)
	close(stop)
	r.bhwRSSKB = <-hwm
	r.stdout, r.stderr = p.stdout.String(), p.stderr.String()
	var rep wrapReport
	raw, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(raw, &rep) != nil {
		tb.Fatalf("the rusage wrapper's report: %v (exit %d)\n%s", err, r.code, tail(r.stderr, 3000))
	}
	total := p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
	r.bhwCPU, r.agentCPU, r.agentRSSKB = total-rep.ChildCPU-rep.SelfCPU, rep.ChildCPU, rep.ChildRSSKB
	return r
}

// overheadRuns are the timed activations of an overhead benchmark
// (BenchmarkE2EClaudeTurnOverhead, BenchmarkE2ECodexTurnOverhead,
// BenchmarkE2EACPTurnOverhead), the agent behind the rusage wrapper
// (testdata/rusagewrap as agents.<type>.executable). What they report, as
// medians, and how it is measured:
//   - <agent>-cpu-ms/op, <agent>-rss-MB: the wrapper reports the CLI's
//     user+system time and peak RSS as its own wait4 sees them (the CLI and
//     any descendant it reaped).
//   - bhw-cpu-ms/op: bhw-run's user+system time from its ProcessState,
//     minus everything the wrapper accounted for (the CLI and the wrapper
//     itself): wait4 folds reaped children into a process's times, and
//     rusage times add up, so the difference is bhw-run's own CPU (with any
//     process it starts itself, such as Codex's sandbox check). What the
//     wrapper spends after its report (its exit, about 0.4 ms) cannot be
//     measured and counts as bhw-run's.
//   - bhw-rss-MB: bhw-run's VmHWM, sampled from /proc/<pid>/status every
//     2 ms while it runs. Its Rusage.Maxrss cannot be used: wait4 reports
//     the maximum over the process and its reaped children, i.e. the
//     CLI's. VmHWM is a high-water mark, so only growth in the last
//     sampling interval before exit can be missed.
//   - wall-ms/op: the activation's wall time.
//   - bhw_pct: bhw-run's median CPU as a percentage of the CLI's.
//   - thread_log_kb/op: what the activation wrote to thread.log.
type overheadRuns struct {
	wall, bhwCPU, agentCPU, bhwRSS, agentRSS, logKB []float64
}

// timed runs `bhw-run --json alias` once under b's timer (stopped on entry
// and on return), fails b unless the turn completed, and records the run
// and what it wrote to thread.log.
func (o *overheadRuns) timed(b *testing.B, e *e2eEnv, alias, report string) wrappedRun {
	b.Helper()
	before, _ := threadLogKB(e, alias) // none before the thread's first run
	b.StartTimer()
	r := e.runWrapped(b, alias, report)
	b.StopTimer()
	if s := parseSummary(b, r.stdout); r.code != 0 || s.Outcome != run.OutcomeTurnCompleted {
		b.Fatalf("exit %d outcome %q\n%s%s", r.code, s.Outcome, r.stdout, tail(r.stderr, 4000))
	}
	after, err := threadLogKB(e, alias)
	if err != nil {
		b.Fatal(err)
	}
	o.wall = append(o.wall, ms(r.wall))
	o.bhwCPU = append(o.bhwCPU, ms(r.bhwCPU))
	o.agentCPU = append(o.agentCPU, ms(r.agentCPU))
	o.bhwRSS = append(o.bhwRSS, float64(r.bhwRSSKB)/1024)
	o.agentRSS = append(o.agentRSS, float64(r.agentRSSKB)/1024)
	o.logKB = append(o.logKB, after-before)
	return r
}

// report reports the medians of the runs, the agent's under its name.
func (o *overheadRuns) report(b *testing.B, agent string) {
	b.ReportMetric(medianOf(o.wall), "wall-ms/op")
	b.ReportMetric(medianOf(o.bhwCPU), "bhw-cpu-ms/op")
	b.ReportMetric(medianOf(o.agentCPU), agent+"-cpu-ms/op")
	b.ReportMetric(medianOf(o.bhwRSS), "bhw-rss-MB")
	b.ReportMetric(medianOf(o.agentRSS), agent+"-rss-MB")
	b.ReportMetric(medianOf(o.logKB), "thread_log_kb/op")
	b.ReportMetric(100*medianOf(o.bhwCPU)/medianOf(o.agentCPU), "bhw_pct")
}

// threadLogKB is the size of alias's thread.log: what its runs wrote.
func threadLogKB(e *e2eEnv, alias string) (float64, error) {
	st, err := os.Stat(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil {
		return 0, err
	}
	return float64(st.Size()) / 1024, nil
}

// statusTokens are the tokens of the thread's status items, in order.
func (e *e2eEnv) statusTokens(alias string) []string {
	var out []string
	for _, it := range e.itemsOfType(alias, "status") {
		tok := meta(e.t, it).Status
		out = append(out, tok)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sampleHWM reads VmHWM (kB) of pid every 2 ms until stop closes and
// returns the highest value seen.
func sampleHWM(pid int, stop <-chan struct{}) int64 {
	var peak int64
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	path := fmt.Sprintf("/proc/%d/status", pid)
	for {
		if b, err := os.ReadFile(path); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
					peak = max(peak, kb)
				}
			}
		}
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
