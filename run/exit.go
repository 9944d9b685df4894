package run

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blobhub/bhw-run/agent"
)

// Exit codes.
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
	ExitInterrupted = 130 // SIGINT
	ExitTerminated  = 143 // SIGTERM
)

// Outcomes of a run.
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

// Error codes of a command that ends before (or instead of) failing the
// thread. The checklist's thread failure codes are in checklist.go.
const (
	CodeInternal               = "INTERNAL"
	CodeCredentialsNotFound    = "CREDENTIALS_NOT_FOUND"
	CodeInsecureCredentials    = "INSECURE_CREDENTIALS_PERMISSIONS"
	CodeInsecurePermissions    = "INSECURE_STATE_PERMISSIONS"
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
	CodeThreadExists           = "THREAD_EXISTS"
	CodeThreadActive           = "THREAD_ACTIVE"
	CodeNotRetryable           = "NOT_RETRYABLE"
	CodeLocked                 = "THREAD_LOCKED"
	CodeNoSlot                 = "NO_AGENT_SLOT"
	CodeUnavailable            = "BLOBHUB_UNAVAILABLE"
	CodeStateChanged           = "STATE_CHANGED"
	CodeNotJob                 = "NOT_A_JOB_THREAD"
	CodeNoThread               = "THREAD_NOT_FOUND"
	CodeUnposted               = "ITEMS_UNPOSTED"
	CodeStateTreeInvalid       = "STATE_INVALID"
	CodePosterIsRunner         = "POSTER_IS_RUNNER"
	// CodeInterrupted: a signal ended the run (SIGINT 130, SIGTERM 143).
	CodeInterrupted = "INTERRUPTED"
	// CodeRateLimited: the agent's provider refused the turn for a rate or
	// usage limit; the messages wait for its reset.
	CodeRateLimited = "RATE_LIMITED"
	// CodeAgentAuthFailed: the agent is not logged in, or its provider
	// refused its key; the messages wait for a person to fix the machine.
	CodeAgentAuthFailed = "AGENT_AUTH_FAILED"
)

// ExitClass is one exit code: when a command ends with it, what a
// scheduler does about it, and the error codes that end a command with it.
// Exits is the one table `--help`, the README and exitErr are made from.
type ExitClass struct {
	Exit  int
	Label string // the code as shown: "75", "130 / 143"
	// Outcome is the run's outcome with this exit, "" for none.
	Outcome string
	// Help is the line of `bhw-run --help`.
	Help string
	// Scheduler is the README's "what a scheduler should do".
	Scheduler string
	// Codes are the error codes that end a command with this exit; an
	// uncoded error is a usage error (64) or not_here (69).
	Codes []string
}

