// Package agent is the contract between run, which runs one activation of a
// thread, and the adapters that drive one coding agent's CLI each (claude,
// codex, …). An adapter describes itself with an Adapter value; main lists
// the adapters, and run loops over them without ever naming one. Adding an
// agent is therefore one new folder that exports an Adapter, plus one line in
// main.go.
//
// The package holds only the contract and the shapes both sides share: the
// descriptor, Launch, Session and Handler, the turn's result, the thread
// items an adapter relays, the coded errors it returns, and the thread.log
// line format. It imports nothing of bhw-run's but policy (a gated call is a
// policy.Call). The machinery adapters share lives in sub-packages: proc (a
// process in its own group, its pipes and its stop) and jsonrpc (a JSON-RPC
// 2.0 peer over those pipes).
package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/policy"
)

// Adapter describes one agent type: what run needs to resolve, check and
// start it. Every field but Type, Executable and Start may be left zero
// (an Unsupported one needs only its Type).
type Adapter struct {
	// Type is the envelope's agent.type and the key under agents: in
	// config.yaml, e.g. "claude_code".
	Type string
	// Executable is the default executable name, looked up on bhw-run's PATH
	// when agents.<type>.executable does not name one.
	Executable string
	// HomeEnv is the environment variable the agent's isolated home goes in
	// (CLAUDE_CONFIG_DIR, CODEX_HOME). Its value in bhw-run's own environment
	// is the default home. Leave it empty when the adapter derives its
	// variables from Launch.Home itself in Start.
	HomeEnv string
	// HomeKey is the key under agents.<type> that names the home
	// ("config_dir", "codex_home"), and the key under agent.resolved that a
	// thread.yaml written before agent_home existed recorded it under.
	// Empty: "home".
	HomeKey string
	// EnvPrefixes are the prefixes of the variables of bhw-run's environment
	// the agent gets through the allowlist (its API keys and endpoints, e.g.
	// "ANTHROPIC_"). No other agent's prefixes reach it.
	EnvPrefixes []string
	// HomeDirs are folders below the user's home that hold the agent's
	// credentials or sessions (".claude"); a work folder may not contain
	// them, nor the agent's home.
	HomeDirs []string
	// ThreadHome is set for an agent that keeps its sessions and its
	// settings in a home bhw-run gives it: when agents.<type>.<HomeKey>
	// names none, run gives it a folder of the thread's own state
	// (threads/<alias>/agent-home), fixed at activation like any home, so
	// two threads never share settings, sessions or caches, and the user's
	// own settings for that agent are never read or overwritten.
	ThreadHome bool
	// HostSessionID is set when the host picks the session id of a new
	// session (passed as Launch.SessionID with Resume false); run records it
	// with the started process, before the first message goes out, so a
	// crash cannot lose a session that holds anything. Otherwise the agent
	// picks it and Session.SessionID reports it once started.
	HostSessionID bool
	// Preflight, when set, runs as the checklist's last step before the
	// agent is started (the Codex sandbox check), and in `bhw-run doctor`.
	// A *Error it returns fails the thread with its code; the Launch is the
	// one Start would get, minus its session, with an empty Confine when
	// the agent will run confined.
	Preflight func(ctx context.Context, l Launch) error
	// Version, when set, is how `bhw-run doctor` asks the installed agent
	// for its version, within ctx's deadline; the Launch is the one Start
	// would get, minus its session and work folder. Nil: the executable
	// run with --version, its first line of output.
	Version func(ctx context.Context, l Launch) (string, error)
	// Describe is how `bhw-run policy explain` describes a call of effect
	// (read, write, exec, network) on target for this agent: its tool name
	// and input as the agent would send them. Nil: a call named after the
	// effect.
	Describe func(effect string, target policy.Target) policy.Call
	// Instructions names the work folder's file of project instructions
	// that the agent reads by itself under its stock launch but not under
	// its gated one (approval, guarded): Claude Code's CLAUDE.md, which
	// --setting-sources= drops. For those postures run reads it — through
	// links only while they stay inside the work folder, so a link cannot
	// put any file the user can read in front of the model — and hands the
	// bytes it checked to Start as Launch.Instructions, never the path,
	// which the agent would open again later. Empty: none.
	Instructions string
	// Options decodes and validates the adapter's own keys under
	// agents.<type> (Codex's sandbox, say). raw holds every key but the
	// common ones; the error names the key to fix. What it returns reaches
	// Start as Launch.Options. Nil: the adapter has no keys of its own and
	// any other key is refused.
	Options func(raw map[string]any) (any, error)
	// Unsupported, when set, names a type run knows but cannot run: the
	// checklist refuses a thread of it with AGENT_TYPE_UNSUPPORTED and this
	// text (why, and what to use instead), and config.yaml may not
	// configure it. Such a descriptor needs no Executable and no Start.
	Unsupported string
	// Enforces names the caps of Launch.Budget the agent's CLI enforces by
	// itself (Claude Code: --max-budget-usd, --max-turns). run meters the
	// others from the turn's Progress and interrupts the turn at the cap.
	Enforces Caps
	// Login says how a person fixes the agent's login or key on this
	// machine, given the agent's home ("" for its default): what a run that
	// ends AGENT_AUTH_FAILED tells. Nil: a generic hint.
	Login func(home string) string
	// LoginCheck is how `bhw-run doctor` tells whether the agent has a way
	// to log in on this machine without asking its model: a key in l.Env
	// (the environment a run gives it), or a login file in its home (l.Home,
	// else its default below HOME). It only looks: no network, nothing
	// written, no process started. ok false: none was found, and the
	// doctor's fix is Login's text; detail says what was found, or where it
	// looked. An agent whose login cannot be told from outside returns ok
	// with a detail that starts "not checked: ". Nil: no login line.
	LoginCheck func(l Launch) (ok bool, detail string)
	// Start launches the agent. A start that fails (bad flags, refused
	// start, exit before it is ready) returns a *Error with
	// CodeAgentSpawnFailed; a resume of a session the agent cannot find is
	// reported by the first Turn (TurnResult.ResumeFailed).
	Start func(ctx context.Context, l Launch) (Session, error)
}

