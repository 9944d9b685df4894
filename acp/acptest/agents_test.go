//go:build realcli

package acptest

// The recipe per agent: where its pinned binary is, the argv, the isolated
// home and the settings written there, the environment, the tool names the
// model calls, how a call is parked and how "no such session" looks. These
// are what the ACP adapter's presets will hold; docs/agents-acp.md explains
// each choice.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type recipe struct {
	*Agent
	args []string

	// setup writes the agent's settings under h and returns its env.
	setup func(t testing.TB, h *home, modelURL, bin string) []string

	// park stops the turn at an open permission request so the call never
	// runs; the prompt then ends "cancelled".
	park func(a *agentProc, sessionID string, perm *rpcMsg)

	// noSession reports whether a session/load error means "no such
	// session" (the fresh-session rule), as opposed to any other failure.
	noSession func(e *rpcError) bool

	// loadMinute: session/load must not run in the UTC minute of the
	// session's creation.
	loadMinute bool

	// turnFailed reports whether a prompt's response and message text
	// read as a turn the model API failed.
	turnFailed func(res *rpcMsg, text string) bool

	// shellOutlivesTerm: SIGTERM to the agent's group leaves a running
	// shell call behind (the agent runs it in a group of its own).
	shellOutlivesTerm bool

	// permissiveWorkspace writes the agent's own workspace config that
	// would allow every call, were it obeyed.
	permissiveWorkspace func(t testing.TB, work string)
}

// messageSays reports whether an error has code and a message holding text.
func messageSays(code int, text string) func(e *rpcError) bool {
	return func(e *rpcError) bool { return e.Code == code && strings.Contains(e.Message, text) }
}

// rpcFailed: the prompt ended in a JSON-RPC error.
func rpcFailed(res *rpcMsg, _ string) bool { return res.Error != nil }

// home is one test's isolated state: the agent's home, its XDG dirs, its
// temp dir and the workspace (cwd).
type home struct {
	root, home, tmp, work string
}

func newHome(t testing.TB) *home {
	root := t.TempDir()
	// The workspace path is resolved: agents compare absolute cwds.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	h := &home{root: root, home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp"), work: filepath.Join(root, "work")}
	for _, d := range []string{h.home, h.tmp, h.work} {
		mkdir(t, d)
	}
	return h
}

func (h *home) path(p ...string) string { return filepath.Join(append([]string{h.root}, p...)...) }

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// baseEnv is what every agent gets: PATH (the node programs need node on
// it), LANG, and HOME/TMPDIR inside the test's root.
func baseEnv(h *home) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "LANG=C.UTF-8", "HOME=" + h.home, "TMPDIR=" + h.tmp,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
}

func randomSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// geminiModel is set in settings.json: with the "auto" default the CLI
// adds a routing-classifier request to every turn.
const geminiModel = "gemini-2.5-flash"

