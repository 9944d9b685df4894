package run

import "fmt"

// Exit codes (SPEC §11.1).
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitTurnFailed  = 3
	ExitUsage       = 64
	ExitNotJob      = 65
	ExitNoThread    = 66
	ExitNotHere     = 69
	ExitTempFail    = 75
	ExitRefused     = 77
	ExitConfig      = 78
	ExitInterrupted = 130 // SIGINT; SIGTERM is 143
	ExitTerminated  = 143
)

// Outcomes (SPEC §11.1).
const (
	OutcomeTurnCompleted = "turn_completed"
	OutcomeIdle          = "idle"
	OutcomeParked        = "parked"
	OutcomeStopped       = "stopped"
	OutcomeFailed        = "failed"
	OutcomeTurnFailed    = "turn_failed"
	OutcomeNotHere       = "not_here"
	OutcomeInterrupted   = "interrupted"
)

// Error codes that are not thread failures (SPEC §2, §4, §6).
const (
	CodeCredentialsNotFound    = "CREDENTIALS_NOT_FOUND"
	CodeInsecureCredentials    = "INSECURE_CREDENTIALS_PERMISSIONS"
	CodeInvalidConfig          = "INVALID_CONFIG"
	CodeUnknownJobType         = "UNKNOWN_JOB_TYPE"
	CodeMissingSessionKeys     = "MISSING_SESSION_KEYS"
	CodeDuplicateSectionTarget = "DUPLICATE_SECTION_TARGET"
	CodeSessionNotFound        = "SESSION_NOT_FOUND"
	CodeAgentNotInstalled      = "AGENT_NOT_INSTALLED"
	CodeAuthInvalid            = "AUTH_INVALID"
	CodeUserIdentityMismatch   = "USER_IDENTITY_MISMATCH"
	CodeSessionOwnedByOther    = "SESSION_OWNED_BY_DIFFERENT_USER"
	CodeWorkerObjectMalformed  = "SECTION_WORKER_OBJECT_MALFORMED"
	CodeBadAlias               = "INVALID_ALIAS"
	CodeLocked                 = "THREAD_LOCKED"
	CodeNoSlot                 = "NO_AGENT_SLOT"
	CodeUnavailable            = "BLOBHUB_UNAVAILABLE"
	CodeNotJob                 = "NOT_A_JOB_THREAD"
	CodeNoThread               = "THREAD_NOT_FOUND"
	CodeUnposted               = "ITEMS_UNPOSTED"
	CodeStateTreeInvalid       = "STATE_INVALID"
	CodePosterIsRunner         = "POSTER_IS_RUNNER"
)

// ExitError ends a command with an exit code and a coded message. main
// maps it to the process exit once, after the app returns (STYLE: errors
// and exits), so deferred unlocks and state writes always run.
type ExitError struct {
	Exit    int
	Code    string
	Message string
}

func (e *ExitError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func exitErr(exit int, code, format string, args ...any) *ExitError {
	return &ExitError{Exit: exit, Code: code, Message: fmt.Sprintf(format, args...)}
}
