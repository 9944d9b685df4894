package acp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
)

// homeCtx is what a preset's home function gets: the thread's home, the
// launch and the preset's decoded options.
type homeCtx struct {
	dir  string
	l    agent.Launch
	opts any
}

// geminiModel is the model when none is configured: with the CLI's "auto"
// default every turn adds a routing request.
const geminiModel = "gemini-2.5-flash"

// geminiPolicy brings every shell command to the client: without a rule
// that has an argsPattern, the CLI runs the commands it deems read-only
// (cat, ls, echo, pwd, find, …) without asking.
const geminiPolicy = `[[rule]]
toolName = "run_shell_command"
argsPattern = ".*"
decision = "ask_user"
priority = 900
`

var gemini = &preset{
	typ: TypeGemini, executable: "gemini",
	// No --approval-mode, --skip-trust or --yolo: the folder stays
	// untrusted and the mode is default (asks).
	args: []string{"--acp"},
	// Its API key and endpoint; not GEMINI_* as a whole, which holds
	// GEMINI_CLI_TRUST_WORKSPACE and GEMINI_CLI_SYSTEM_SETTINGS_PATH.
	prefixes: []string{"GEMINI_API_KEY", "GEMINI_BASE_URL", "GOOGLE_"},
	homeDirs: []string{".gemini"},
	options:  noKeys,
	home: func(h homeCtx) ([]string, error) {
		model := h.l.Model
		if model == "" {
			model = geminiModel
		}
		settings := map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			// maxAttempts bounds the retries (10 with backoff up to 30 s by
			// default); the start-up cleanup of session retention deletes a
			// resumed session's file.
			"general": map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false,
				"maxAttempts": 2, "sessionRetention": map[string]any{"enabled": false}},
			"model": map[string]any{"name": model},
		}
		if err := writeJSON(h.dir, ".gemini/settings.json", settings); err != nil {
			return nil, err
		}
		if err := agent.WriteFileIn(h.dir, ".gemini/policies/bhw-run.toml", []byte(geminiPolicy)); err != nil {
			return nil, err
		}
		// One node process instead of a launcher that ignores SIGTERM and a
		// relaunched child.
		return []string{"GEMINI_CLI_HOME=" + h.dir, "GEMINI_CLI_NO_RELAUNCH=1"}, nil
	},
	park: parkError,
	noSession: func(e *jsonrpc.Error) bool {
		return e.Code == jsonrpc.CodeInternalError && (strings.Contains(string(e.Data), "No previous sessions found") ||
			strings.Contains(string(e.Data), "Invalid session identifier"))
	},
	loadMinute: true,
	login:      "set GEMINI_API_KEY (GOOGLE_API_KEY for Vertex AI) in bhw-run's environment to a key the provider accepts",
	keys:       []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
}

var qwenCode = &preset{
	typ: TypeQwen, executable: "qwen",
	// Without the flag the ACP mode is auto (a model classifier approves
	// calls), and it is auto again after every session/load.
	args: []string{"--acp", "--approval-mode", "default"},
	// Its OpenAI-compatible endpoint; not QWEN_*, which holds
	// QWEN_CODE_TRUSTED_FOLDERS_PATH and QWEN_CODE_SYSTEM_SETTINGS_PATH.
	prefixes: []string{"OPENAI_", "DASHSCOPE_"},
	homeDirs: []string{".qwen"},
	options:  noKeys,
	home: func(h homeCtx) ([]string, error) {
		model := map[string]any{
			// The SDK's own retry doubles every request; the chat loop's
			// retry (7 attempts) has no setting.
			"generationConfig": map[string]any{"maxRetries": 0},
		}
		var env []string
		if h.l.Model != "" {
			model["name"] = h.l.Model
			env = append(env, "OPENAI_MODEL="+h.l.Model)
		}
		settings := map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "openai"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"general":   map[string]any{"enableAutoUpdate": false},
			"model":     model,
			// Background model calls after every turn: a next-prompt
			// suggestion, and memory agents that hold write and shell tools.
			"ui":     map[string]any{"enableFollowupSuggestions": false},
			"memory": map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
			// Read-only shell commands (cat, ls, git status, grep, sed -n,
			// …) otherwise run unasked; ask rules also outrank any allow
			// rule a workspace's .qwen/settings.json adds.
			"permissions": map[string]any{"ask": []string{"Bash", "Write", "Edit", "NotebookEdit", "WebFetch"}},
		}
		if err := writeJSON(h.dir, "settings.json", settings); err != nil {
			return nil, err
		}
		return append(env, "QWEN_HOME="+h.dir), nil
	},
	park: parkCancelled,
	noSession: func(e *jsonrpc.Error) bool {
		return e.Code == -32002 && strings.Contains(e.Message, "Resource not found")
	},
	login: "set OPENAI_API_KEY (or DASHSCOPE_API_KEY), with OPENAI_BASE_URL for its endpoint, in bhw-run's environment to a key the provider accepts",
	keys:  []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
}

