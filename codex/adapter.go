package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// CodeSandboxUnavailable fails an approval or guarded Codex thread on a
// machine where the Codex sandbox does not work: every sandboxed command
// would fail there, with no approval request for the gate to answer.
const CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"

// Adapter describes Codex to run. The agent picks the thread id (the
// session id); CODEX_HOME is its home.
var Adapter = agent.Adapter{
	Type:        "codex",
	Executable:  "codex",
	HomeEnv:     "CODEX_HOME",
	HomeKey:     "codex_home",
	EnvPrefixes: []string{"CODEX_", "OPENAI_"},
	HomeDirs:    []string{".codex"},
	Preflight:   preflight,
	Describe:    describe,
	Options:     decodeOptions,
	Login:       login,
	LoginCheck:  loginCheck,
	Start:       agent.StartFunc(Start),
}

// login says how a person logs Codex in for the home home.
func login(home string) string {
	return "log Codex in as the user bhw-run runs as: run `" + agent.HomeCommand("CODEX_HOME", home, "codex login") + "`, " +
		"or set the provider's key (OPENAI_API_KEY, or the env_key its model_providers entry names) under agents.codex.env in config.yaml"
}

// envKeyLine is a model_providers entry's env_key in config.toml: the
// variable that provider's key is read from. Compiled on first use (only
// doctor's login check reads config.toml), not by every process at start.
var envKeyLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*env_key\s*=\s*"([A-Za-z_][A-Za-z0-9_]*)"`)
})

// keyringLine is config.toml's cli_auth_credentials_store when it puts the
// login in the system's keyring (the macOS Keychain on a Mac) instead of
// auth.json, Codex's default.
var keyringLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*cli_auth_credentials_store\s*=\s*"(keyring|auto)"`)
})

// loginCheck: OPENAI_API_KEY or CODEX_API_KEY (or the env_key a
// model_providers entry of its config.toml names) in the agent's
// environment, or the auth.json `codex login` writes in CODEX_HOME (the
// configured one, else ~/.codex).
func loginCheck(l agent.Launch) (bool, string) {
	home := l.Home
	if home == "" {
		home = filepath.Join(agent.EnvValue(l.Env, "HOME"), ".codex")
	}
	keys := []string{"OPENAI_API_KEY", "CODEX_API_KEY"}
	var store string
	// The agent writes its home: read through no link, pipe or huge file.
	if b, err := agent.ReadAgentFile(home, "config.toml"); err == nil {
		for _, m := range envKeyLine().FindAllSubmatch(b, -1) {
			keys = append(keys, string(m[1]))
		}
		if m := keyringLine().FindSubmatch(b); m != nil {
			store = string(m[1])
		}
	}
	if k := agent.KeyIn(l.Env, keys...); k != "" {
		return true, k + " is set in its environment"
	}
	file := filepath.Join(home, "auth.json")
	if agent.LoginFile(file) {
		return true, "logged in: " + file
	}
	if store != "" {
		return true, "not checked: its config.toml keeps the login in the system keyring (cli_auth_credentials_store = \"" + store +
			"\"), which bhw-run does not read; no " + file + " and none of " + strings.Join(keys, ", ") + " in its environment"
	}
	return false, "not logged in: no " + file + " and none of " + strings.Join(keys, ", ") + " in its environment"
}

// Options are Codex's own keys under agents.codex.
type Options struct {
	// Sandbox is the sandbox of approval and guarded threads that run
	// unconfined (confine off): workspace-write (the default) or
	// read-only. A confined thread has none (see posture).
	Sandbox string `yaml:"sandbox"`
}

func decodeOptions(raw map[string]any) (any, error) {
	var o Options
	if err := agent.DecodeOptions(raw, &o); err != nil {
		return nil, err
	}
	switch o.Sandbox {
	case "", "workspace-write", "read-only":
	default:
		return nil, fmt.Errorf("sandbox %q: use workspace-write or read-only", o.Sandbox)
	}
	return o, nil
}

