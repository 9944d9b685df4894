package run

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// walk maps every file and folder under dir, by its path relative to
// dir, to what of makes of it (p is its path as walked).
func walk[V any](t *testing.T, dir string, of func(p string, info fs.FileInfo) V) map[string]V {
	t.Helper()
	out := map[string]V{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = of(p, info)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tree lists every file and folder under dir with its size, so two
// listings differ when anything was created, removed or rewritten.
func tree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	return walk(t, dir, func(_ string, info fs.FileInfo) int64 {
		if info.IsDir() {
			return -1
		}
		return info.Size()
	})
}

func sameTree(t *testing.T, before, after map[string]int64, ignore ...string) {
	t.Helper()
	for p, s := range after {
		if slices.Contains(ignore, p) {
			continue
		}
		if b, ok := before[p]; !ok || b != s {
			t.Errorf("%s was created or changed (size %d, before %d, existed %v)", p, s, b, ok)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok && !slices.Contains(ignore, p) {
			t.Errorf("%s was removed", p)
		}
	}
}

func wantCode(t testing.TB, sum *Summary, exitCode int, code string) {
	t.Helper()
	if sum.ExitCode != exitCode || sum.Error == nil || sum.Error.Code != code {
		t.Fatalf("exit %d error %+v (outcome %q), want exit %d code %s", sum.ExitCode, sum.Error, sum.Outcome, exitCode, code)
	}
}

// TestBadAlias: a bad alias exits 64 INVALID_ALIAS before anything touches
// disk or network.
func TestBadAlias(t *testing.T) {
	h := newHarness(t, false)
	bad := map[string]string{
		"dotdot":            "../x",
		"dotdot inside":     "a/../../x",
		"dot":               "a/./b",
		"empty segment":     "a//b",
		"trailing slash":    "a/",
		"reserved yaml":     "a/thread.yaml",
		"reserved journal":  "a/emissions.jsonl",
		"reserved lock":     "thread.lock",
		"reserved log":      "x/thread.log/y",
		"reserved home":     "a/agent-home",
		"nul":               "a\x00b",
		"control char":      "a\x1bb",
		"newline":           "a\nb",
		"del":               "a\x7f",
		"leading dash":      "-x",
		"leading dash flag": "--help",
		"absolute":          "/abs",
		"empty":             "",
		"10 KB":             strings.Repeat("a", 10<<10),
		"256-byte segment":  "a/" + strings.Repeat("s", 256),
		"not utf-8":         "a\xff",
	}
	for name, alias := range bad {
		t.Run(name, func(t *testing.T) {
			if err := setup.ValidateAlias(alias); err == nil {
				t.Fatalf("setup.ValidateAlias(%q) accepted it", alias)
			}
			before := tree(t, h.state)
			h.srv.ResetCounts()
			sum := h.run(alias)
			wantCode(t, sum, exit.Usage, exit.CodeBadAlias)
			if !strings.Contains(sum.Error.Message, "alias") {
				t.Errorf("message %q does not name the rule", sum.Error.Message)
			}
			sameTree(t, before, tree(t, h.state))
			if n, cmds := h.srv.Requests(); n != 0 {
				t.Errorf("%d requests for a bad alias: %v", n, cmds)
			}
		})
	}
	// The longest valid alias and segment are accepted.
	for _, ok := range []string{strings.Repeat("s", 255), strings.Repeat("a/", 255) + "b", "projects/p1/items/i1/runs/3/thread", "a.b/..c/thread.yaml.bak"} {
		if err := setup.ValidateAlias(ok); err != nil {
			t.Errorf("setup.ValidateAlias(%q): %v", ok, err)
		}
	}
}

// resolveErr runs setup.Resolve and returns its coded error.
func resolveErr(t *testing.T, o setup.Options, alias string) *exit.Error {
	t.Helper()
	_, err := setup.Resolve(o, alias)
	var ee *exit.Error
	if !errors.As(err, &ee) {
		t.Fatalf("setup.Resolve error %v, want an *exit.Error", err)
	}
	return ee
}

func writeFile(t testing.TB, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestBadCredentialsAndConfig: credentials and config.yaml errors exit 78
// with their codes.
func TestBadCredentialsAndConfig(t *testing.T) {
	section := func(name, prefix, ses string) string {
		return "  - name: " + name + "\n    job_type: session_agent_harness\n    session: {org_id: org_1, blob_id: blb_1, revision_id: rev_1, session_id: " + ses + "}\n    session_prefix: \"" + prefix + "\"\n"
	}
	tests := []struct {
		name   string
		creds  string
		mode   os.FileMode
		config string
		o      setup.Options
		alias  string
		code   string
		msg    string
	}{
		{name: "credentials 0644", creds: "default: p\nprofiles:\n  p: {api_key: bhk_x, api_url: https://api.example.test/v1}\n", mode: 0o644, code: exit.CodeInsecureCredentials, msg: "chmod 600"},
		{name: "credentials 0640", creds: "profiles: {}\n", mode: 0o640, code: exit.CodeInsecureCredentials},
		{name: "credentials not YAML", creds: "profiles: [\n", mode: 0o600, code: exit.CodeInvalidConfig},
		{name: "https without a key", o: setup.Options{APIURL: "https://api.example.test/v1"}, code: exit.CodeCredentialsNotFound, msg: "BLOBHUB_API_KEY"},
		{name: "default url without a key", code: exit.CodeCredentialsNotFound},
		{name: "unknown profile", o: setup.Options{Profile: "nope", APIKey: "bhk_x"}, code: exit.CodeCredentialsNotFound},
		{name: "profile name with a slash", creds: "default: ../x\n", mode: 0o600, o: setup.Options{APIKey: "bhk_x"}, code: exit.CodeInvalidConfig},
		{name: "bad url scheme", o: setup.Options{APIURL: "ftp://x", APIKey: "k"}, code: exit.CodeInvalidConfig},
		{name: "relative file url", o: setup.Options{APIURL: "file://rel/dir"}, code: exit.CodeInvalidConfig},
		{name: "unknown config key", config: "bogus: 1\n", code: exit.CodeInvalidConfig, msg: "bogus"},
		{name: "unknown nested key", config: "agents:\n  test_agent:\n    exe: claude\n", code: exit.CodeInvalidConfig, msg: `unknown key "exe"; the keys are args, budget, confine, debug, effort, env, executable, executables, extra_args, home, model, permissions, turn_retries, wait`},
		{name: "negative budget ceiling", config: "agents:\n  test_agent:\n    budget: {max_turns: -2}\n", code: exit.CodeInvalidConfig, msg: "agents.test_agent.budget.max_turns"},
		{name: "budget ceiling not a number", config: "agents:\n  test_agent:\n    budget: {max_cost_usd: lots}\n", code: exit.CodeInvalidConfig},
		{name: "unknown agent type", config: "agents:\n  gemini_cli: {}\n", code: exit.CodeInvalidConfig, msg: "agents.gemini_cli: no such agent type; use test_agent or test_host_agent"},
		{name: "adapter's own key invalid", config: "agents:\n  test_agent:\n    args: [\"a\\tb\"]\n", code: exit.CodeInvalidConfig, msg: `agents.test_agent: args: "a\tb" holds a control character`},
		{name: "home not a path", config: "agents:\n  test_agent:\n    home: [a, b]\n", code: exit.CodeInvalidConfig, msg: "agents.test_agent.home"},
		{name: "wrong type", config: "concurrency:\n  max_agents: many\n", code: exit.CodeInvalidConfig},
		{name: "not YAML", config: "agents: [\n", code: exit.CodeInvalidConfig},
		{name: "negative max_agents", config: "concurrency: {max_agents: -1}\n", code: exit.CodeInvalidConfig},
		{name: "relative root", config: "workspace: {roots: [rel]}\n", code: exit.CodeInvalidConfig},
		{name: "bad machine rule", config: "policy:\n  rules: [{effect: fly, decision: allow}]\n", code: exit.CodeInvalidConfig},
		{name: "machine rule key misspelt", config: "policy:\n  rules:\n    - {id: a, effect: exec, action: deny, comand: [x]}\n", code: exit.CodeInvalidConfig, msg: `policy rule "a" (line 3): unknown key "comand"; a rule's keys are id, effect, action, command, outside`},
		{name: "machine rule outside misspelt", config: "policy:\n  rules:\n    - {id: b, effect: write, action: deny, outside: work-folder}\n", code: exit.CodeInvalidConfig, msg: `policy rule "b": outside "work-folder" is invalid; write work_folder or outbox`},
		{name: "held_waits_max below 1", config: "concurrency:\n  held_waits_max: 0\n", code: exit.CodeInvalidConfig, msg: "concurrency.held_waits_max 0 is invalid"},
		{name: "job_type other", config: "sections:\n  - name: s\n    job_type: other\n    session: {org_id: o, blob_id: b, revision_id: r, session_id: s}\n", code: exit.CodeUnknownJobType},
		{name: "missing session keys", config: "sections:\n  - name: s\n    session: {revision_id: r, session_id: s}\n", code: exit.CodeMissingSessionKeys, msg: "blob_id, org_id"},
		{name: "duplicate section", config: "sections:\n" + section("a", "p/", "ses_1") + section("b", "p/", "ses_1"), code: exit.CodeDuplicateSectionTarget},
		{name: "overlapping prefixes", config: "sections:\n" + section("a", "p/", "ses_1") + section("b", "p/q/", "ses_1"), code: exit.CodeOverlappingPrefix, msg: `"p/" and "p/q/"`},
		{name: "the whole session beside a prefix", config: "sections:\n" + section("a", "", "ses_1") + section("b", "p/", "ses_1"), code: exit.CodeOverlappingPrefix},
		{name: "prefix tie", config: "sections:\n" + section("a", "p/", "ses_1") + section("b", "p/", "ses_2"), alias: "p/t", code: exit.CodeInvalidConfig, msg: "--section"},
		{name: "no section owns the alias", config: "sections:\n" + section("a", "p/", "ses_1") + section("b", "q/", "ses_2"), alias: "r/t", code: exit.CodeInvalidConfig, msg: `"r/t"`},
		{name: "unknown --section", config: "sections:\n" + section("a", "p/", "ses_1"), o: setup.Options{Section: "zz"}, code: exit.CodeInvalidConfig},
		{name: "no session at all", alias: "t", code: exit.CodeInvalidConfig, msg: "--revision"},
		{name: "explicit config missing", o: setup.Options{ConfigPath: "/nonexistent/config.yaml"}, code: exit.CodeInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			home, state := t.TempDir(), t.TempDir()
			if tc.creds != "" {
				writeFile(t, setup.CredentialsPath(home), tc.creds, tc.mode)
			}
			o := tc.o
			o.Home, o.StateDir, o.Adapters = home, state, testAdapters()
			if o.APIURL == "" && o.APIKey == "" && tc.code != exit.CodeCredentialsNotFound {
				o.APIURL, o.APIKey = "http://127.0.0.1:1/v1", "bhk_test"
			}
			if tc.config != "" {
				o.ConfigPath = filepath.Join(state, "config.yaml")
				writeFile(t, o.ConfigPath, tc.config, 0o600)
			}
			before := tree(t, state)
			ee := resolveErr(t, o, tc.alias)
			if ee.Exit != exit.Config || ee.Code != tc.code {
				t.Fatalf("exit %d code %s (%s), want 78 %s", ee.Exit, ee.Code, ee.Message, tc.code)
			}
			if tc.msg != "" && !strings.Contains(ee.Message, tc.msg) {
				t.Fatalf("message %q does not say %q", ee.Message, tc.msg)
			}
			if strings.Contains(ee.Message, "bhk_x") {
				t.Fatal("the message shows the key")
			}
			sameTree(t, before, tree(t, state))
		})
	}
}

// TestSectionChoice: the longest session_prefix wins; --section overrides.
func TestSectionChoice(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	writeFile(t, setup.CredentialsPath(home), "default: p\nprofiles:\n  p: {key: bhk_x, url: https://api.example.test/v1}\n", 0o600)
	cfg := filepath.Join(state, "config.yaml")
	writeFile(t, cfg, `sections:
  - name: all
    session: {org_id: o, blob_id: b, revision_id: rev_1, session_id: ses_all}
  - name: projects
    session: {org_id: o, blob_id: b, revision_id: rev_1, session_id: ses_proj, session_prefix: "projects/"}
  - name: p1
    session: {org_id: o, blob_id: b, revision_id: rev_1, session_id: ses_p1}
    session_prefix: "projects/p1/"
`, 0o600)
	// A prefixed section's folder is the worker's: the prefix's slug and
	// the first 8 hex digits of its SHA-256 after the session.
	folderOf := map[string]string{"all": "ses_all", "projects": "ses_proj-projects-58b26a88", "p1": "ses_p1-projects_p1-15867fed"}
	for alias, want := range map[string]string{"projects/p1/t": "p1", "projects/p2/t": "projects", "projects/p1": "projects"} {
		s, err := setup.Resolve(setup.Options{Home: home, StateDir: state, ConfigPath: cfg}, alias)
		if err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		if s.Section.Name != want {
			t.Errorf("%s: section %s, want %s", alias, s.Section.Name, want)
		}
		if s.APIKey != "bhk_x" || s.APIURL != "https://api.example.test/v1" || s.StateName != "p" {
			t.Errorf("credentials resolved to %q %q %q", s.APIKey, s.APIURL, s.StateName)
		}
		if wantDir := filepath.Join(state, "jobs", "session_agent_harness-"+folderOf[want]); s.JobDir != wantDir {
			t.Errorf("%s: job dir %s, want %s", alias, s.JobDir, wantDir)
		}
	}
	// Several sections and no prefix match: an error naming the alias.
	ee := resolveErr(t, setup.Options{Home: home, StateDir: state, ConfigPath: cfg}, "other/t")
	if ee.Code != exit.CodeInvalidConfig || !strings.Contains(ee.Message, "other/t") {
		t.Fatalf("%s %s", ee.Code, ee.Message)
	}
	s, err := setup.Resolve(setup.Options{Home: home, StateDir: state, ConfigPath: cfg, Section: "all"}, "projects/p1/t")
	if err != nil || s.Section.Name != "all" {
		t.Fatalf("--section: %v %+v", err, s)
	}
}

// envelopeWith is a pending claude thread on work whose metadata mod edits.
func envelopeWith(work string, mod func(md map[string]any)) string {
	var v map[string]any
	_ = json.Unmarshal(envelope.NewThread(work, testAgent, "approval", "t"), &v)
	md := v["thread"].(map[string]any)["metadata"].(map[string]any)
	if mod != nil {
		mod(md)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// putRaw stores value as alias's object even when BlobHub would refuse it
// (not a JSON object, no type), by rewriting the store's object file.
func (h *harness) putRaw(alias, value string) {
	h.t.Helper()
	h.srv.Put(alias, `{"type":"placeholder"}`)
	files, _ := filepath.Glob(filepath.Join(h.srv.Dir(), "sessions", "*", "objects", "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		var o struct {
			Alias     string          `json:"alias"`
			UpdatedAt string          `json:"updated_at"`
			Value     json.RawMessage `json:"value"`
		}
		if json.Unmarshal(b, &o) != nil || o.Alias != alias {
			continue
		}
		o.Value = json.RawMessage(value)
		b, err = json.Marshal(o)
		if err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o600); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	h.t.Fatalf("no object file for %q", alias)
}

func (h *harness) editConfig(old, new string) {
	h.t.Helper()
	b, err := os.ReadFile(h.config)
	if err != nil {
		h.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		h.t.Fatalf("config has no %q", old)
	}
	if err := os.WriteFile(h.config, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// emissionCounts groups a thread's items by metadata.emission_id.
func (h *harness) emissionCounts(alias string) map[string]int {
	out := map[string]int{}
	for _, it := range h.srv.Items(alias) {
		var m struct {
			EmissionID string `json:"emission_id"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.EmissionID != "" {
			out[m.EmissionID]++
		}
	}
	return out
}

// noneTwice fails if an emission was posted more than once.
func (h *harness) noneTwice(aliases ...string) {
	h.t.Helper()
	for _, alias := range aliases {
		for id, n := range h.emissionCounts(alias) {
			if n != 1 {
				h.t.Errorf("%s: emission %s posted %d times", alias, id, n)
			}
		}
	}
}

// journalOpen is how many emissions of alias's journal are not confirmed.
func (h *harness) journalOpen(alias string) int {
	h.t.Helper()
	th := h.thread(alias)
	j, err := openJournal(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "emissions.jsonl"), th.EmissionNonce)
	if err != nil {
		h.t.Fatal(err)
	}
	defer j.closeFile()
	return len(j.pending())
}

// wantThreadFailed checks a thread failure was written everywhere, once.
func (h *harness) wantThreadFailed(alias, code string) {
	h.t.Helper()
	if got := h.wireState(alias); got != envelope.StateFailed {
		h.t.Errorf("wire state %q, want failed", got)
	}
	th := h.thread(alias)
	if th.Agent.State != envelope.StateFailed || !th.Agent.FailedOnWire {
		h.t.Errorf("local state %q failed_on_wire %v, want failed true", th.Agent.State, th.Agent.FailedOnWire)
	}
	if got, _, ok := th.Agent.Error.Get(); !ok || got != code {
		h.t.Errorf("local error %q, want %s", got, code)
	}
	n := 0
	for _, it := range h.srv.Items("worker") {
		var m struct {
			Type   string `json:"type"`
			Thread struct {
				Alias string `json:"alias"`
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			} `json:"thread"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type == agent.ItemThreadFailed && m.Thread.Alias == alias {
			n++
			if m.Thread.Error.Code != code {
				h.t.Errorf("thread_failed says %s, want %s", m.Thread.Error.Code, code)
			}
		}
	}
	if n != 1 {
		h.t.Errorf("%d thread_failed items for %s on worker, want 1", n, alias)
	}
	h.wantFailureReason(alias, code)
	h.noneTwice(alias, "worker")
	if open := h.journalOpen(alias); open != 0 {
		h.t.Errorf("%d emissions left unconfirmed", open)
	}
}

// TestBadEnvelope: a job thread whose envelope fails the checklist becomes
// failed with the step's code, reported once on worker, and the agent is
// never started.
func TestBadEnvelope(t *testing.T) {
	type tc struct {
		name  string
		value func(h *harness) string
		edit  func(h *harness)
		code  string
	}
	set := func(path string, v any) func(md map[string]any) {
		return func(md map[string]any) {
			keys := strings.Split(path, ".")
			m := md
			for _, k := range keys[:len(keys)-1] {
				if _, ok := m[k].(map[string]any); !ok {
					m[k] = map[string]any{}
				}
				m = m[k].(map[string]any)
			}
			if v == nil {
				delete(m, keys[len(keys)-1])
				return
			}
			m[keys[len(keys)-1]] = v
		}
	}
	env := func(mods ...func(md map[string]any)) func(h *harness) string {
		return func(h *harness) string {
			return envelopeWith(h.work, func(md map[string]any) {
				for _, m := range mods {
					m(md)
				}
			})
		}
	}
	outside := t.TempDir()
	tests := []tc{
		{"work_folder a number", env(set("workspace.work_folder", 42)), nil, exit.CodeWorkFolderNotAbsolute},
		{"workspace a string", env(func(md map[string]any) { md["workspace"] = "/tmp" }), nil, exit.CodeWorkFolderNotAbsolute},
		{"work_folder missing", env(set("workspace.work_folder", nil)), nil, exit.CodeWorkFolderNotAbsolute},
		{"work_folder relative", env(set("workspace.work_folder", "rel/dir")), nil, exit.CodeWorkFolderNotAbsolute},
		{"work_folder nonexistent", env(set("workspace.work_folder", "/nonexistent/bhw-run/checkout")), nil, exit.CodeWorkFolderNotFound},
		{"work_folder a file", func(h *harness) string {
			p := filepath.Join(h.work, "file")
			writeFile(h.t, p, "x", 0o600)
			return envelopeWith(p, nil)
		}, nil, exit.CodeWorkFolderNotADir},
		{"work_folder contains the state tree", func(h *harness) string {
			return envelopeWith(filepath.Dir(h.state), nil)
		}, nil, exit.CodeWorkFolderNotAllowed},
		{"work_folder is the state tree", func(h *harness) string { return envelopeWith(h.state, nil) }, nil, exit.CodeWorkFolderNotAllowed},
		{"work_folder contains the store", func(h *harness) string { return envelopeWith(filepath.Dir(h.srv.Dir()), nil) }, nil, exit.CodeWorkFolderNotAllowed},
		{"work_folder inside the store", func(h *harness) string { return envelopeWith(h.srv.Dir(), nil) }, nil, exit.CodeWorkFolderNotAllowed},
		{"work_folder outside roots", env(), func(h *harness) { h.editConfig("policy:", "workspace:\n  roots: ["+outside+"]\npolicy:") }, exit.CodeWorkFolderNotAllowed},
		{"agent a string", env(func(md map[string]any) { md["agent"] = "claude_code" }), nil, exit.CodeAgentTypeUnsupported},
		{"agent type unknown", env(set("agent.type", "gpt")), nil, exit.CodeAgentTypeUnsupported},
		{"agent type antigravity", env(set("agent.type", "antigravity")), nil, exit.CodeAgentTypeUnsupported},
		{"agent type a number", env(set("agent.type", 7)), nil, exit.CodeAgentTypeUnsupported},
		{"posture unknown", env(set("agent.permissions", "yolo")), nil, exit.CodePermissionsUnsupported},
		{"posture a number", env(set("agent.permissions", 1)), nil, exit.CodePermissionsUnsupported},
		{"autonomous forbidden", env(set("agent.permissions", "autonomous")), func(h *harness) { h.editConfig("allow_autonomous: true", "allow_autonomous: false") }, exit.CodeAutonomousForbidden},
		{"guarded without policy", env(set("agent.permissions", "guarded")), nil, exit.CodePolicyMissing},
		{"policy unknown effect", env(set("agent.permissions", "guarded"), set("policy", map[string]any{"rules": []any{map[string]any{"effect": "fly", "decision": "allow"}}})), nil, exit.CodePolicyInvalid},
		{"policy unknown field", env(set("policy", map[string]any{"default": "ask", "mode": "x"})), nil, exit.CodePolicyInvalid},
		{"policy bad default", env(set("agent.permissions", "guarded"), set("policy", map[string]any{"default": "maybe"})), nil, exit.CodePolicyInvalid},
		{"policy outside misspelt", env(set("policy", map[string]any{"rules": []any{map[string]any{"id": "x", "effect": "write", "outside": "work-folder", "action": "deny"}}})), nil, exit.CodePolicyInvalid},
		{"policy outside outbox on an allow", env(set("agent.permissions", "guarded"), set("policy", map[string]any{"rules": []any{map[string]any{"id": "x", "effect": "write", "outside": "outbox"}}})), nil, exit.CodePolicyInvalid},
		{"policy command a string beside action", env(set("policy", map[string]any{"rules": []any{map[string]any{"id": "x", "effect": "exec", "command": 3, "action": "deny"}}})), nil, exit.CodePolicyInvalid},
		{"guarded with an empty policy", env(set("agent.permissions", "guarded"), set("policy", map[string]any{})), nil, exit.CodePolicyMissing},
		{"policy a string", env(set("policy", "allow everything")), nil, exit.CodePolicyInvalid},
		{"executable not allowed", env(set("agent.executable", "/bin/sh")), nil, exit.CodeExecutableNotAllowed},
		{"model starting with -", env(set("agent.model", "--dangerously-skip-permissions")), nil, agent.CodeAgentSpawnFailed},
		// A wrongly typed field fails with its own code; it never falls back
		// to the default (the machine's executable, model or effort).
		{"executable a list", env(set("agent.executable", []any{"/bin/sh"})), nil, exit.CodeExecutableNotAllowed},
		{"executable a number", env(set("agent.executable", 1)), nil, exit.CodeExecutableNotAllowed},
		{"model a list", env(set("agent.model", []any{"opus"})), nil, agent.CodeAgentSpawnFailed},
		{"model a number", env(set("agent.model", 4)), nil, agent.CodeAgentSpawnFailed},
		{"effort a mapping", env(set("agent.effort", map[string]any{"level": "high"})), nil, agent.CodeAgentSpawnFailed},
		{"effort true", env(set("agent.effort", true)), nil, agent.CodeAgentSpawnFailed},
		// An artifacts block that is no mapping is blobhub-worker's form
		// unusable: warned, and the thread runs (TestPublishBlockUnusable).
		{"artifacts dot", env(set("artifacts.source", ".")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts dotdot", env(set("artifacts.source", "../x")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts unclean", env(set("artifacts.source", "a/../b")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts .git", env(set("artifacts.source", ".git/x")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts absolute", env(set("artifacts.source", "/abs/outbox")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts empty", env(set("artifacts.source", "")), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts a number", env(set("artifacts.source", 3)), nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts symlink out", func(h *harness) string {
			if err := os.Symlink(outside, filepath.Join(h.work, "out")); err != nil {
				h.t.Fatal(err)
			}
			return envelopeWith(h.work, set("artifacts.source", "out/box"))
		}, nil, exit.CodeArtifactsSourceInvalid},
		{"artifacts symlink into .git", func(h *harness) string {
			if err := os.MkdirAll(filepath.Join(h.work, ".git", "hooks"), 0o700); err != nil {
				h.t.Fatal(err)
			}
			if err := os.Symlink(".git/hooks", filepath.Join(h.work, "box")); err != nil {
				h.t.Fatal(err)
			}
			return envelopeWith(h.work, set("artifacts.source", "box"))
		}, nil, exit.CodeArtifactsSourceInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The store is a forbidden folder only when the runner uses it
			// as file://.
			h := newHarness(t, strings.Contains(tc.name, "the store"))
			const alias = "bad/t"
			h.srv.Put(alias, tc.value(h))
			h.srv.PersonPost(alias, "please start")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "the agent ran"}}}})
			if tc.edit != nil {
				tc.edit(h)
			}
			sum := h.run(alias)
			want(t, sum, OutcomeFailed, exit.Failed)
			wantCode(t, sum, exit.Failed, tc.code)
			h.wantThreadFailed(alias, tc.code)
			th := h.thread(alias)
			if th.Agent.AgentSessionID != "" || th.Agent.Process != nil || slices.Contains(h.items(alias), "text") {
				t.Fatal("the agent was started")
			}
			if len(th.Items.PendingInbound) != 1 {
				t.Fatalf("the person's message was lost: pending_inbound %v", th.Items.PendingInbound)
			}
			// The next run changes nothing and posts nothing twice.
			want(t, h.run(alias), OutcomeIdle, exit.OK)
			h.wantThreadFailed(alias, tc.code)
			// A failed artifacts check created no outbox.
			if _, err := os.Lstat(filepath.Join(outside, "box")); err == nil {
				t.Fatal("an outbox was created outside the work folder")
			}
		})
	}
}

// TestNotAJob: an object that is not a job thread exits 65 and is cached
// in not_mine.yaml — except an object of type thread, which is never cached
// (it may become a job any time); a value that is not a JSON
// object likewise; a missing thread exits 66. Nothing is written to the
// thread.
func TestNotAJob(t *testing.T) {
	type testCase struct{ name, value string }
	var cases []testCase
	for name, value := range map[string]string{
		"a note":                  `{"type":"note","note":{"text":"hi"}}`,
		"a thread without agent":  `{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":"/tmp"}}}}`,
		"a JSON string":           `"just text"`,
		"a JSON array":            `[1,2,3]`,
		"type a number":           `{"type":7,"thread":{"metadata":{"agent":{"type":"claude_code"}}}}`,
		"metadata a list":         `{"type":"thread","thread":{"metadata":[1]}}`,
		"instance a string":       `{"type":"thread","thread":{"metadata":{"instance":"pending"}}}`,
		"thread a string":         `{"type":"thread","thread":"x"}`,
		"artifact we might write": `{"type":"artifact","artifact":{"name":"r.md"}}`,
	} {
		cases = append(cases, testCase{name, value})
	}
	for _, tc := range cases {
		name, value := tc.name, tc.value
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "notjob/x"
			h.putRaw(alias, value)
			sum := h.run(alias)
			wantCode(t, sum, exit.NotJob, exit.CodeNotJob)
			b, err := os.ReadFile(filepath.Join(h.setup().JobDir, "not_mine.yaml"))
			isThread := strings.HasPrefix(value, `{"type":"thread"`)
			switch cached := err == nil && strings.Contains(string(b), alias); {
			case isThread && cached:
				t.Fatalf("an object of type thread was cached in not_mine.yaml: %s", b)
			case !isThread && !cached:
				t.Fatalf("not_mine.yaml does not cache %q: %v %s", alias, err, b)
			}
			if _, err := os.Stat(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml")); err == nil {
				t.Fatal("thread.yaml written for a non-job")
			}
			if o, _ := h.srv.Get(alias); string(o.Value) != value && !jsonEqual(o.Value, []byte(value)) {
				t.Fatalf("the object changed: %s", o.Value)
			}
			if n := len(h.srv.Items(alias)) + len(h.srv.Items("worker")); n != 0 {
				t.Fatalf("%d items posted", n)
			}
		})
	}
	t.Run("no such thread", func(t *testing.T) {
		h := newHarness(t, false)
		h.srv.Put("other", `{"type":"note"}`)
		sum := h.run("nothing/here")
		wantCode(t, sum, exit.NoThread, exit.CodeNoThread)
		if !strings.Contains(sum.Error.Message, "thread new") {
			t.Fatalf("message %q says nothing to do", sum.Error.Message)
		}
	})
}

// TestAgentNotInstalled: a missing executable is the machine's fault: exit
// 78, the thread stays pending and nothing is posted.
func TestAgentNotInstalled(t *testing.T) {
	h := newHarness(t, false)
	exe, _ := os.Executable()
	h.editConfig("executable: "+exe, "executable: /nonexistent/bin/claude")
	const alias = "noexe/t"
	h.handOff(alias, "approval", "start")
	sum := h.run(alias)
	wantCode(t, sum, exit.Config, exit.CodeAgentNotInstalled)
	if !strings.Contains(sum.Error.Message, "stays pending") {
		t.Errorf("message %q", sum.Error.Message)
	}
	if got := h.wireState(alias); got != envelope.StatePending {
		t.Fatalf("wire %q, want pending", got)
	}
	if th := h.thread(alias); th.Agent.State == envelope.StateFailed || th.Agent.State == envelope.StateActive {
		t.Fatalf("local state %q", th.Agent.State)
	}
	if n := len(h.srv.Items("worker")); n != 0 {
		t.Fatalf("%d worker items", n)
	}
	// Installed again: the same message is delivered.
	h.editConfig("executable: /nonexistent/bin/claude", "executable: "+exe)
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if ids := h.thread(alias).Turn.InboundIDs; len(ids) != 1 {
		t.Fatalf("inbound %v", ids)
	}
}

// TestThreadLocked: a second run of a locked alias exits 75 naming the
// holder, and writes nothing.
func TestThreadLocked(t *testing.T) {
	h := newHarness(t, false)
	const alias = "locked/t"
	h.firstTurn(alias, "start", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	h.srv.PersonPost(alias, "more")

	dir := setup.ThreadDir(h.setup().JobDir, alias)
	lk, err := lock.Acquire(t.Context(), filepath.Join(dir, "thread.lock"), 0)
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, h.state)
	items := len(h.srv.Items(alias))
	h.srv.ResetCounts()
	sum := h.run(alias)
	wantCode(t, sum, exit.TempFail, exit.CodeLocked)
	if !strings.Contains(sum.Error.Message, "locked by pid") || !strings.Contains(sum.Error.Message, "--lock-wait") {
		t.Fatalf("message %q", sum.Error.Message)
	}
	if n, cmds := h.srv.Requests(); n != 0 {
		t.Fatalf("a locked run made %d requests: %v", n, cmds)
	}
	sameTree(t, before, tree(t, h.state), filepath.Join("jobs", "session_agent_harness-"+bhtest.SessionID, "logs", "section.log"))
	if len(h.srv.Items(alias)) != items {
		t.Fatal("a locked run posted")
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.noneTwice(alias)
}

// TestIdleRequests: an idle run makes exactly two requests (docs/run.md), also
// right after a turn, and needs no agent slot.
func TestIdleRequests(t *testing.T) {
	for _, local := range []bool{false} {
		h := newHarness(t, local)
		const alias = "idle/t"
		h.firstTurn(alias, "start", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})

		// Every slot taken: an idle run does not care.
		var slots []*lock.Slot
		for {
			s, err := lock.TrySlot(filepath.Join(h.state, "slots"), 4)
			if errors.Is(err, lock.ErrNoSlot) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, s)
		}
		for i := range 2 {
			h.srv.ResetCounts()
			want(t, h.run(alias), OutcomeIdle, exit.OK)
			if n, cmds := h.srv.Requests(); n != 2 {
				t.Fatalf("idle run %d made %d requests, want 2: %v", i, n, cmds)
			}
		}

		// A run that must spawn exits 75 and writes nothing.
		h.srv.PersonPost(alias, "more")
		th := h.thread(alias)
		items := len(h.srv.Items(alias))
		sum := h.run(alias)
		wantCode(t, sum, exit.TempFail, exit.CodeNoSlot)
		after := h.thread(alias)
		if after.Turn.State != th.Turn.State || after.Agent.State != th.Agent.State || after.Agent.AgentSessionID != th.Agent.AgentSessionID {
			t.Fatalf("thread.yaml changed: turn %q→%q agent %q→%q", th.Turn.State, after.Turn.State, th.Agent.State, after.Agent.State)
		}
		if len(h.srv.Items(alias)) != items {
			t.Fatal("a run without a slot posted")
		}
		if h.journalOpen(alias) != 0 {
			t.Fatal("a run without a slot journaled")
		}
		for _, s := range slots {
			_ = s.Release()
		}
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		if ids := h.thread(alias).Turn.InboundIDs; len(ids) != 1 {
			t.Fatalf("the message was not delivered once: %v", ids)
		}
		h.noneTwice(alias)
	}
}