// OpenCodeOptions are OpenCode's own keys under agents.opencode.
type OpenCodeOptions struct {
	// Provider is OpenCode's "provider" block (as in opencode.json): the
	// providers the model comes from. An API key is best named as
	// "{env:NAME}", with NAME passed in agents.opencode.env or by a prefix
	// the allowlist passes, so it is not in the config text.
	Provider map[string]any `yaml:"provider"`
}

// openCodePluginVersion is the @opencode-ai/plugin version OpenCode
// npm-installs into its config dir on every start unless it is there.
const openCodePluginVersion = "1.18.33"

// envRef is a "{env:NAME}" in OpenCode's config: the value of NAME.
var envRef = lazyRegexp(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

var openCode = &preset{
	typ: TypeOpenCode, executable: "opencode",
	args: []string{"acp"},
	// The providers' own key variables as OpenCode's catalog names them;
	// never OPENCODE_*, which holds OPENCODE_PERMISSION and OPENCODE_CONFIG.
	prefixes: []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"},
	homeDirs: []string{".config/opencode", ".local/share/opencode"},
	options: func(raw map[string]any) (any, error) {
		var o OpenCodeOptions
		if err := agent.DecodeOptions(raw, &o); err != nil {
			return nil, err
		}
		if _, err := json.Marshal(o.Provider); err != nil {
			return nil, fmt.Errorf("provider: %v", err)
		}
		return o, nil
	},
	home: func(h homeCtx) ([]string, error) {
		o, _ := h.opts.(OpenCodeOptions)
		cfgDir := filepath.Join(h.dir, "config")
		if err := agent.MkdirIn(h.dir, "config/opencode/node_modules"); err != nil {
			return nil, err
		}
		deps := map[string]any{"@opencode-ai/plugin": openCodePluginVersion}
		if err := writeJSON(h.dir, "config/opencode/package.json", map[string]any{"dependencies": deps}); err != nil {
			return nil, err
		}
		if err := writeJSON(h.dir, "config/opencode/package-lock.json", map[string]any{"lockfileVersion": 3,
			"packages": map[string]any{"": map[string]any{"dependencies": deps}}}); err != nil {
			return nil, err
		}
		cfg := map[string]any{
			"$schema":    "https://opencode.ai/config.json",
			"autoupdate": false,
			"share":      "disabled",
			// The defaults ask for nothing inside the cwd; task: deny
			// removes the subagent tool, whose requests never reach the
			// client (its turn hangs).
			"permission": map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask", "external_directory": "ask", "task": "deny"},
		}
		if len(o.Provider) > 0 {
			cfg["provider"] = o.Provider
			var names []string
			for k := range o.Provider {
				names = append(names, k)
			}
			cfg["enabled_providers"] = names
		}
		if h.l.Model != "" {
			cfg["model"], cfg["small_model"] = h.l.Model, h.l.Model
		}
		content, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		return []string{
			"XDG_CONFIG_HOME=" + cfgDir,
			"XDG_DATA_HOME=" + filepath.Join(h.dir, "data"),
			"XDG_CACHE_HOME=" + filepath.Join(h.dir, "cache"),
			"XDG_STATE_HOME=" + filepath.Join(h.dir, "state"),
			"OPENCODE_CONFIG_CONTENT=" + string(content),
			// A workspace opencode.json allowing edit and bash is ignored.
			"OPENCODE_DISABLE_PROJECT_CONFIG=1",
			// Its local HTTP server otherwise serves the pending
			// permissions and the config to anyone on 127.0.0.1.
			"OPENCODE_SERVER_PASSWORD=" + randomHex(16),
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_CLAUDE_CODE=1",
			"OPENCODE_DISABLE_EXTERNAL_SKILLS=1",
		}, nil
	},
	park: parkCancelled,
	// Its "no such session" is the same shape as other storage faults; only
	// the service tells them apart.
	noSession: func(e *jsonrpc.Error) bool {
		return e.Code == jsonrpc.CodeInternalError && strings.Contains(string(e.Data), `"service":"session"`)
	},
	inputExcludesCached: true,
	login: "set the provider's key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENROUTER_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY, " +
		"or the variable agents.opencode.provider names as {env:NAME}) in bhw-run's environment to a key the provider accepts",
	keys: []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"},
	keyNames: func(opts any) []string {
		o, _ := opts.(OpenCodeOptions)
		b, _ := json.Marshal(o.Provider)
		var names []string
		for _, m := range envRef().FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
		return names
	},
}

// CopilotOptions are Copilot's own keys under agents.copilot.
type CopilotOptions struct {
	// CacheDir is XDG_CACHE_HOME for Copilot, shared by every thread of the
	// machine: it unpacks a 235 MB runtime there on its first start.
	// Default: ~/.cache of the user bhw-run runs as.
	CacheDir string `yaml:"cache_dir"`
}

var copilot = &preset{
	typ: TypeCopilot, executable: "copilot",
	// --excluded-tools task removes the subagent tool: a reject inside a
	// subagent does not stop the parent turn.
	args: []string{"--acp", "--no-auto-update", "--disable-client-telemetry", "--excluded-tools", "task"},
	// Its BYOK provider and GitHub tokens; not COPILOT_* as a whole, which
	// holds COPILOT_ALLOW_ALL.
	prefixes: []string{"COPILOT_PROVIDER_", "COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"},
	homeDirs: []string{".copilot"},
	options: func(raw map[string]any) (any, error) {
		var o CopilotOptions
		if err := agent.DecodeOptions(raw, &o); err != nil {
			return nil, err
		}
		if o.CacheDir != "" && !filepath.IsAbs(o.CacheDir) {
			return nil, fmt.Errorf("cache_dir %q: use an absolute path", o.CacheDir)
		}
		return o, nil
	},
	home: func(h homeCtx) ([]string, error) {
		o, _ := h.opts.(CopilotOptions)
		cache := o.CacheDir
		if cache == "" {
			cache = filepath.Join(agent.EnvValue(h.l.Env, "HOME"), ".cache")
		}
		env := []string{
			"COPILOT_HOME=" + filepath.Join(h.dir, "copilot"),
			"XDG_CONFIG_HOME=" + filepath.Join(h.dir, "config"),
			"XDG_DATA_HOME=" + filepath.Join(h.dir, "data"),
			"XDG_STATE_HOME=" + filepath.Join(h.dir, "state"),
			"XDG_CACHE_HOME=" + cache,
			"COPILOT_AUTO_UPDATE=false",
		}
		if agent.EnvValue(h.l.Env, "COPILOT_PROVIDER_BASE_URL") != "" {
			// A provider of the machine's own: no GitHub auth, telemetry,
			// web tools or update check.
			env = append(env, "COPILOT_OFFLINE=true")
		}
		if h.l.Model != "" {
			env = append(env, "COPILOT_MODEL="+h.l.Model)
		}
		return env, nil
	},
	park: parkCancelled,
	noSession: func(e *jsonrpc.Error) bool {
		return e.Code == -32002 && strings.Contains(e.Message, "not found")
	},
	notices: true,
	login: "set COPILOT_PROVIDER_API_KEY (a provider of your own) or COPILOT_GITHUB_TOKEN/GH_TOKEN in bhw-run's environment " +
		"to a key or token that is accepted",
	keys: []string{"COPILOT_PROVIDER_API_KEY", "COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"},
}

// generic is any other ACP agent, declared in config.yaml (agents.acp:
// executable, extra_args, env). Its defaults are the conservative ones: no
// settings written, no home, only the declared environment, park by
// cancel, and any session/load error taken as "no such session".
var generic = &preset{
	typ: TypeGeneric, executable: "acp-agent",
	options:   noKeys,
	park:      parkCancelled,
	noSession: anyLoadError,
	login:     "set the agent's key in agents.acp.env of config.yaml to one the provider accepts",
}

// setEnv is env with each "K=V" of kv set, replacing an earlier value.
func setEnv(env []string, kv ...string) []string {
	keys := map[string]bool{}
	for _, s := range kv {
		k, _, _ := strings.Cut(s, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(kv))
	for _, s := range env {
		if k, _, _ := strings.Cut(s, "="); !keys[k] {
			out = append(out, s)
		}
	}
	return append(out, kv...)
}

// writeJSON writes v as indented JSON to rel below dir, an agent's home
// (agent.WriteFileIn: through no link, atomically).
func writeJSON(dir, rel string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return agent.WriteFileIn(dir, rel, append(b, '\n'))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
