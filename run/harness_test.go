package run

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/internal/hermetic"
	"github.com/blobhub/bhw-run/setup"
)

func TestMain(m *testing.M) {
	// Compaction after every run that leaves nothing open, so the tests
	// (the kill -9 ones too, in their subprocesses) exercise it each time;
	// TestJournalCompactedOnceItHasGrown checks the real threshold.
	compactAtBytes = 0
	agenttest.MaybeRunFake()
	maybeRunActivation() // crash_test.go: one activation in a subprocess
	hermetic.Main(m.Run)
}

// harness is one state tree, one work folder and a BlobHub: the httptest
// server, or the same store opened as file://.
type harness struct {
	t      testing.TB
	srv    *bhtest.Server
	local  bool // talk to the store as file:// instead of HTTP
	state  string
	work   string
	config string
	script string
	cfg    string // extra config.yaml text
	runner func(*Runner)
	tune   func(*Runner) // applied after runner's changes (timeouts, grace)
}

func newHarness(t testing.TB, local bool) *harness {
	h := &harness{t: t, srv: bhtest.New(t), local: local, state: t.TempDir(), work: t.TempDir()}
	h.config = filepath.Join(h.state, "config.yaml")
	h.script = filepath.Join(t.TempDir(), "script.json")
	h.writeConfig()
	return h
}

func (h *harness) writeConfig() {
	exe, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := fmt.Sprintf(`agents:
  %[1]s:
    executable: %[3]s
    env: {%[4]s: %[5]q}
  %[2]s:
    executable: %[3]s
    env: {%[4]s: %[5]q}
policy:
  allow_autonomous: true
%[6]s`, testAgent, testHostAgent, exe, agenttest.ScriptEnv, h.script, h.cfg)
	if err := os.WriteFile(h.config, []byte(cfg), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// play sets the fake agent's script: the next agent started plays it.
func (h *harness) play(s agenttest.Script) { agenttest.Play(h.t, h.script, s) }

func (h *harness) setup() *setup.Setup {
	o := setup.Options{APIURL: h.srv.URL(), APIKey: bhtest.RunnerKey, StateDir: h.state, ConfigPath: h.config,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Home: h.state, Adapters: testAdapters()}
	if h.local {
		o.APIURL, o.APIKey = "file://"+h.srv.Dir(), ""
	}
	s, err := setup.Resolve(o, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) client() blobhub.Client {
	if !h.local {
		return h.srv.Client(bhtest.RunnerKey)
	}
	c, err := blobhub.New(blobhub.Config{APIURL: "file://" + h.srv.Dir(), RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, UserID: "usr_local"})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// run is one activation, in-process.
func (h *harness) run(alias string) *Summary {
	h.t.Helper()
	r := &Runner{
		Setup: h.setup(), Client: h.client(),
		Logger:      slog.New(slog.NewTextHandler(testWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MaxDuration: time.Minute, StallTimeout: time.Minute, Grace: 2 * time.Second,
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + h.state},
	}
	if h.runner != nil {
		h.runner(r)
	}
	if h.tune != nil {
		h.tune(r)
	}
	sum, err := r.Run(context.Background(), alias)
	if err != nil {
		h.t.Logf("run %s: %v", alias, err)
	}
	return sum
}

// handOff creates a pending thread with a first message, as a person does.
func (h *harness) handOff(alias, permissions, message string) {
	h.t.Helper()
	h.handOffTo(alias, testAgent, permissions, message)
}

// handOffTo is handOff for an agent of the given type.
func (h *harness) handOffTo(alias, agentType, permissions, message string) {
	h.t.Helper()
	h.srv.Put(alias, string(envelope.NewThread(h.work, agentType, permissions, alias)))
	if message != "" {
		h.srv.PersonPost(alias, message)
	}
}

// firstTurn hands alias off with message, as a person does, and runs the
// test agent's script to a completed turn: the start of a test about a
// thread that has run.
func (h *harness) firstTurn(alias, message string, script agenttest.Script) {
	h.t.Helper()
	h.handOff(alias, "approval", message)
	h.play(script)
	want(h.t, h.run(alias), OutcomeTurnCompleted, exit.OK)
}

// items returns the metadata types of the thread's items, in order; a
// person's item shows as "person".
func (h *harness) items(alias string) []string {
	var out []string
	for _, it := range h.srv.Items(alias) {
		var m struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type == "" {
			m.Type = "person"
		}
		out = append(out, m.Type)
	}
	return out
}

// setWireState writes instance.state as a person does (thread stop:
// completed; thread retry: pending).
func (h *harness) setWireState(alias, state string) {
	h.t.Helper()
	o, ok := h.srv.Get(alias)
	if !ok {
		h.t.Fatalf("no thread %s", alias)
	}
	nv, err := envelope.WithState(o.Value, state)
	if err != nil {
		h.t.Fatal(err)
	}
	h.srv.Put(alias, string(nv))
}

func (h *harness) wireState(alias string) string {
	o, ok := h.srv.Get(alias)
	if !ok {
		return "<absent>"
	}
	e, err := envelope.Parse(o.Value)
	if err != nil {
		return "<bad>"
	}
	return e.State
}

func (h *harness) thread(alias string) *envelope.Thread {
	h.t.Helper()
	t, err := envelope.LoadThread(filepath.Join(h.setup().JobDir, "threads", alias, "thread.yaml"))
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

// published is alias's artifacts.yaml: what the thread has published.
func (h *harness) published(alias string) map[string]envelope.PublishedArtifact {
	h.t.Helper()
	p, err := envelope.LoadPublished(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), publishedFile))
	if err != nil {
		h.t.Fatal(err)
	}
	return p.Published
}

// testAgent is the agent type the harness hands threads off to: the
// scripted test agent, registered as main registers a real one. It picks
// no session id of its own (as Codex and the ACP agents do not); run's
// other path, the host picking the id, is testHostAgent's.
const (
	testAgent     = agenttest.Type
	testHostAgent = "test_host_agent"
	// testUnsupported is a type the build knows but cannot run.
	testUnsupported = "test_unsupported_agent"
)

// testAdapters are the adapters of the harness's runs.
func testAdapters() []agent.Adapter {
	return []agent.Adapter{agenttest.Agent{}.Adapter(), agenttest.Agent{Type: testHostAgent, HostSessionID: true}.Adapter(),
		{Type: testUnsupported, Unsupported: "this agent is not supported yet"}}
}

type startFunc = func(context.Context, agent.Launch) (agent.Session, error)

// wrapStart puts wrap around the Start of agent type typ in r.
func wrapStart(r *Runner, typ string, wrap func(next startFunc) startFunc) {
	for i := range r.Setup.Adapters {
		if ad := &r.Setup.Adapters[i]; ad.Type == typ {
			ad.Start = wrap(ad.Start)
			return
		}
	}
	panic("no adapter " + typ)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func want(t testing.TB, sum *Summary, outcome string, exitCode int) {
	t.Helper()
	if sum.Outcome != outcome || sum.ExitCode != exitCode {
		t.Fatalf("outcome %q exit %d, want %q exit %d (error %+v)", sum.Outcome, sum.ExitCode, outcome, exitCode, sum.Error)
	}
}
