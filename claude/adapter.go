package claude

import (
	"encoding/json"
	"path/filepath"
	"runtime"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// Adapter describes Claude Code to run. The host picks the session id
// (--session-id); the config dir (CLAUDE_CONFIG_DIR) is the agent's home.
var Adapter = agent.Adapter{
	Type:          "claude_code",
	Executable:    "claude",
	HomeEnv:       "CLAUDE_CONFIG_DIR",
	HomeKey:       "config_dir",
	EnvPrefixes:   []string{"ANTHROPIC_", "CLAUDE_"},
	HomeDirs:      []string{".claude"},
	HostSessionID: true,
	Instructions:  "CLAUDE.md",
	Describe:      describe,
	Login:         login,
	LoginCheck:    loginCheck,
	Enforces:      agent.Caps{CostUSD: true, Turns: true},
	Start:         agent.StartFunc(Start),
}

// login says how a person logs Claude Code in for the config dir home.
func login(home string) string {
	return "log Claude Code in as the user bhw-run runs as: run `" + agent.HomeCommand("CLAUDE_CONFIG_DIR", home, "claude") + "` and type /login, " +
		"or set ANTHROPIC_API_KEY under agents.claude_code.env in config.yaml"
}

// loginKeys are the variables Claude Code logs in with, in its order of
// precedence: an API key, a bearer token for a gateway, a long-lived
// OAuth token (`claude setup-token`).
var loginKeys = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// loginCheck: one of loginKeys in the agent's environment, or the login
// file /login writes in its config dir (the configured one, else
// ~/.claude). An OAuth login whose access token has expired is refreshed
// by the CLI itself, so the file's presence is what counts.
func loginCheck(l agent.Launch) (bool, string) { return loginCheckOn(runtime.GOOS, l) }

// loginCheckOn is loginCheck on the system goos. On macOS Claude Code
// keeps its /login in the login Keychain, not in .credentials.json
// (docs/macos.md): bhw-run does not read the Keychain, so with no file and
// no key the login is not checked rather than reported missing.
func loginCheckOn(goos string, l agent.Launch) (bool, string) {
	if k := agent.KeyIn(l.Env, loginKeys...); k != "" {
		return true, k + " is set in its environment"
	}
	dir := l.Home
	if dir == "" {
		dir = filepath.Join(agent.EnvValue(l.Env, "HOME"), ".claude")
	}
	file := filepath.Join(dir, ".credentials.json")
	if agent.LoginFile(file) {
		return true, "logged in: " + file
	}
	if goos == "darwin" {
		return true, "not checked: on macOS Claude Code keeps its /login in the login Keychain, which bhw-run does not read; no " + file +
			" and none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN in its environment"
	}
	return false, "not logged in: no " + file + " and none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN in its environment"
}

// describe is a call of effect on target as Claude Code asks for it: Bash,
// WebFetch, Read or Write with their input fields.
func describe(effect string, t policy.Target) policy.Call {
	c := policy.Call{Effect: effect, Target: t, Kind: policy.KindApproval}
	var in map[string]string
	switch effect {
	case policy.EffectExec:
		c.Tool, in = "Bash", map[string]string{"command": t.Command}
	case policy.EffectNetwork:
		c.Tool, in = "WebFetch", map[string]string{"url": t.URL}
	case policy.EffectRead, policy.EffectWrite:
		c.Tool = map[string]string{policy.EffectRead: "Read", policy.EffectWrite: "Write"}[effect]
		if len(t.Paths) > 0 {
			in = map[string]string{"file_path": t.Paths[0]}
		}
	}
	if in != nil {
		c.Input, _ = json.Marshal(in)
	}
	return c
}
