package acp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

const secret = "sk-secret-never-written-0123456789"

// TestPresetHomes: each preset writes its settings into the thread's home
// and derives its variables from it; the API key reaches the agent only in
// its environment, never a settings file or thread.log.
func TestPresetHomes(t *testing.T) {
	skipMinute(t)
	cache := filepath.Join(t.TempDir(), "shared-cache")
	for _, c := range []struct {
		typ   string
		model string
		env   []string
		opts  map[string]any
		check func(t *testing.T, home string, env map[string]string)
	}{
		{TypeGemini, "", []string{"GEMINI_API_KEY=" + secret}, nil, func(t *testing.T, home string, env map[string]string) {
			wantEnv(t, env, "GEMINI_CLI_HOME", home, "GEMINI_CLI_NO_RELAUNCH", "1", "TMPDIR", filepath.Join(home, "tmp"), "GEMINI_API_KEY", "(set)")
			var s struct {
				Model struct {
					Name string `json:"name"`
				} `json:"model"`
				General struct {
					SessionRetention struct {
						Enabled *bool `json:"enabled"`
					} `json:"sessionRetention"`
				} `json:"general"`
			}
			readJSON(t, filepath.Join(home, ".gemini", "settings.json"), &s)
			if s.Model.Name != geminiModel || s.General.SessionRetention.Enabled == nil || *s.General.SessionRetention.Enabled {
				t.Errorf("settings %+v", s)
			}
			if b, err := os.ReadFile(filepath.Join(home, ".gemini", "policies", "bhw-run.toml")); err != nil || !strings.Contains(string(b), `argsPattern = ".*"`) {
				t.Errorf("policy file %q, %v", b, err)
			}
		}},
		{TypeQwen, "fake-model", []string{"OPENAI_API_KEY=" + secret}, nil, func(t *testing.T, home string, env map[string]string) {
			wantEnv(t, env, "QWEN_HOME", home, "OPENAI_MODEL", "fake-model")
			var s struct {
				Model struct {
					Name string `json:"name"`
				} `json:"model"`
				Permissions struct {
					Ask []string `json:"ask"`
				} `json:"permissions"`
			}
			readJSON(t, filepath.Join(home, "settings.json"), &s)
			if s.Model.Name != "fake-model" || len(s.Permissions.Ask) == 0 {
				t.Errorf("settings %+v", s)
			}
		}},
		{TypeOpenCode, "fake/m", []string{"OPENAI_API_KEY=" + secret}, map[string]any{"provider": map[string]any{"fake": map[string]any{
			"options": map[string]any{"apiKey": "{env:OPENAI_API_KEY}"}}}}, func(t *testing.T, home string, env map[string]string) {
			wantEnv(t, env, "XDG_CONFIG_HOME", filepath.Join(home, "config"), "XDG_DATA_HOME", filepath.Join(home, "data"),
				"OPENCODE_DISABLE_PROJECT_CONFIG", "1", "OPENCODE_SERVER_PASSWORD", "(set)")
			var cfg struct {
				Model      string            `json:"model"`
				Permission map[string]string `json:"permission"`
				Enabled    []string          `json:"enabled_providers"`
			}
			if err := json.Unmarshal([]byte(env["OPENCODE_CONFIG_CONTENT"]), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Model != "fake/m" || cfg.Permission["edit"] != "ask" || cfg.Permission["bash"] != "ask" || cfg.Permission["task"] != "deny" || len(cfg.Enabled) != 1 {
				t.Errorf("config %+v", cfg)
			}
			if _, err := os.Stat(filepath.Join(home, "config", "opencode", "node_modules")); err != nil {
				t.Errorf("the plugin install is not seeded: %v", err)
			}
		}},
		{TypeCopilot, "gpt-4.1", []string{"COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:1/v1", "COPILOT_PROVIDER_API_KEY=" + secret},
			map[string]any{"cache_dir": cache}, func(t *testing.T, home string, env map[string]string) {
				wantEnv(t, env, "COPILOT_HOME", filepath.Join(home, "copilot"), "XDG_CACHE_HOME", cache, "COPILOT_OFFLINE", "true",
					"COPILOT_MODEL", "gpt-4.1", "COPILOT_AUTO_UPDATE", "false")
			}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			p := presetOf(t, c.typ)
			r := startFake(t, c.typ, agenttest.Turn(agenttest.Step{Text: "hi"}), func(l *agent.Launch) {
				l.Model = c.model
				l.Env = append(l.Env, c.env...)
				o, err := p.options(c.opts)
				if err != nil {
					t.Fatal(err)
				}
				l.Options = o
			})
			runTurn(t, r.s, "go", &agenttest.Recorder{})
			c.check(t, r.l.Home, r.agentEnv(t))
			if strings.Contains(r.log.String(), secret) {
				t.Error("the API key is in thread.log")
			}
			_ = filepath.WalkDir(r.l.Home, func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if b, _ := os.ReadFile(path); strings.Contains(string(b), secret) {
						t.Errorf("the API key is written in %s", path)
					}
				}
				return nil
			})
		})
	}
}

// TestCopilotCacheDefault: without cache_dir Copilot's runtime cache is the
// user's ~/.cache, shared by every thread, and COPILOT_OFFLINE is set only
// for a provider of the machine's own.
func TestCopilotCacheDefault(t *testing.T) {
	r := startFake(t, TypeCopilot, agenttest.Turn(agenttest.Step{Text: "hi"}), nil)
	env := r.agentEnv(t)
	wantEnv(t, env, "XDG_CACHE_HOME", filepath.Join(agent.EnvValue(r.l.Env, "HOME"), ".cache"))
	if _, set := env["COPILOT_OFFLINE"]; set {
		t.Errorf("COPILOT_OFFLINE is set without a provider: %v", env)
	}
}

