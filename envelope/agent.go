package envelope

import (
	"io"
	"log/slog"
	"time"

	"github.com/blobhub/bhw-run/policy"
)

// Launch is everything an agent adapter needs to start the agent for one
// activation. run resolves it (SPEC §5.2 agent.resolved) and builds Env from
// the allowlist of SPEC §7; the adapter adds only its own protocol variables.
type Launch struct {
	Executable  string   // absolute path of the native binary
	WorkFolder  string   // cwd of the agent
	Env         []string // complete environment, already filtered
	SessionID   string   // Claude session id / Codex thread id
	Resume      bool     // true: resume SessionID; false: new session (Claude uses SessionID as --session-id)
	Model       string
	Effort      string
	Permissions string // autonomous | guarded | approval
	ExtraArgs   []string
	Sandbox     string // Codex sandbox for approval/guarded: workspace-write | read-only
	ConfigDir   string // CLAUDE_CONFIG_DIR (already in Env when set)
	CodexHome   string // CODEX_HOME (already in Env when set)
	// Log receives the agent's full stdio and stderr (thread.log). The writer
	// redacts secrets; adapters write raw lines to it.
	Log    io.Writer
	Logger *slog.Logger
	// MaxLine bounds one line of agent output (default 64 MiB).
	MaxLine int
	// KillGrace is how long Close waits after SIGTERM before SIGKILL
	// (0: the adapter's default).
	KillGrace time.Duration
}

// Handler is how an adapter reports a turn to run. Both methods are called
// from the adapter's reading goroutine, one at a time, in stream order.
type Handler interface {
	// Emit relays one thread item (text, tool_call, tool_result, thinking,
	// status). run journals and posts it.
	Emit(Item)
	// Decide is the gate: every permission request of the agent goes here and
	// the adapter answers the agent with the verdict. It is never skipped.
	Decide(policy.Call) policy.Verdict
}

// Turn outcomes an adapter reports.
const (
	TurnCompleted   = "completed"   // the agent ended its turn normally
	TurnFailed      = "failed"      // an error turn (Claude is_error, Codex failed)
	TurnParked      = "parked"      // the gate parked a call; the agent stopped at it
	TurnInterrupted = "interrupted" // ended after Interrupt
)

// TurnResult is how one turn ended.
type TurnResult struct {
	Outcome string
	// ErrorText describes an error turn ("API Error: 500 …").
	ErrorText string
	// ResumeFailed is set when the agent could not find the session to
	// resume (SPEC §6.4: Claude "No conversation found", Codex "no rollout
	// found"); run then starts a fresh session.
	ResumeFailed bool
	Usage        Usage
	CostUSD      float64
	NumTurns     int
	DurationMS   int64
}

// Usage is token usage of one turn.
type Usage struct {
	InputTokens       int64 `json:"input_tokens" yaml:"input_tokens"`
	InputTokensCached int64 `json:"input_tokens_cached" yaml:"input_tokens_cached"`
	OutputTokens      int64 `json:"output_tokens" yaml:"output_tokens"`
}
