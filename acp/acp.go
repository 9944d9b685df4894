// Package acp drives coding agents that speak the Agent Client Protocol
// (JSON-RPC 2.0 over stdio: initialize, session/new, session/load,
// session/prompt, session/update, session/request_permission,
// session/cancel) for one activation. One adapter serves every ACP agent;
// what differs between them is a preset: the argv, the settings written
// into the thread's home, the environment, how a call is parked, which
// errors mean "no such session", how usage and a failed turn are reported.
// Adapters returns the descriptors of the presets gemini (Gemini CLI),
// qwen_code (Qwen Code), opencode (OpenCode) and copilot (GitHub Copilot
// CLI) and of the generic acp type a machine owner declares in
// config.yaml.
//
// The protocol is driven fail-closed: no fs or terminal capability is
// advertised, so the agent reads, writes and runs commands itself and asks
// first; every request of the agent is answered; a permission request is
// answered with an allow_once or reject_once option of the agent's own
// (chosen by kind, never an *_always one, which would outlive the one-shot
// grant), or parked. The facts each preset rests on were measured on the
// pinned versions: docs/agents-acp.md.
package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// Agent types.
const (
	TypeGemini      = "gemini"
	TypeQwen        = "qwen_code"
	TypeOpenCode    = "opencode"
	TypeCopilot     = "copilot"
	TypeGeneric     = "acp"
	TypeAntigravity = "antigravity"
)

// parkStyle is how a call is parked: the session/cancel notification,
// then the open request answered so the turn ends at it without running it.
type parkStyle int

const (
	// parkCancelled answers the request "cancelled" (ACP's own answer to a
	// request the client cancelled).
	parkCancelled parkStyle = iota
	// parkError answers it with a JSON-RPC error: Gemini CLI ends the turn
	// cancelled and keeps the model's call, with an error result, in the
	// stored history, so the model sees its own call on resume. Answered
	// "cancelled" the history keeps only the user's text.
	parkError
)

// preset is what differs between ACP agents.
type preset struct {
	typ        string
	executable string   // the default executable, looked up on PATH
	args       []string // argv after the executable, before extra_args
	prefixes   []string // what passes the environment allowlist
	homeDirs   []string // folders under the user's home with its credentials or sessions
	// own is the preset's own keys under agents.<type> (nil: none).
	options func(raw map[string]any) (any, error)
	// home writes the preset's settings below the thread's home and
	// returns the variables derived from it; nil: no home is used.
	home func(h homeCtx) ([]string, error)
	park parkStyle
	// noSession reports whether a session/load error means the agent has
	// no such session (the fresh-session rule) rather than another fault.
	noSession func(e *jsonrpc.Error) bool
	// loadMinute: session/load must not run in the UTC minute the session
	// was created in (Gemini CLI names the session file by that minute, and
	// a load in it overwrites the stored history).
	loadMinute bool
	// notices: a message chunk starting "Info: " or "Error: " is the
	// agent's own notice, not model text, and an "Error: " one fails the
	// turn (Copilot ends a failed turn end_turn).
	notices bool
	// inputExcludesCached: the prompt result's usage.inputTokens does not
	// count the cached tokens (OpenCode).
	inputExcludesCached bool
	// login is what a person does when the provider refuses the agent's
	// key: the variables it reads its key from.
	login string
	// keys are the variables it logs in with, one of which must be set for
	// `bhw-run doctor`; keyNames adds those its options name. Neither: its
	// login is not checked (the generic agent's is its own affair).
	keys     []string
	keyNames func(opts any) []string
}

// loginCheck: one of the preset's key variables is set in the agent's
// environment. Its home is the thread's own, so a login the user made in
// the agent's default home is never read and does not count.
func (p *preset) loginCheck(l agent.Launch) (bool, string) {
	if p.keys == nil {
		return true, "not checked: a generic ACP agent logs in its own way; a refused key ends a run with AGENT_AUTH_FAILED"
	}
	names := p.keys
	if p.keyNames != nil {
		names = append(slices.Clone(names), p.keyNames(l.Options)...)
	}
	if k := agent.KeyIn(l.Env, names...); k != "" {
		return true, k + " is set in its environment"
	}
	return false, "no key: none of " + strings.Join(names, ", ") + " is set in its environment"
}

var presets = []*preset{gemini, qwenCode, openCode, copilot, generic}