// Exits is every exit code bhw-run ends with, in order.
var Exits = []ExitClass{
	{Exit: ExitOK, Label: "0", Outcome: "`turn_completed`, `idle`, `parked`, `stopped`",
		Help:      "turn_completed, idle, parked, stopped: nothing for a person to fix",
		Scheduler: "done; nothing for a person to fix"},
	{Exit: ExitFailed, Label: "1", Outcome: "`failed`",
		Help:      "failed: the thread was set to failed in this run (fix it, then bhw-run thread retry); INTERNAL: an error without a documented code",
		Scheduler: "the thread was set to `failed` in this run; a person fixes the cause and runs `bhw-run thread retry` (`INTERNAL`: a bug or a broken machine, state saved; a person looks)",
		Codes: []string{CodeInternal, CodeWorkFolderNotAbsolute, CodeWorkFolderNotFound, CodeWorkFolderNotADir, CodeWorkFolderNotReadable,
			CodeWorkFolderNotAllowed, CodeAgentTypeUnsupported, CodePermissionsUnsupported, CodeAutonomousForbidden, CodePolicyMissing,
			CodePolicyInvalid, CodeExecutableNotAllowed, CodeArtifactsSourceInvalid, CodeEnvelopeTooLarge, CodeBudgetInvalid, agent.CodeAgentCrashed, agent.CodeAgentSpawnFailed}},
	{Exit: ExitTurnFailed, Label: "3", Outcome: "`turn_failed`",
		Help:      "turn_failed: the turn did not complete (error turn, TURN_TIMEOUT, AGENT_STALLED, NO_PROGRESS: every tool call refused); the thread stays active",
		Scheduler: "the turn did not complete (error turn, `TURN_TIMEOUT`, `AGENT_STALLED`, `NO_PROGRESS`: the agent made tool calls and every one was refused); the thread stays active, the next message runs a new turn",
		Codes:     []string{CodeTurnFailed, CodeTurnTimeout, CodeAgentStalled, CodeNoProgress}},
	{Exit: ExitUsage, Label: "64", Outcome: "—",
		Help:      "usage: bad flags or alias; thread new/edit refusing a field (with the checklist's code)",
		Scheduler: "usage: bad flags or alias (fix the invocation); `thread new` and `thread edit` refuse a field the activation checklist would fail with that check's code (fix the flag)",
		Codes:     []string{CodeBadAlias, CodeThreadExists, CodeThreadActive, CodeNotRetryable}},
	{Exit: ExitNotJob, Label: "65", Outcome: "—",
		Help: "the alias is not a job thread", Scheduler: "the alias is not a job thread",
		Codes: []string{CodeNotJob}},
	{Exit: ExitNoThread, Label: "66", Outcome: "—",
		Help: "no such thread", Scheduler: "no such thread (also: the thread was deleted while the run posted to it; its agent is stopped, what it could not post stays journaled)",
		Codes: []string{CodeNoThread}},
	{Exit: ExitNotHere, Label: "69", Outcome: "`not_here`",
		Help:      "not_here: an active thread this state tree holds no record of",
		Scheduler: "an active thread this state tree holds no record of (another host's, or lost)"},
	{Exit: ExitTempFail, Label: "75", Outcome: "—",
		Help:      "try again later: THREAD_LOCKED, NO_AGENT_SLOT, BLOBHUB_UNAVAILABLE, ITEMS_UNPOSTED, STATE_CHANGED, RATE_LIMITED (after the reset time it names)",
		Scheduler: "try again later: lock held, no agent slot (within `--slot-wait`), BlobHub unreachable, items left unposted, the thread changed meanwhile, or `RATE_LIMITED`: the agent's provider refused the turn for a rate or usage limit, the messages wait and a run after the reset (in the message and the summary's `limited_until`) delivers them (systemd: `SuccessExitStatus=75`)",
		Codes:     []string{CodeLocked, CodeNoSlot, CodeUnavailable, CodeUnposted, CodeStateChanged, CodeRateLimited}},
	{Exit: ExitRefused, Label: "77", Outcome: "—",
		Help:      "refused: AUTH_INVALID, USER_IDENTITY_MISMATCH, SESSION_OWNED_BY_DIFFERENT_USER, SECTION_WORKER_OBJECT_MALFORMED",
		Scheduler: "refused: `AUTH_INVALID`, `USER_IDENTITY_MISMATCH`, `SESSION_OWNED_BY_DIFFERENT_USER`, `SECTION_WORKER_OBJECT_MALFORMED`",
		Codes:     []string{CodeAuthInvalid, CodeUserIdentityMismatch, CodeSessionOwnedByOther, CodeWorkerObjectMalformed}},
	{Exit: ExitConfig, Label: "78", Outcome: "—",
		Help:      "configuration: CREDENTIALS_NOT_FOUND, INSECURE_CREDENTIALS_PERMISSIONS, INVALID_CONFIG, SESSION_NOT_FOUND, AGENT_NOT_INSTALLED, AGENT_AUTH_FAILED, STATE_INVALID, INSECURE_STATE_PERMISSIONS, ...",
		Scheduler: "configuration: `CREDENTIALS_NOT_FOUND`, `INSECURE_CREDENTIALS_PERMISSIONS`, `INVALID_CONFIG`, `UNKNOWN_JOB_TYPE`, `MISSING_SESSION_KEYS`, `DUPLICATE_SECTION_TARGET`, `SESSION_NOT_FOUND`, `AGENT_NOT_INSTALLED`, `AGENT_AUTH_FAILED` (the agent is not logged in or its key was refused: the message names the command that fixes it; the thread stays active and its messages wait), `STATE_INVALID` (the state tree cannot be read or written: a file that is not a regular one, a read-only folder, a full disk), `INSECURE_STATE_PERMISSIONS` (a folder of the state tree or config.yaml that another user owns or may write to), `POSTER_IS_RUNNER`",
		Codes: []string{CodeCredentialsNotFound, CodeInsecureCredentials, CodeInvalidConfig, CodeUnknownJobType, CodeMissingSessionKeys,
			CodeDuplicateSectionTarget, CodeSessionNotFound, CodeAgentNotInstalled, CodeAgentAuthFailed, CodeStateTreeInvalid, CodeInsecurePermissions, CodePosterIsRunner}},
	{Exit: ExitInterrupted, Label: "130 / 143", Outcome: "`interrupted`",
		Help:      "interrupted by SIGINT/SIGTERM; state saved, the next run resumes",
		Scheduler: "SIGINT / SIGTERM: state saved, the next run resumes (a run stopped before it held the thread lock wrote nothing)",
		Codes:     []string{CodeInterrupted}},
}