// posture is the approval policy and sandbox a thread runs Codex with.
//
// Autonomous: never ask, no sandbox. Approval and guarded, unconfined:
// ask on request, inside Codex's own sandbox (workspace-write unless
// agents.codex.sandbox says read-only): a command that stays inside it
// runs without asking; one that must leave it asks.
//
// Approval and guarded, confined: Codex's sandbox cannot run inside the
// confinement (bubblewrap sets up namespaces and mounts a Landlock domain
// refuses: "bwrap: setting up uid map: Permission denied"; its legacy
// Landlock mode panics without bubblewrap, codex 0.171.0), so the kernel
// is the boundary and Codex asks before every command and every file
// change ("untrusted": codex 0.171.0 asks before an ls), as Claude Code
// and the ACP agents ask: the gate decides each, and the confinement
// keeps what it allows out of bhw-run's secrets. That asks more often than
// blobhub-worker, where commands inside the sandbox run unasked; the one
// sandbox Codex runs inside the confinement (a profile that shuts only the
// network) would let an unasked command write Codex's own home, whose
// config.toml Codex acts on outside its sandbox: looser, so not used
// (docs/security.md, TestConfinedCodexSandboxes).
func posture(l agent.Launch) (approvalPolicy, sandbox string) {
	switch {
	case l.Permissions == policy.PostureAutonomous:
		return "never", "danger-full-access"
	case l.Confine != nil:
		return "untrusted", "danger-full-access"
	}
	if o, ok := l.Options.(Options); ok && o.Sandbox != "" {
		return "on-request", o.Sandbox
	}
	return "on-request", "workspace-write"
}

// sandboxConfig is the configuration thread/start and thread/resume give
// Codex with sandbox, outranking the machine owner's config.toml: it pins
// what a command inside workspace-write may do unasked to what
// blobhub-worker's sandbox lets it (the built-in ":workspace" profile,
// which ignores config.toml): no network, and no writable folder beyond the
// work folder and the temp folders. Without it `[sandbox_workspace_write]
// network_access = true` or `writable_roots` in config.toml widen the
// sandbox: measured on codex 0.171.0, a sandboxed connect to 127.0.0.1 and
// a write to an added root both ran unasked where the worker's failed. The
// keys that only narrow it (exclude_slash_tmp, exclude_tmpdir_env_var) stay
// the owner's. Nil for the other sandboxes.
func sandboxConfig(sandbox string) map[string]any {
	if sandbox != "workspace-write" {
		return nil
	}
	return map[string]any{"sandbox_workspace_write": map[string]any{"network_access": false, "writable_roots": []any{}}}
}

// preflight refuses approval and guarded threads that run unconfined in
// Codex's own sandbox on a machine where it does not work (autonomous and
// confined threads have none). The check starts Codex once more (some
// 35 ms of its CPU and 130 ms of wall time), so a pass is remembered in
// the state tree for this executable, as it is on disk (sandboxCache); a
// failure is not, and the next run checks again.
func preflight(ctx context.Context, l agent.Launch) error {
	if _, sb := posture(l); sb == "danger-full-access" {
		return nil
	}
	cache := sandboxCache{dir: l.CacheDir}
	if cache.passed(l.Executable) {
		return nil
	}
	if err := SandboxWorks(ctx, l.Executable, l.Env); err != nil {
		return agent.Errorf(CodeSandboxUnavailable, "the Codex sandbox does not work on this machine (%v); approval and guarded threads that run unconfined need it: leave them confined (remove confine: off from config.yaml for codex), or give bubblewrap the user namespaces it needs", err)
	}
	cache.remember(l.Executable)
	return nil
}

// describe is a call of effect on target under the names Codex gives it:
// a command approval for exec, a file change for write, a web search for
// network. Codex never asks before a read, so a read has no tool name.
func describe(effect string, t policy.Target) policy.Call {
	c := policy.Call{Effect: effect, Target: t, Kind: policy.KindApproval}
	switch effect {
	case policy.EffectExec:
		c.Tool = ToolExec
		c.Input, _ = json.Marshal(map[string]any{"command": t.Command, "cwd": t.Cwd})
	case policy.EffectWrite:
		c.Tool = ToolApplyPatch
	case policy.EffectNetwork:
		c.Tool = ToolWebSearch
	}
	return c
}