var gemini = &recipe{
	Agent: Gemini,
	args:  []string{"--acp"},
	setup: func(t testing.TB, h *home, url, bin string) []string {
		cli := h.path("gemini")
		writeJSONFile(t, filepath.Join(cli, ".gemini", "settings.json"), map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"general": map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false,
				"maxAttempts": 2, "sessionRetention": map[string]any{"enabled": false}},
			"model": map[string]any{"name": geminiModel},
		})
		// Without a rule that has an argsPattern, the CLI runs shell
		// commands it deems read-only (cat, ls, echo, pwd, find, …) without
		// asking; this rule makes every shell command reach the client.
		writeFile(t, filepath.Join(cli, ".gemini", "policies", "bhw-run.toml"), `[[rule]]
toolName = "run_shell_command"
argsPattern = ".*"
decision = "ask_user"
priority = 900
`)
		return append(baseEnv(h),
			"GEMINI_CLI_HOME="+cli,
			"GEMINI_API_KEY="+FakeKey,
			"GOOGLE_GEMINI_BASE_URL="+url,
			"GEMINI_CLI_NO_RELAUNCH=1",
		)
	},
	park: func(a *agentProc, sid string, perm *rpcMsg) {
		// Answering cancelled or reject alone lets the turn go on (the model
		// is told the user refused); the cancel notification first, then an
		// error answer, ends it and keeps the model's call in the history.
		a.notify("session/cancel", map[string]any{"sessionId": sid})
		a.replyError(perm, -32000, "parked: waiting for a person")
	},
	noSession: func(e *rpcError) bool {
		return e.Code == -32603 && (strings.Contains(string(e.Data), "No previous sessions found") ||
			strings.Contains(string(e.Data), "Invalid session identifier"))
	},
	loadMinute: true,
	turnFailed: rpcFailed,
	permissiveWorkspace: func(t testing.TB, work string) {
		writeJSONFile(t, filepath.Join(work, ".gemini", "settings.json"), map[string]any{
			"tools":   map[string]any{"allowed": []string{"run_shell_command", "write_file", "replace"}},
			"general": map[string]any{"defaultApprovalMode": "yolo"},
		})
		writeFile(t, filepath.Join(work, ".gemini", "policies", "allow.toml"),
			"[[rule]]\ntoolName = [\"run_shell_command\", \"write_file\"]\ndecision = \"allow\"\npriority = 999\n")
	},
}

var qwen = &recipe{
	Agent: Qwen,
	// The ACP default mode is "auto" (a classifier approves calls, again
	// after every session/load); default asks.
	args: []string{"--acp", "--approval-mode", "default"},
	setup: func(t testing.TB, h *home, url, bin string) []string {
		qh := h.path("qwen")
		writeJSONFile(t, filepath.Join(qh, "settings.json"), map[string]any{
			"security":  map[string]any{"auth": map[string]any{"selectedType": "openai"}},
			"privacy":   map[string]any{"usageStatisticsEnabled": false},
			"telemetry": map[string]any{"enabled": false},
			"general":   map[string]any{"enableAutoUpdate": false},
			"model": map[string]any{"name": "fake-model",
				"generationConfig": map[string]any{"maxRetries": 0, "retryInitialDelayMs": 100, "retryMaxDelayMs": 1000}},
			// Background model calls after every turn: a next-prompt
			// suggestion and memory agents that hold write and shell tools.
			"ui":     map[string]any{"enableFollowupSuggestions": false},
			"memory": map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
			// Read-only shell commands (cat, ls, git status, grep, sed -n,
			// …) otherwise run unasked; ask rules also outrank any allow
			// rule a workspace's .qwen/settings.json adds.
			"permissions": map[string]any{"ask": []string{"Bash", "Write", "Edit", "NotebookEdit", "WebFetch"}},
		})
		return append(baseEnv(h),
			"QWEN_HOME="+qh,
			"OPENAI_API_KEY="+FakeKey,
			"OPENAI_BASE_URL="+url,
			"OPENAI_MODEL=fake-model",
		)
	},
	park:       cancelThenCancelled,
	noSession:  messageSays(-32002, "Resource not found"),
	turnFailed: rpcFailed,
	permissiveWorkspace: func(t testing.TB, work string) {
		writeJSONFile(t, filepath.Join(work, ".qwen", "settings.json"), map[string]any{
			"permissions": map[string]any{"allow": []string{"Bash", "Write", "Edit"}},
			"tools":       map[string]any{"approvalMode": "yolo"},
		})
	},
}

