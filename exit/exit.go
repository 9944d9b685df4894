// Package exit is how every bhw-run command ends: the exit codes, the
// documented error codes and the exit each belongs to (Classes, the one
// table --help and the README are made from), the coded Error main maps to
// the process exit, and the exits of a command a signal ended. It is a
// leaf: anything may import it, it imports nothing of bhw-run's.
package exit

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes.
const (
	OK          = 0
	Failed      = 1
	TurnFailed  = 3
	Usage       = 64
	NotJob      = 65
	NoThread    = 66
	NotHere     = 69
	TempFail    = 75
	Refused     = 77
	Config      = 78
	Interrupted = 130 // SIGINT
	Terminated  = 143 // SIGTERM
)

// Error codes of a command that ends before (or instead of) failing the
// thread.
const (
	CodeInternal               = "INTERNAL"
	CodeCredentialsNotFound    = "CREDENTIALS_NOT_FOUND"
	CodeInsecureCredentials    = "INSECURE_CREDENTIALS_PERMISSIONS"
	CodeInsecurePermissions    = "INSECURE_STATE_PERMISSIONS"
	CodeInvalidConfig          = "INVALID_CONFIG"
	CodeUnknownJobType         = "UNKNOWN_JOB_TYPE"
	CodeMissingSessionKeys     = "MISSING_SESSION_KEYS"
	CodeDuplicateSectionTarget = "DUPLICATE_SECTION_TARGET"
	// CodeOverlappingPrefix: two sections watch prefixes of one session
	// that share objects ("" overlaps every prefix, "a/" overlaps "a/b/").
	CodeOverlappingPrefix     = "OVERLAPPING_SECTION_PREFIX"
	CodeSessionNotFound       = "SESSION_NOT_FOUND"
	CodeAgentNotInstalled     = "AGENT_NOT_INSTALLED"
	CodeAuthInvalid           = "AUTH_INVALID"
	CodeUserIdentityMismatch  = "USER_IDENTITY_MISMATCH"
	CodeSessionOwnedByOther   = "SESSION_OWNED_BY_DIFFERENT_USER"
	CodeWorkerObjectMalformed = "SECTION_WORKER_OBJECT_MALFORMED"
	CodeBadAlias              = "INVALID_ALIAS"
	CodeThreadExists          = "THREAD_EXISTS"
	CodeThreadActive          = "THREAD_ACTIVE"
	CodeNotRetryable          = "NOT_RETRYABLE"
	CodeLocked                = "THREAD_LOCKED"
	CodeNoSlot                = "NO_AGENT_SLOT"
	CodeUnavailable           = "BLOBHUB_UNAVAILABLE"
	CodeStateChanged          = "STATE_CHANGED"
	CodeNotJob                = "NOT_A_JOB_THREAD"
	CodeNoThread              = "THREAD_NOT_FOUND"
	CodeUnposted              = "ITEMS_UNPOSTED"
	CodeStateTreeInvalid      = "STATE_INVALID"
	CodePosterIsRunner        = "POSTER_IS_RUNNER"
	// CodeInterrupted: a signal ended the run (SIGINT 130, SIGTERM 143).
	CodeInterrupted = "INTERRUPTED"
	// CodeRateLimited: the agent's provider refused the turn for a rate or
	// usage limit; the messages wait for its reset.
	CodeRateLimited = "RATE_LIMITED"
	// CodeWorkerRunning: a live blobhub-worker holds the state tree (its
	// instance.yaml); the thread waits until it is stopped.
	CodeWorkerRunning = "WORKER_ALREADY_RUNNING"
	// CodeAgentAuthFailed: the agent is not logged in, or its provider
	// refused its key; the messages wait for a person to fix the machine.
	CodeAgentAuthFailed = "AGENT_AUTH_FAILED"
	// CodeModelUnreachable: the agent's model is on this machine (a
	// loopback URL in its environment) and refuses connections; the
	// messages wait for a person to start it.
	CodeModelUnreachable = "MODEL_UNREACHABLE"
)