// StartFunc adapts an adapter's Start, which returns its own session type,
// to Adapter.Start: a failed start is a nil Session, never a nil pointer
// inside one.
func StartFunc[S Session](start func(context.Context, Launch) (S, error)) func(context.Context, Launch) (Session, error) {
	return func(ctx context.Context, l Launch) (Session, error) {
		s, err := start(ctx, l)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// Launch is everything an adapter needs to start the agent for one
// activation. run resolves it and builds Env from its allowlist; the
// adapter adds only its own protocol variables.
type Launch struct {
	Executable  string   // absolute path of the native binary
	WorkFolder  string   // cwd of the agent
	Env         []string // complete environment, already filtered
	SessionID   string   // the session to resume, or (HostSessionID) the new session's id
	Resume      bool     // true: resume SessionID; false: a new session
	Model       string
	Effort      string
	Permissions string // autonomous | guarded | approval
	ExtraArgs   []string
	// Home is the agent's isolated home ("" for the agent's default). When
	// the Adapter names a HomeEnv it is already in Env under that name; the
	// adapter may write settings files below it.
	Home string
	// Options is what Adapter.Options made of agents.<type>; nil without.
	Options any
	// Instructions is the file Adapter.Instructions names, as run read it
	// under approval and guarded; nil when there is none or run skipped it.
	// The adapter gives the agent a copy of these bytes.
	Instructions []byte
	// Budget is what this turn may still spend (the thread's budget minus
	// its ledger), for the caps the adapter enforces itself (Enforces); a
	// zero field has no cap.
	Budget Budget
	// SessionCostUSD is the running cost the agent last reported for the
	// session being resumed (TurnResult.SessionCostUSD), so the adapter
	// can tell a resumed turn's own cost from its report; 0 for a new
	// session.
	SessionCostUSD float64
	// CacheDir is a folder of the state tree where the adapter may keep
	// what it learnt about this machine and its executable, to skip
	// checking it on every run (Codex: that its sandbox works). It may not
	// exist yet; deleting it only makes the checks run again.
	CacheDir string
	// Log is the thread's thread.log (secrets redacted). A nil Log discards.
	Log    *Log
	Logger *slog.Logger
	// MaxLine bounds one line of agent output (0: 64 MiB).
	MaxLine int
	// KillGrace is how long Close waits after SIGTERM before SIGKILL
	// (0: the process layer's default).
	KillGrace time.Duration
	// Confine, when set, is the Landlock rule set the agent and all it
	// starts are held to; the adapter hands it to proc.Config unchanged.
	// nil: unconfined (the machine owner's confine: off).
	Confine *confine.Rules
}

// Session is one live agent process, driven by its adapter.
type Session interface {
	// SessionID is the agent's resume pointer (Claude session id, Codex
	// thread id), known once the session has started.
	SessionID() string
	// Pgid is the agent's process group, recorded in thread.yaml.
	Pgid() int
	// LastOutput is when the agent last wrote a line of its stream (the
	// zero time before the first), whatever the line: a token streamed,
	// a line the adapter skips. run's stall watchdog takes an agent that
	// writes as not silent. Safe to call from another goroutine.
	LastOutput() time.Time
	// Turn sends one user message and relays the turn through h until the
	// agent ends it, the gate parks it, or ctx is cancelled. A process that
	// dies before its turn-end line returns a *Error with CodeAgentCrashed.
	Turn(ctx context.Context, message string, h Handler) (TurnResult, error)
	// Interrupt asks the agent to stop the running turn politely. Safe to
	// call from another goroutine while Turn runs.
	Interrupt() error
	// Close ends the process: close its input and wait a short while, then
	// SIGTERM to the group, SIGKILL after the grace. It returns once the
	// process is gone.
	Close(ctx context.Context) error
}

// Handler is how an adapter reports a turn to run. Its methods are called
// on the goroutine that called Session.Turn, one at a time, in the order of
// the agent's stream, and never after Turn has returned.
type Handler interface {
	// Emit relays one thread item (text, tool_call, tool_result, thinking,
	// status). run journals and posts it.
	Emit(Item)
	// Decide is the gate: every permission request of the agent goes here
	// and the adapter answers the agent with the verdict. It is never
	// skipped, and no answer is ever an implicit allow.
	Decide(policy.Call) policy.Verdict
	// Progress reports what the running turn has used so far, cumulative,
	// as the agent tells it (after each model response). run meters the
	// budget with it and may interrupt the turn. An adapter whose agent
	// says nothing until the turn ends does not call it.
	Progress(Progress)
}

// Budget is what a turn may spend; a zero field has no cap.
type Budget struct {
	MaxCostUSD float64
	MaxTurns   int64 // agent turns: model responses
	MaxTokens  int64 // input (cached included) and output
}

// Caps names the parts of a Budget.
type Caps struct{ CostUSD, Turns, Tokens bool }

// Progress is what a turn has used so far.
type Progress struct {
	Usage   Usage
	CostUSD float64
	// Turns are the model's responses so far.
	Turns int64
}

// Turn outcomes an adapter reports.
const (
	TurnCompleted   = "completed"   // the agent ended its turn normally
	TurnFailed      = "failed"      // an error turn (Claude is_error, Codex failed)
	TurnParked      = "parked"      // the gate parked a call; the agent stopped at it
	TurnInterrupted = "interrupted" // ended after Interrupt
)

// Why an error turn failed, when the adapter can tell (TurnResult.Failure).
const (
	// FailureRateLimit: a provider's rate or usage limit (429, overloaded);
	// TurnResult.ResetAt says when it resets, when the agent said so.
	FailureRateLimit = "rate_limit"
	// FailureAuth: the agent is not logged in, its login expired, or the
	// provider refused its key.
	FailureAuth = "auth"
	// FailureBudget: the agent stopped at the budget it was given
	// (Launch.Budget).
	FailureBudget = "budget"
	// FailureTransient: an API error a resumed attempt may clear (a server
	// error, or one the agent could not class); run resumes the turn.
	FailureTransient = "transient"
)

// TurnResult is how one turn ended.
type TurnResult struct {
	Outcome string
	// ErrorText describes an error turn ("API Error: 500 …").
	ErrorText string
	// Failure says why an error turn failed, when the adapter can tell
	// (FailureRateLimit, FailureAuth, FailureBudget); "" otherwise.
	Failure string
	// ResetAt is when the limit of a FailureRateLimit turn resets, when
	// the agent said so.
	ResetAt time.Time
	// ResumeFailed is set when the agent could not find the session to
	// resume; run then starts a fresh session with the same messages.
	ResumeFailed bool
	Usage        Usage
	// CostUSD is this turn's own cost.
	CostUSD float64
	// NumTurns are the turn's agent turns: the model's responses.
	NumTurns   int
	DurationMS int64
	// SessionCostUSD is the running cost the agent reports for its whole
	// session, when it keeps one across a resume (Claude Code); run hands
	// it to the next Launch.
	SessionCostUSD float64
	// UsageTotal is the agent's own running token counters for its whole
	// session where the turn ended, under blobhub-worker's keys, when the
	// agent keeps them (Codex: input_tokens, cached_input_tokens,
	// output_tokens); nil otherwise. run keeps it as thread.yaml's
	// agent.usage_total, where the worker measures its next turn from.
	UsageTotal map[string]int
}

// Usage is token usage of one turn.
type Usage struct {
	InputTokens       int64 `json:"input_tokens" yaml:"input_tokens"`
	InputTokensCached int64 `json:"input_tokens_cached" yaml:"input_tokens_cached"`
	OutputTokens      int64 `json:"output_tokens" yaml:"output_tokens"`
}