var opencode = &recipe{
	Agent: OpenCode,
	args:  []string{"acp"},
	setup: func(t testing.TB, h *home, url, bin string) []string {
		cfg := h.path("config")
		// OpenCode npm-installs @opencode-ai/plugin into its config dir on
		// every start unless the install is already there.
		oc := filepath.Join(cfg, "opencode")
		mkdir(t, filepath.Join(oc, "node_modules"))
		writeJSONFile(t, filepath.Join(oc, "package.json"), map[string]any{
			"dependencies": map[string]any{"@opencode-ai/plugin": "1.18.33"}})
		writeJSONFile(t, filepath.Join(oc, "package-lock.json"), map[string]any{"lockfileVersion": 3,
			"packages": map[string]any{"": map[string]any{"dependencies": map[string]any{"@opencode-ai/plugin": "1.18.33"}}}})
		content, _ := json.Marshal(map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"provider": map[string]any{"fake": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "Fake",
				"options": map[string]any{"baseURL": url, "apiKey": "{env:BHW_FAKE_API_KEY}"},
				"models": map[string]any{"fake-model": map[string]any{"name": "Fake Model", "tool_call": true,
					"limit": map[string]any{"context": 100000, "output": 4096}}},
			}},
			"model":             "fake/fake-model",
			"small_model":       "fake/fake-model",
			"enabled_providers": []string{"fake"},
			"autoupdate":        false,
			"share":             "disabled",
			"permission": map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask", "task": "deny",
				"external_directory": "ask"},
		})
		return append(baseEnv(h),
			"XDG_CONFIG_HOME="+cfg,
			"XDG_DATA_HOME="+h.path("data"),
			"XDG_CACHE_HOME="+h.path("cache"),
			"XDG_STATE_HOME="+h.path("state"),
			"OPENCODE_CONFIG_CONTENT="+string(content),
			"OPENCODE_DISABLE_PROJECT_CONFIG=1",
			"OPENCODE_SERVER_PASSWORD="+randomSecret(),
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_SHARE=1",
			"OPENCODE_DISABLE_CLAUDE_CODE=1",
			"OPENCODE_DISABLE_EXTERNAL_SKILLS=1",
			"BHW_FAKE_API_KEY="+FakeKey,
		)
	},
	park: cancelThenCancelled,
	noSession: func(e *rpcError) bool {
		return e.Code == -32603 && strings.Contains(string(e.Data), `"service":"session"`)
	},
	turnFailed:        rpcFailed,
	shellOutlivesTerm: true,
	permissiveWorkspace: func(t testing.TB, work string) {
		allow := map[string]any{"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "allow"}}
		writeJSONFile(t, filepath.Join(work, "opencode.json"), allow)
		writeJSONFile(t, filepath.Join(work, ".opencode", "opencode.json"), allow)
	},
}

var copilot = &recipe{
	Agent: Copilot,
	args:  []string{"--acp", "--no-auto-update", "--disable-client-telemetry"},
	setup: func(t testing.TB, h *home, url, bin string) []string {
		return append(baseEnv(h),
			"COPILOT_HOME="+h.path("copilot"),
			"XDG_CONFIG_HOME="+h.path("config"),
			"XDG_DATA_HOME="+h.path("data"),
			"XDG_STATE_HOME="+h.path("state"),
			"XDG_CACHE_HOME="+CopilotCache(t, bin),
			"COPILOT_OFFLINE=true",
			"COPILOT_AUTO_UPDATE=false",
			"COPILOT_PROVIDER_BASE_URL="+url,
			"COPILOT_PROVIDER_API_KEY="+FakeKey,
			"COPILOT_MODEL=gpt-4.1",
		)
	},
	park:      cancelThenCancelled,
	noSession: messageSays(-32002, "not found"),
	// A failed turn still ends end_turn; the failure is only in the text.
	turnFailed: func(res *rpcMsg, text string) bool {
		return res.Error == nil && strings.Contains(res.String(), `"end_turn"`) && strings.Contains(text, "Error: ")
	},
	permissiveWorkspace: func(t testing.TB, work string) {
		writeJSONFile(t, filepath.Join(work, ".github", "copilot", "settings.json"), map[string]any{
			"allowAllTools": true, "allowAllPaths": true, "allowedTools": []string{"shell", "write"}})
		writeJSONFile(t, filepath.Join(work, ".claude", "settings.json"), map[string]any{
			"permissions": map[string]any{"allow": []string{"Bash", "Write", "Edit"}}})
	},
}

var recipes = []*recipe{gemini, qwen, opencode, copilot}