// ExitHelp is the EXIT CODES section of `bhw-run --help`, from Exits.
func ExitHelp() string {
	var b strings.Builder
	b.WriteString("EXIT CODES:\n")
	for _, c := range Exits {
		fmt.Fprintf(&b, "   %-8s %s\n", strings.ReplaceAll(c.Label, " ", ""), c.Help)
	}
	return b.String()
}

// ExitTable is the README's exit-code table, from Exits.
func ExitTable() string {
	var b strings.Builder
	b.WriteString("| code | outcome | what a scheduler should do |\n|---|---|---|\n")
	for _, c := range Exits {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Label, c.Outcome, c.Scheduler)
	}
	return b.String()
}

// exitOf is the exit code of error code code.
func exitOf(code string) (int, bool) {
	for _, c := range Exits {
		for _, x := range c.Codes {
			if x == code {
				return c.Exit, true
			}
		}
	}
	return ExitFailed, false
}

// ExitError ends a command with an exit code and a coded message. main
// maps it to the process exit once, after the app returns, so deferred
// unlocks and state writes always run. Err is the cause, when there is one.
type ExitError struct {
	Exit    int
	Code    string
	Message string
	Err     error
}

func (e *ExitError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitErr is the error with code code; the exit comes from Exits. The last
// argument, when it is an error, is its cause.
func exitErr(code, format string, args ...any) *ExitError {
	exit, ok := exitOf(code)
	if !ok {
		// A code missing from the table is a bug; TestExitTableCoversEveryCode
		// keeps it from shipping.
		code = CodeInternal
	}
	e := &ExitError{Exit: exit, Code: code, Message: fmt.Sprintf(format, args...)}
	if n := len(args); n > 0 {
		if cause, ok := args[n-1].(error); ok {
			e.Err = cause
		}
	}
	return e
}

// usageErr is a usage error (64): the invocation names the wrong thing.
func usageErr(format string, args ...any) *ExitError {
	return &ExitError{Exit: ExitUsage, Message: fmt.Sprintf(format, args...)}
}

// UsageError is usageErr for main.
func UsageError(format string, args ...any) *ExitError { return usageErr(format, args...) }

// Errorf is exitErr for main.
func Errorf(code, format string, args ...any) *ExitError { return exitErr(code, format, args...) }

// Exit is the exit of err for every command, run or not: an *ExitError as
// it is, anything else INTERNAL (1), since an error without a documented
// code is a bug or a broken machine a person must look at. nil is nil.
func Exit(err error) *ExitError {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee
	}
	return &ExitError{Exit: ExitFailed, Code: CodeInternal, Message: err.Error(), Err: err}
}