// Thread failure codes of the activation checklist.
const (
	CodeWorkFolderNotAbsolute  = "WORK_FOLDER_NOT_ABSOLUTE"
	CodeWorkFolderNotFound     = "WORK_FOLDER_NOT_FOUND"
	CodeWorkFolderNotADir      = "WORK_FOLDER_NOT_A_DIR"
	CodeWorkFolderNotReadable  = "WORK_FOLDER_NOT_READABLE"
	CodeWorkFolderNotAllowed   = "WORK_FOLDER_NOT_ALLOWED"
	CodeAgentTypeUnsupported   = "AGENT_TYPE_UNSUPPORTED"
	CodePermissionsUnsupported = "PERMISSIONS_UNSUPPORTED"
	CodeAutonomousForbidden    = "POLICY_AUTONOMOUS_FORBIDDEN"
	CodePolicyMissing          = "POLICY_MISSING"
	CodePolicyInvalid          = "POLICY_INVALID"
	CodeExecutableNotAllowed   = "AGENT_EXECUTABLE_NOT_ALLOWED"
	CodeArtifactsSourceInvalid = "ARTIFACTS_SOURCE_INVALID"
	CodeEnvelopeTooLarge       = "ENVELOPE_TOO_LARGE"
	CodeTurnTimeout            = "TURN_TIMEOUT"
	CodeAgentStalled           = "AGENT_STALLED"
	CodeTurnFailed             = "TURN_FAILED"
	// CodeNoProgress: the turn made tool calls and every one was refused.
	CodeNoProgress = "NO_PROGRESS"
	// CodeBudgetInvalid: agent.budget is not numbers above 0.
	CodeBudgetInvalid = "BUDGET_INVALID"
	// CodeConfinementUnavailable: the agent must be confined and this
	// kernel cannot confine it (no Landlock; confine.ports on an ABI below
	// 4).
	CodeConfinementUnavailable = "CONFINEMENT_UNAVAILABLE"
	// Thread failure codes an adapter returns (agent names them too).
	CodeAgentCrashed     = "AGENT_CRASHED"      // the process ended before its turn-end line
	CodeAgentSpawnFailed = "AGENT_SPAWN_FAILED" // bad flags, refused start, crash before init
)