// Adapters are the descriptors of every ACP agent type; main lists them
// with its other adapters (antigravity, which has no ACP mode, has a
// folder of its own).
func Adapters() []agent.Adapter {
	out := make([]agent.Adapter, 0, len(presets))
	for _, p := range presets {
		out = append(out, p.adapter())
	}
	return out
}

// Adapter is the descriptor of agent type typ (one of the presets).
func Adapter(typ string) agent.Adapter {
	for _, p := range presets {
		if p.typ == typ {
			return p.adapter()
		}
	}
	panic("acp: no preset " + typ)
}

func (p *preset) adapter() agent.Adapter {
	return agent.Adapter{
		Type:        p.typ,
		Executable:  p.executable,
		HomeKey:     "home",
		EnvPrefixes: p.prefixes,
		HomeDirs:    p.homeDirs,
		ThreadHome:  p.home != nil,
		Describe:    describe,
		Options:     p.options,
		Version:     p.version,
		Login:       func(string) string { return p.login },
		LoginCheck:  p.loginCheck,
		Start: agent.StartFunc(func(ctx context.Context, l agent.Launch) (*Session, error) {
			return start(ctx, p, l)
		}),
	}
}

// version asks the CLI its version (for `bhw-run doctor`) with the
// environment a run gives it, in a home made for the question and removed
// after: the CLIs make their folders at every start, --version included
// (Gemini CLI ~/.gemini, OpenCode its XDG folders), and the user's own
// must stay untouched. Copilot's runtime cache is the shared one a run
// uses, so the first start's unpacking is done once for both.
func (p *preset) version(ctx context.Context, l agent.Launch) (string, error) {
	if p.home != nil {
		// In the agent's TMPDIR when it has one (a confined probe's
		// private temp folder, the one it may write), else bhw-run's.
		dir, err := os.MkdirTemp(agent.EnvValue(l.Env, "TMPDIR"), "bhw-run-version-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		l.Home = dir
	}
	env, err := p.environ(l)
	if err != nil {
		return "", err
	}
	return proc.VersionLine(ctx, proc.Config{Path: l.Executable, Dir: l.WorkFolder, Env: env, Confine: l.Confine})
}

// describe is a call of effect on target as an ACP agent asks for it: the
// ACP tool kind (execute, edit, read, fetch) with the fields a permission
// request carries. Which calls reach the gate at all is each agent's
// doing (docs/agents-acp.md, what asks).
func describe(effect string, t policy.Target) policy.Call {
	kind := map[string]string{policy.EffectExec: "execute", policy.EffectWrite: "edit",
		policy.EffectRead: "read", policy.EffectNetwork: "fetch"}[effect]
	if kind == "" {
		kind = "other"
	}
	title := t.Command
	var locs []map[string]string
	for _, p := range t.Paths {
		locs = append(locs, map[string]string{"path": p})
	}
	switch {
	case title == "" && len(t.Paths) > 0:
		title = strings.Join(t.Paths, ", ")
	case title == "":
		title = t.URL
	}
	in, _ := json.Marshal(map[string]any{"kind": kind, "title": title, "locations": locs})
	return policy.Call{Tool: kind, Effect: effect, Target: t, Input: in, Kind: policy.KindApproval,
		Summary: policy.Summary(kind, t)}
}

// noKeys is the Options of a preset without keys of its own: any key is
// refused, naming it.
func noKeys(raw map[string]any) (any, error) {
	var o struct{}
	if err := agent.DecodeOptions(raw, &o); err != nil {
		return nil, err
	}
	return nil, nil
}

// anyLoadError: a generic agent's session/load error, whatever it says,
// is taken as "no such session" and a fresh session is started: the
// messages are delivered again, nothing is lost.
func anyLoadError(*jsonrpc.Error) bool { return true }

// errorText describes a JSON-RPC error for a person: its message, and the
// details the agents put in data.
func errorText(e *jsonrpc.Error) string {
	msg := e.Message
	var d struct {
		Details   string `json:"details"`
		ErrorName string `json:"errorName"`
		Message   string `json:"message"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil {
		for _, extra := range []string{d.ErrorName, d.Details, d.Message} {
			if extra != "" && !strings.Contains(msg, extra) {
				msg += ": " + extra
			}
		}
	}
	return fmt.Sprintf("%s (%d)", msg, e.Code)
}