func wantEnv(t *testing.T, env map[string]string, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		if env[kv[i]] != kv[i+1] {
			t.Errorf("%s=%q, want %q", kv[i], env[kv[i]], kv[i+1])
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestOptions: each preset's own keys are checked; an unknown one is
// refused naming it.
func TestOptions(t *testing.T) {
	for _, c := range []struct {
		typ  string
		raw  map[string]any
		want string
	}{
		{TypeGemini, map[string]any{"settings": 1}, `unknown key "settings"`},
		{TypeCopilot, map[string]any{"cache_dir": "relative"}, "absolute path"},
		{TypeOpenCode, map[string]any{"providers": 1}, `unknown key "providers"`},
		{TypeGeneric, map[string]any{"args": []string{"x"}}, `unknown key "args"`},
	} {
		if _, err := presetOf(t, c.typ).options(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.typ, c.raw, err, c.want)
		}
	}
	if _, err := presetOf(t, TypeCopilot).options(map[string]any{"cache_dir": "/abs"}); err != nil {
		t.Error(err)
	}
}

// TestWaitMinute: a load in the UTC minute the session was created in
// waits for the minute to turn, and no longer; a cancelled context ends
// the wait.
func TestWaitMinute(t *testing.T) {
	saved := now
	t.Cleanup(func() { now = saved })
	created := time.Date(2026, 12, 1, 10, 30, 5, 0, time.UTC)
	now = func() time.Time { return created.Add(54*time.Second + 800*time.Millisecond) } // 200 ms before 10:31
	t0 := time.Now()
	if err := waitMinute(context.Background(), agent.Launch{}, created); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 150*time.Millisecond || d > 30*time.Second {
		t.Errorf("waited %s, want about 200 ms", d)
	}
	now = func() time.Time { return created.Add(time.Minute) }
	t0 = time.Now()
	if err := waitMinute(context.Background(), agent.Launch{}, created); err != nil || time.Since(t0) > 2*time.Second {
		t.Errorf("a later minute waited %s (%v)", time.Since(t0), err)
	}
	now = func() time.Time { return created }
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := waitMinute(ctx, agent.Launch{}, created); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled wait: %v", err)
	}
}

// TestGeminiResumeWaitsForTheMinute: the creation time is recorded in the
// home at session/new, and a resume read in that minute waits before it
// loads.
func TestGeminiResumeWaitsForTheMinute(t *testing.T) {
	script := agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}}}}
	first := startFake(t, TypeGemini, script, nil)
	id := first.s.SessionID()
	created := sessionCreated(first.l.CacheDir, id)
	if created.IsZero() || time.Since(created) > time.Minute {
		t.Fatalf("recorded creation %v", created)
	}
	closeNow(t, first.s)
	saved := now
	t.Cleanup(func() { now = saved })
	// 300 ms before the minute of the creation ends.
	now = func() time.Time { return created.Truncate(time.Minute).Add(time.Minute - 300*time.Millisecond) }
	t0 := time.Now()
	second := startFake(t, TypeGemini, script, func(l *agent.Launch) {
		l.Home, l.CacheDir, l.SessionID, l.Resume = first.l.Home, first.l.CacheDir, id, true
	})
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Errorf("the resume started after %s, before the minute turned", d)
	}
	if !strings.Contains(strings.Join(second.lines(agent.StreamAdapter), "\n"), "waiting") {
		t.Error("thread.log does not say the resume waited")
	}
}

// TestDescribe: policy explain names ACP calls by their kind.
func TestDescribe(t *testing.T) {
	c := describe(policy.EffectExec, policy.Target{Command: "rm -rf build", Cwd: "/w"})
	if c.Tool != "execute" || c.Brief() != "execute → rm -rf build" || !strings.Contains(string(c.Input), `"title":"rm -rf build"`) {
		t.Errorf("exec %+v %s", c, c.Input)
	}
	if c := describe(policy.EffectWrite, policy.Target{Paths: []string{"/w/x"}}); c.Tool != "edit" || c.Brief() != "edit → /w/x" {
		t.Errorf("write %+v", c)
	}
	for _, a := range acptest.Agents {
		if ad := Adapter(a.Type); ad.Describe == nil || !ad.ThreadHome || ad.HostSessionID {
			t.Errorf("%s: %+v", a.Type, ad)
		}
	}
}

// TestUpdateKind: the kind of an update is found without decoding it, and
// a text that does not show it plainly is left to the decoder.
func TestUpdateKind(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind string
		ok   bool
	}{
		{`{"sessionId":"s","update":{"_meta":{"x":[1,2]},"sessionUpdate":"available_commands_update"}}`, "available_commands_update", true},
		{`{"update":{"sessionUpdate" : "tool_call","toolCallId":"a"}}`, "tool_call", true},
		{`{"update":{"sessionUpdate":"a\"b"}}`, "", false},
		{`{"update":{"sessionUpdate":"x","content":{"sessionUpdate":"y"}}}`, "", false},
		{`{"update":{}}`, "", false},
	} {
		if k, ok := updateKind([]byte(c.in)); k != c.kind || ok != c.ok {
			t.Errorf("%s: %q %v", c.in, k, ok)
		}
	}
}
