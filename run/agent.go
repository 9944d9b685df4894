package run

import (
	"context"

	"github.com/blobhub/bhw-run/envelope"
)

// Session is one live agent process, driven by an adapter (claude, codex).
// Both adapters satisfy it; main wires them in as Starters.
type Session interface {
	// SessionID is the agent's resume pointer (Claude session id, Codex
	// thread id), known once the session has started.
	SessionID() string
	// Pgid is the agent's process group, recorded in thread.yaml.
	Pgid() int
	// Turn sends one user message and relays the turn through h until the
	// agent ends it, the gate parks it, or ctx is cancelled. A process that
	// dies before its turn-end line returns an *envelope.Error with
	// AGENT_CRASHED.
	Turn(ctx context.Context, message string, h envelope.Handler) (envelope.TurnResult, error)
	// Interrupt asks the agent to stop the running turn politely (Claude
	// interrupt control request, Codex turn/interrupt). Safe to call from
	// another goroutine while Turn runs.
	Interrupt() error
	// Close ends the process: close its input and wait a short while, then
	// SIGTERM to the group, SIGKILL after grace. It returns once the process
	// is gone.
	Close(ctx context.Context) error
}

// Starter launches an agent. A start that fails (bad flags, refused start,
// exit before init) returns an *envelope.Error with AGENT_SPAWN_FAILED; a
// resume of an unknown session is reported by Turn (TurnResult.ResumeFailed).
type Starter func(ctx context.Context, l envelope.Launch) (Session, error)
