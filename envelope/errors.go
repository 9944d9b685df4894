package envelope

import "fmt"

// Error is a thread-level failure with its documented code (SPEC §6.3,
// §6.4), e.g. WORK_FOLDER_NOT_FOUND or AGENT_CRASHED. Ask for it with errors.As.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes an adapter returns.
const (
	CodeAgentCrashed     = "AGENT_CRASHED"      // the process ended before its turn-end line
	CodeAgentSpawnFailed = "AGENT_SPAWN_FAILED" // bad flags, refused start, crash before init
)