// cancelThenCancelled parks as the ACP spec says: the cancel notification,
// then the open request answered "cancelled".
func cancelThenCancelled(a *agentProc, sid string, perm *rpcMsg) {
	a.notify("session/cancel", map[string]any{"sessionId": sid})
	a.reply(perm, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
}

// rig is one agent under test with its fake model.
type rig struct {
	t    testing.TB
	r    *recipe
	h    *home
	gem  *GeminiServer
	chat *ChatServer
	env  []string
	n    int
	bin  string
}

func newRig(t testing.TB, r *recipe) *rig {
	t.Helper()
	g := &rig{t: t, r: r, h: newHome(t), bin: r.Bin(t)}
	url := ""
	if r.Gemini {
		g.gem = NewGeminiServer(t)
		url = g.gem.URL
	} else {
		g.chat = NewChatServer(t)
		url = g.chat.URL
	}
	g.env = r.setup(t, g.h, url, g.bin)
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range g.model().Requests() {
				b, _ := json.Marshal(struct {
					Seq             int
					Op, Rule, Model string
					Status          int
					Tools           []string
					Turns           []Turn
				}{q.Seq, q.Op, q.Rule, q.Model, q.Status, q.Tools, q.Turns})
				t.Logf("model request: %s", clip(string(b), 3000))
			}
		}
	})
	return g
}

// model is the rig's fake, whichever API it speaks.
func (g *rig) model() interface {
	Requests() []Request
	ModelRequests() []Request
	Inject(Fault)
	ClearFaults()
	RequireKey(string, int)
} {
	if g.gem != nil {
		return g.gem.core
	}
	return g.chat.core
}

// start spawns one process of the agent in the workspace.
func (g *rig) start() *agentProc {
	g.n++
	return spawn(g.t, g.r.Type+"-p"+strconv.Itoa(g.n), g.h.root, g.h.work, g.env, append([]string{g.bin}, g.r.args...))
}

// initialize sends the handshake with no client capability: the agent then
// reads, writes and runs shells itself, after asking.
func (a *agentProc) initialize(t testing.TB) map[string]any {
	t.Helper()
	res := a.request("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "bhw-run-probe", "version": "0"}}, 90*time.Second)
	var out map[string]any
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (a *agentProc) newSession(t testing.TB, cwd string) string {
	t.Helper()
	res := a.request("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, 60*time.Second)
	var out struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &out)
	if out.SessionID == "" {
		t.Fatalf("session/new gave no sessionId: %s", res)
	}
	return out.SessionID
}

func (a *agentProc) prompt(sid, text string) *call {
	return a.send("session/prompt", map[string]any{"sessionId": sid,
		"prompt": []any{map[string]any{"type": "text", "text": text}}})
}

// permission is a session/request_permission's params.
type permission struct {
	SessionID string `json:"sessionId"`
	Options   []struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
		Name     string `json:"name"`
	} `json:"options"`
	ToolCall struct {
		ToolCallID string          `json:"toolCallId"`
		Kind       string          `json:"kind"`
		Title      string          `json:"title"`
		Status     string          `json:"status"`
		Locations  json.RawMessage `json:"locations"`
		Content    json.RawMessage `json:"content"`
		RawInput   json.RawMessage `json:"rawInput"`
	} `json:"toolCall"`
}

func parsePermission(t testing.TB, m *rpcMsg) permission {
	t.Helper()
	var p permission
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("permission params: %v: %s", err, m.Params)
	}
	return p
}

// option is the optionId of the option of kind (allow_once, reject_once):
// the ids differ between agents, and a wrong id is a silent deny on some.
func (p permission) option(t testing.TB, kind string) string {
	t.Helper()
	for _, o := range p.Options {
		if o.Kind == kind {
			return o.OptionID
		}
	}
	t.Fatalf("no %s option in %+v", kind, p.Options)
	return ""
}

func (a *agentProc) choose(m *rpcMsg, optionID string) {
	a.reply(m, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": optionID}})
}