// Class is one exit code: when a command ends with it, what a scheduler
// does about it, and the error codes that end a command with it. Classes
// is the one table `--help`, the README and Errorf are made from.
type Class struct {
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

// Classes is every exit code bhw-run ends with, in order.
var Classes = []Class{
	{Exit: OK, Label: "0", Outcome: "`turn_completed`, `idle`, `parked`, `stopped`",
		Help:      "turn_completed, idle, parked, stopped: nothing for a person to fix",
		Scheduler: "done; nothing for a person to fix"},
	{Exit: Failed, Label: "1", Outcome: "`failed`",
		Help:      "failed: the thread was set to failed in this run (fix it, then bhw-run thread retry); INTERNAL: an error without a documented code",
		Scheduler: "the thread was set to `failed` in this run; a person fixes the cause and runs `bhw-run thread retry` (`INTERNAL`: a bug or a broken machine, state saved; a person looks)",
		Codes: []string{CodeInternal, CodeWorkFolderNotAbsolute, CodeWorkFolderNotFound, CodeWorkFolderNotADir, CodeWorkFolderNotReadable,
			CodeWorkFolderNotAllowed, CodeAgentTypeUnsupported, CodePermissionsUnsupported, CodeAutonomousForbidden, CodePolicyMissing,
			CodePolicyInvalid, CodeExecutableNotAllowed, CodeArtifactsSourceInvalid, CodeEnvelopeTooLarge, CodeBudgetInvalid, CodeConfinementUnavailable, CodeAgentCrashed, CodeAgentSpawnFailed}},
	{Exit: TurnFailed, Label: "3", Outcome: "`turn_failed`",
		Help:      "turn_failed: the turn did not complete (error turn, TURN_TIMEOUT, AGENT_STALLED, NO_PROGRESS: every tool call refused); the thread stays active",
		Scheduler: "the turn did not complete (error turn, `TURN_TIMEOUT`, `AGENT_STALLED`, `NO_PROGRESS`: the agent made tool calls and every one was refused); the thread stays active, the next message runs a new turn",
		Codes:     []string{CodeTurnFailed, CodeTurnTimeout, CodeAgentStalled, CodeNoProgress}},
	{Exit: Usage, Label: "64", Outcome: "—",
		Help:      "usage: bad flags or alias; thread new/edit refusing a field (with the checklist's code)",
		Scheduler: "usage: bad flags or alias (fix the invocation); `thread new` and `thread edit` refuse a field the activation checklist would fail with that check's code (fix the flag)",
		Codes:     []string{CodeBadAlias, CodeThreadExists, CodeThreadActive, CodeNotRetryable}},
	{Exit: NotJob, Label: "65", Outcome: "—",
		Help: "the alias is not a job thread", Scheduler: "the alias is not a job thread",
		Codes: []string{CodeNotJob}},
	{Exit: NoThread, Label: "66", Outcome: "—",
		Help: "no such thread", Scheduler: "no such thread (also: the thread was deleted while the run posted to it; its agent is stopped, what it could not post stays journaled)",
		Codes: []string{CodeNoThread}},
	{Exit: NotHere, Label: "69", Outcome: "`not_here`",
		Help:      "not_here: an active thread this state tree holds no record of",
		Scheduler: "an active thread this state tree holds no record of (another host's, or lost)"},
	{Exit: TempFail, Label: "75", Outcome: "—",
		Help:      "try again later: THREAD_LOCKED, NO_AGENT_SLOT, BLOBHUB_UNAVAILABLE, ITEMS_UNPOSTED, STATE_CHANGED, RATE_LIMITED (after the reset time it names), WORKER_ALREADY_RUNNING (stop the daemon)",
		Scheduler: "try again later: lock held, no agent slot (within `--slot-wait`), BlobHub unreachable, items left unposted, the thread changed meanwhile, or `RATE_LIMITED`: the agent's provider refused the turn for a rate or usage limit, the messages wait and a run after the reset (in the message and the summary's `limited_until`) delivers them, or `WORKER_ALREADY_RUNNING`: a live blobhub-worker holds the state tree, and the thread waits until it is stopped (systemd: `SuccessExitStatus=75`)",
		Codes:     []string{CodeLocked, CodeNoSlot, CodeUnavailable, CodeUnposted, CodeStateChanged, CodeRateLimited, CodeWorkerRunning}},
	{Exit: Refused, Label: "77", Outcome: "—",
		Help:      "refused: AUTH_INVALID, USER_IDENTITY_MISMATCH, SESSION_OWNED_BY_DIFFERENT_USER, SECTION_WORKER_OBJECT_MALFORMED",
		Scheduler: "refused: `AUTH_INVALID`, `USER_IDENTITY_MISMATCH`, `SESSION_OWNED_BY_DIFFERENT_USER`, `SECTION_WORKER_OBJECT_MALFORMED`",
		Codes:     []string{CodeAuthInvalid, CodeUserIdentityMismatch, CodeSessionOwnedByOther, CodeWorkerObjectMalformed}},
	{Exit: Config, Label: "78", Outcome: "—",
		Help:      "configuration: CREDENTIALS_NOT_FOUND, INSECURE_CREDENTIALS_PERMISSIONS, INVALID_CONFIG, SESSION_NOT_FOUND, AGENT_NOT_INSTALLED, AGENT_AUTH_FAILED, STATE_INVALID, INSECURE_STATE_PERMISSIONS, ...",
		Scheduler: "configuration: `CREDENTIALS_NOT_FOUND`, `INSECURE_CREDENTIALS_PERMISSIONS`, `INVALID_CONFIG`, `UNKNOWN_JOB_TYPE`, `MISSING_SESSION_KEYS`, `DUPLICATE_SECTION_TARGET`, `OVERLAPPING_SECTION_PREFIX`, `SESSION_NOT_FOUND`, `AGENT_NOT_INSTALLED`, `AGENT_AUTH_FAILED` (the agent is not logged in or its key was refused: the message names the command that fixes it; the thread stays active and its messages wait), `MODEL_UNREACHABLE` (the agent's model is on this machine and refuses connections: the message names its URL and how to start it; the messages wait), `STATE_INVALID` (the state tree cannot be read or written: a file that is not a regular one, a read-only folder, a full disk), `INSECURE_STATE_PERMISSIONS` (a folder of the state tree or config.yaml that another user owns or may write to), `POSTER_IS_RUNNER`",
		Codes: []string{CodeCredentialsNotFound, CodeInsecureCredentials, CodeInvalidConfig, CodeUnknownJobType, CodeMissingSessionKeys,
			CodeDuplicateSectionTarget, CodeOverlappingPrefix, CodeSessionNotFound, CodeAgentNotInstalled, CodeAgentAuthFailed, CodeStateTreeInvalid, CodeInsecurePermissions, CodePosterIsRunner, CodeModelUnreachable}},
	{Exit: Interrupted, Label: "130 / 143", Outcome: "`interrupted`",
		Help:      "interrupted by SIGINT/SIGTERM; state saved, the next run resumes",
		Scheduler: "SIGINT / SIGTERM: state saved, the next run resumes (a run stopped before it held the thread lock wrote nothing)",
		Codes:     []string{CodeInterrupted}},
}

// Help is the EXIT CODES section of `bhw-run --help`, from Classes.
func Help() string {
	var b strings.Builder
	b.WriteString("EXIT CODES:\n")
	for _, c := range Classes {
		fmt.Fprintf(&b, "   %-8s %s\n", strings.ReplaceAll(c.Label, " ", ""), c.Help)
	}
	return b.String()
}

// Table is the README's exit-code table, from Classes.
func Table() string {
	var b strings.Builder
	b.WriteString("| code | outcome | what a scheduler should do |\n|---|---|---|\n")
	for _, c := range Classes {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Label, c.Outcome, c.Scheduler)
	}
	return b.String()
}

