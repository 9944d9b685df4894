package agent

import (
	"fmt"

	"github.com/blobhub/bhw-run/exit"
)

// Error is a failure that ends the thread with its documented code, e.g.
// AGENT_CRASHED from an adapter or WORK_FOLDER_NOT_FOUND from run's
// checklist: run records it in thread.yaml, sets the thread failed and
// posts thread_failed. Ask for it with errors.As.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes an adapter returns; their exit is in exit.Classes.
const (
	CodeAgentCrashed     = exit.CodeAgentCrashed     // the process ended before its turn-end line
	CodeAgentSpawnFailed = exit.CodeAgentSpawnFailed // bad flags, refused start, crash before init
)

// Overrun is the AGENT_CRASHED of a turn whose agent (what) sent messages
// faster than the turn could relay them, past the bound of what may wait
// for it (why): the turn ends there, and run stops the agent. Nothing of
// the agent's waits unbounded in bhw-run (docs/run.md, Reading from the
// agent).
func Overrun(what string, why error) *Error {
	return Errorf(CodeAgentCrashed, "%s sent messages faster than bhw-run could relay them (%v): the turn is ended and the agent stopped", what, why)
}