// TestNoSlotPending: a pending thread with a message and no free slot exits
// 75 with nothing written: still pending on the wire, no thread.yaml.
func TestNoSlotPending(t *testing.T) {
	h := newHarness(t, false)
	h.cfg = "concurrency: {max_agents: 1}\n"
	h.writeConfig()
	const alias = "slot/t"
	h.handOff(alias, "approval", "start")
	s, err := lock.TrySlot(filepath.Join(h.state, "slots"), 1)
	if err != nil {
		t.Fatal(err)
	}
	sum := h.run(alias)
	wantCode(t, sum, exit.TempFail, exit.CodeNoSlot)
	if got := h.wireState(alias); got != envelope.StatePending {
		t.Fatalf("wire %q", got)
	}
	if th := h.thread(alias); th != nil {
		t.Fatalf("a run without a slot wrote thread.yaml (local state %q)", th.Agent.State)
	}
	_ = s.Release()
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if got := h.items(alias); !slices.Equal(got, []string{"person", "text", "turn_end"}) {
		t.Fatalf("items %v", got)
	}
}

// TestThreadLogUnusable: a thread folder whose logs/thread.log cannot be
// opened is a broken state tree (exit 78 STATE_INVALID naming the path),
// not a failed thread (exit 1 is "set to failed in this run").
func TestThreadLogUnusable(t *testing.T) {
	h := newHarness(t, false)
	const alias = "nolog/t"
	h.handOff(alias, "approval", "start")
	dir := setup.ThreadDir(h.setup().JobDir, alias)
	writeFile(t, filepath.Join(dir, "logs"), "not a folder", 0o600)
	sum := h.run(alias)
	wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
	if !strings.Contains(sum.Error.Message, filepath.Join(dir, "logs")) {
		t.Fatalf("message %q does not name the folder", sum.Error.Message)
	}
	if got := h.wireState(alias); got != envelope.StatePending {
		t.Fatalf("wire %q, want pending", got)
	}
}