// OfCode is the exit code of error code code, and whether Classes has it.
func OfCode(code string) (int, bool) {
	for _, c := range Classes {
		for _, x := range c.Codes {
			if x == code {
				return c.Exit, true
			}
		}
	}
	return Failed, false
}

// Error ends a command with an exit code and a coded message. main maps
// it to the process exit once, after the app returns, so deferred unlocks
// and state writes always run. Err is the cause, when there is one.
type Error struct {
	Exit    int
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf is the error with code code; the exit comes from Classes. The
// last argument, when it is an error, is its cause.
func Errorf(code, format string, args ...any) *Error {
	exit, ok := OfCode(code)
	if !ok {
		// A code missing from the table is a bug; TestTableCoversEveryCode
		// keeps it from shipping.
		code = CodeInternal
	}
	e := &Error{Exit: exit, Code: code, Message: fmt.Sprintf(format, args...)}
	if n := len(args); n > 0 {
		if cause, ok := args[n-1].(error); ok {
			e.Err = cause
		}
	}
	return e
}

// Usagef is a usage error (64): the invocation names the wrong thing.
func Usagef(format string, args ...any) *Error {
	return &Error{Exit: Usage, Message: fmt.Sprintf(format, args...)}
}

// Of is the exit of err for every command, run or not: an *Error as it
// is, anything else INTERNAL (1), since an error without a documented code
// is a bug or a broken machine a person must look at. nil is nil.
func Of(err error) *Error {
	if err == nil {
		return nil
	}
	var ee *Error
	if errors.As(err, &ee) {
		return ee
	}
	return &Error{Exit: Failed, Code: CodeInternal, Message: err.Error(), Err: err}
}
