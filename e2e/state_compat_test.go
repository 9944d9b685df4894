package e2e

// The state tree bhw-run leaves behind must stay readable by every later
// version with no migration step a person runs. testdata/state-v1 holds
// thread.yaml and emissions.jsonl files written by the bhw-run of commit
// fc457ce (before the agent room), with the paths of the run that wrote them
// replaced by placeholders; these tests put them into a fresh state tree and
// resume them.

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/codex"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// legacyState is one fixture copied into a state tree.
type legacyState struct {
	t      *testing.T
	srv    *bhtest.Server
	state  string
	work   string
	exe    string
	config string
	// The dirs the fixture's placeholders stand for.
	configDir, codexHome string
}

func newLegacyState(t *testing.T) *legacyState {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	s := &legacyState{t: t, srv: bhtest.New(t), state: filepath.Join(root, "state"), work: filepath.Join(root, "work"), exe: exe,
		configDir: filepath.Join(root, "recorded-claude-config"), codexHome: filepath.Join(root, "recorded-codex-home")}
	s.config = filepath.Join(s.state, "config.yaml")
	for _, d := range []string{s.state, s.work, s.configDir, s.codexHome} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// install copies testdata/state-v1/<name> into the thread folder of alias.
func (s *legacyState) install(name, alias string) {
	s.t.Helper()
	dir := setup.ThreadDir(filepath.Join(s.state, "jobs", setup.JobType+"-"+bhtest.SessionID), alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	// A fingerprint covers the call's paths: the parked call's is computed
	// again for the work folder it now lies in.
	fp := claude.Fingerprint("Write", json.RawMessage(`{"content":"hi","file_path":"`+filepath.Join(s.work, "x.txt")+`"}`))
	repl := strings.NewReplacer("@CONFIG_DIR@", s.configDir, "@CODEX_HOME@", s.codexHome, "@WORK@", s.work, "@EXE@", s.exe, "@STATE@", s.state, "@FINGERPRINT@", fp)
	for _, f := range []string{"thread.yaml", "emissions.jsonl"} {
		b, err := os.ReadFile(filepath.Join("e2e", "testdata", "state-v1", name, f))
		if err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(repl.Replace(string(b))), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// maxCounter is the highest emission counter the fixture's journal used.
func (s *legacyState) maxCounter(name, nonce string) int {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join("e2e", "testdata", "state-v1", name, "emissions.jsonl"))
	if err != nil {
		s.t.Fatal(err)
	}
	max := 0
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Emission *struct {
				ID string `json:"emission_id"`
			} `json:"emission"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Emission == nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(rec.Emission.ID, nonce+":")); err == nil && n > max {
			max = n
		}
	}
	if max == 0 {
		s.t.Fatalf("no emissions under nonce %s in the fixture", nonce)
	}
	return max
}

func (s *legacyState) thread(alias string) *envelope.Thread {
	s.t.Helper()
	th, err := envelope.LoadThread(filepath.Join(setup.ThreadDir(filepath.Join(s.state, "jobs", setup.JobType+"-"+bhtest.SessionID), alias), "thread.yaml"))
	if err != nil || th == nil {
		s.t.Fatalf("thread.yaml of %s: %v", alias, err)
	}
	return th
}

func (s *legacyState) runner(adapters ...agent.Adapter) *run.Runner {
	s.t.Helper()
	setup, err := setup.Resolve(setup.Options{APIURL: s.srv.URL(), APIKey: bhtest.RunnerKey, StateDir: s.state, ConfigPath: s.config,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Home: s.state, Adapters: adapters}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return &run.Runner{Setup: setup, Client: s.srv.Client(bhtest.RunnerKey), Logger: slog.New(slog.DiscardHandler),
		MaxDuration: time.Minute, StallTimeout: time.Minute, Grace: 2 * time.Second,
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.state}}
}

func envOf(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestLegacyParkedClaudeThreadResumes: a Claude thread parked on a Write by
// the earlier version, with agent.resolved.config_dir recorded, is answered
// "yes": the same session resumes with the recorded config dir (not the one
// config.yaml names now), the call runs once under the grant, the journal's
// emission ids go on from the recorded nonce and counter, and the published
// artifact is not published again.
func TestLegacyParkedClaudeThreadResumes(t *testing.T) {
	s := newLegacyState(t)
	const alias = "projects/p1/legacy"
	s.install("claude-parked", alias)
	raw, err := envelope.SetPath(envelope.NewThread(s.work, claudeType, "approval", alias), []string{"thread", "metadata", "artifacts"}, []byte(`{"source":".bhw/outbox"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = envelope.WithState(raw, envelope.StateActive)
	s.srv.Put(alias, string(raw))
	if err := os.MkdirAll(filepath.Join(s.work, ".bhw/outbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.work, ".bhw/outbox/report.txt"), []byte("report\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := s.thread(alias)
	maxCounter := s.maxCounter("claude-parked", before.EmissionNonce)

	target := filepath.Join(s.work, "x.txt")
	write := &claudetest.FakeTool{Name: "Write", Input: map[string]any{"file_path": target, "content": "hi"}, Result: "File created"}
	script := filepath.Join(t.TempDir(), "script.json")
	b, _ := json.Marshal(claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{{Permission: write}, {Text: "written"}}}})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	now := filepath.Join(t.TempDir(), "claude-config-now")
	cfg := "agents:\n  claude_code:\n    executable: " + s.exe + "\n    config_dir: " + now + "\n    env: {" + claudetest.FakeAgentEnv + ": " + script + "}\n"
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.srv.PersonPost(alias, "yes")

	var launches []agent.Launch
	ad := claude.Adapter
	ad.Start = func(ctx context.Context, l agent.Launch) (agent.Session, error) {
		launches = append(launches, l)
		return claude.Adapter.Start(ctx, l)
	}
	sum, err := s.runner(ad).Run(context.Background(), alias)
	if err != nil || sum.Outcome != run.OutcomeTurnCompleted {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if len(launches) != 1 {
		t.Fatalf("%d launches", len(launches))
	}
	l := launches[0]
	if !l.Resume || l.SessionID != before.Agent.AgentSessionID || l.Executable != s.exe {
		t.Errorf("launch resume %v session %q executable %q, want the recorded session %q of %s", l.Resume, l.SessionID, l.Executable, before.Agent.AgentSessionID, s.exe)
	}
	if got := envOf(l.Env, "CLAUDE_CONFIG_DIR"); got != s.configDir {
		t.Errorf("CLAUDE_CONFIG_DIR=%q, want the recorded %q", got, s.configDir)
	}
	if got := envOf(l.Env, "HOME"); got != s.state {
		t.Errorf("HOME=%q, want the recorded %q", got, s.state)
	}

	var types []string
	for _, it := range s.srv.Items(alias) {
		var m struct {
			Type       string `json:"type"`
			EmissionID string `json:"emission_id"`
			Decision   string `json:"decision"`
			Tool       struct {
				IsError bool `json:"is_error"`
			} `json:"tool"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type == "" {
			continue
		}
		types = append(types, m.Type)
		if !strings.HasPrefix(m.EmissionID, before.EmissionNonce+":") {
			t.Errorf("emission id %q is not under the recorded nonce %s", m.EmissionID, before.EmissionNonce)
		}
		if n, _ := strconv.Atoi(strings.TrimPrefix(m.EmissionID, before.EmissionNonce+":")); n <= maxCounter {
			t.Errorf("emission id %q reuses a counter of the recorded journal (up to %d)", m.EmissionID, maxCounter)
		}
		if m.Type == "pending_prompt_resolved" && m.Decision != "approved" {
			t.Errorf("prompt resolved %q", m.Decision)
		}
		if m.Type == "tool_result" && m.Tool.IsError {
			t.Errorf("the approved call failed: %s", it.Metadata)
		}
	}
	if want := []string{"pending_prompt_resolved", "tool_call", "tool_result", "text", "turn_end"}; !slices.Equal(types, want) {
		t.Errorf("items %v, want %v", types, want)
	}
	after := s.thread(alias)
	if after.Prompt != nil || len(after.Grants) != 0 || after.Turn.State != envelope.TurnStateIdle {
		t.Errorf("after: prompt %+v grants %v turn %q", after.Prompt, after.Grants, after.Turn.State)
	}
	// The resolved work folder was not recorded then: the turn adds it.
	pinned := before.Workspace
	pinned.ResolvedFolder, _ = filepath.EvalSymlinks(before.Workspace.WorkFolder)
	if after.Agent.AgentSessionID != before.Agent.AgentSessionID || !reflect.DeepEqual(after.Workspace, pinned) || after.EmissionNonce != before.EmissionNonce {
		t.Errorf("after: session %q workspace %+v nonce %q", after.Agent.AgentSessionID, after.Workspace, after.EmissionNonce)
	}
	// The published artifacts move to artifacts.yaml, which only a turn
	// that publishes reads.
	pub, err := envelope.LoadPublished(filepath.Join(setup.ThreadDir(filepath.Join(s.state, "jobs", setup.JobType+"-"+bhtest.SessionID), alias), "artifacts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Artifacts.Published["report.txt"]; !after.Outbox.CreatedByUs || len(after.Artifacts.Published) != 0 || want.SHA256 == "" || pub.Published["report.txt"] != want {
		t.Errorf("after: outbox %+v, thread.yaml artifacts %+v, artifacts.yaml %+v; want report.txt %+v in artifacts.yaml only", after.Outbox, after.Artifacts, pub.Published, want)
	}
	if n := s.srv.Count("upload"); n != 0 {
		t.Errorf("%d uploads: the unchanged artifact was published again", n)
	}
	// And the rewritten thread.yaml resumes too.
	s.srv.PersonPost(alias, "thanks")
	b, _ = json.Marshal(claudetest.FakeScript{Turns: [][]claudetest.FakeStep{{{Text: "you are welcome"}}}})
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}
	launches = nil
	sum, err = s.runner(ad).Run(context.Background(), alias)
	if err != nil || sum.Outcome != run.OutcomeTurnCompleted || len(launches) != 1 {
		t.Fatalf("second run: %+v %v (%d launches)", sum, err, len(launches))
	}
	if got := envOf(launches[0].Env, "CLAUDE_CONFIG_DIR"); got != s.configDir || launches[0].SessionID != before.Agent.AgentSessionID {
		t.Errorf("second run: CLAUDE_CONFIG_DIR=%q session %q", got, launches[0].SessionID)
	}
}

// TestLegacyIdleCodexThreadResumes: a Codex thread left idle by the earlier
// version, with agent.resolved.codex_home recorded, takes a new message: the
// recorded thread id is resumed with the recorded CODEX_HOME.
func TestLegacyIdleCodexThreadResumes(t *testing.T) {
	s := newLegacyState(t)
	const alias = "projects/p1/legacy-codex"
	s.install("codex-idle", alias)
	raw, _ := envelope.WithState(envelope.NewThread(s.work, codexType, "approval", alias), envelope.StateActive)
	s.srv.Put(alias, string(raw))
	before := s.thread(alias)
	now := filepath.Join(t.TempDir(), "codex-home-now")
	cfg := "agents:\n  codex:\n    executable: " + s.exe + "\n    codex_home: " + now + "\n"
	if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.srv.PersonPost(alias, "and now the docs")

	var launches []agent.Launch
	var checked []string
	ad := codex.Adapter
	ad.Preflight = func(_ context.Context, l agent.Launch) error {
		checked = append(checked, envOf(l.Env, "CODEX_HOME"))
		return nil
	}
	// The scripted test agent stands in for codex behind the Codex
	// descriptor: what is checked is what run hands to Start.
	script := agenttest.WriteScript(t, agenttest.Turn(agenttest.Step{Text: "docs written"}))
	ad.Start = func(ctx context.Context, l agent.Launch) (agent.Session, error) {
		launches = append(launches, l)
		l.Env = append(l.Env, agenttest.ScriptEnv+"="+script)
		return agenttest.Agent{}.Adapter().Start(ctx, l)
	}
	sum, err := s.runner(ad).Run(context.Background(), alias)
	if err != nil || sum.Outcome != run.OutcomeTurnCompleted || len(launches) != 1 {
		t.Fatalf("run: %+v %v (%d launches)", sum, err, len(launches))
	}
	l := launches[0]
	if !l.Resume || l.SessionID != before.Agent.AgentSessionID || l.Executable != s.exe {
		t.Errorf("launch resume %v session %q executable %q, want the recorded %q", l.Resume, l.SessionID, l.Executable, before.Agent.AgentSessionID)
	}
	if got := envOf(l.Env, "CODEX_HOME"); got != s.codexHome {
		t.Errorf("CODEX_HOME=%q, want the recorded %q", got, s.codexHome)
	}
	if !slices.Equal(checked, []string{s.codexHome}) {
		t.Errorf("the sandbox check ran with CODEX_HOME %q, want the recorded %q", checked, s.codexHome)
	}
	maxCounter := s.maxCounter("codex-idle", before.EmissionNonce)
	var texts []string
	for _, it := range s.srv.Items(alias) {
		var m struct {
			Type       string `json:"type"`
			EmissionID string `json:"emission_id"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type == "" {
			continue
		}
		if n, _ := strconv.Atoi(strings.TrimPrefix(m.EmissionID, before.EmissionNonce+":")); !strings.HasPrefix(m.EmissionID, before.EmissionNonce+":") || n <= maxCounter {
			t.Errorf("emission id %q does not go on from the recorded journal (nonce %s, up to %d)", m.EmissionID, before.EmissionNonce, maxCounter)
		}
		if m.Type == "text" {
			texts = append(texts, it.Content[0].Text)
		}
	}
	if !slices.Equal(texts, []string{"docs written"}) {
		t.Errorf("texts %q", texts)
	}
	after := s.thread(alias)
	if after.Turn.State != envelope.TurnStateIdle || after.Agent.AgentSessionID != before.Agent.AgentSessionID || after.Items.LastConsumed.ItemID == before.Items.LastConsumed.ItemID {
		t.Errorf("after: turn %q session %q last consumed %+v", after.Turn.State, after.Agent.AgentSessionID, after.Items.LastConsumed)
	}
}
