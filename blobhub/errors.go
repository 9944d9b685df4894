package blobhub

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinels; ask with errors.Is.
var (
	// ErrNotFound: HTTP 404 or error code "not_found".
	ErrNotFound = errors.New("not found")
	// ErrAuth: HTTP 401/403.
	ErrAuth = errors.New("the API key was refused; check --api-key, BLOBHUB_API_KEY or the credentials profile")
	// ErrItemTooLarge: error code "thread_item_too_large" (an item over the
	// budget, docs/state.md).
	ErrItemTooLarge = errors.New("thread item too large")
	// ErrNoThread: error code "invalid_thread_envelope", BlobHub's
	// documented answer of post_session_thread_item and
	// list_session_thread_items for an alias that does not exist or whose
	// value is not a thread. It is the server's final word on the alias:
	// never worth retrying, and never a refusal of the item itself.
	ErrNoThread = errors.New("no such thread: the alias does not exist or is not a thread")
	// ErrUnavailable: 429/5xx/connection errors past the retry budget, or a
	// cancelled context.
	ErrUnavailable = errors.New("blobhub is unavailable; try again later")
	// ErrAmbiguous: a post whose outcome is unknown. The item may or may not
	// be stored; list the thread's items to reconcile before posting again
	// (the journal's rule, docs/state.md).
	ErrAmbiguous = errors.New("post outcome unknown: the item may or may not be stored; list the thread's items before posting again")
	// ErrNoSuchHost: the API URL's host does not resolve. The resolver's
	// final answer (not a timeout, not a resolver out of reach) is a wrong
	// URL, which no retry mends; see *NoSuchHostError.
	ErrNoSuchHost = errors.New("no such host")
	// ErrTooLarge: an object whose value is larger than the bound the
	// caller put on its download (WithMaxValue); see *TooLargeError.
	ErrTooLarge = errors.New("object value too large")
)

// NoSuchHostError is a call to an API URL whose host does not resolve. It
// matches ErrNoSuchHost.
type NoSuchHostError struct {
	URL string // the API URL, its credentials redacted
	Err error  // the resolver's answer
}

func (e *NoSuchHostError) Error() string {
	return fmt.Sprintf("the host of the API URL %s does not resolve (%v)", e.URL, e.Err)
}

// Is reports ErrNoSuchHost.
func (e *NoSuchHostError) Is(target error) bool { return target == ErrNoSuchHost }

func (e *NoSuchHostError) Unwrap() error { return e.Err }

// TooLargeError is a download refused by its bound: the value holds more
// than Max bytes (Size when known, else 0). It matches ErrTooLarge.
type TooLargeError struct {
	Size, Max int64
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("the value holds %d bytes, more than the %d read", e.Size, e.Max)
	}
	return fmt.Sprintf("the value holds more than the %d bytes read", e.Max)
}

// Is reports ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Error codes of the API. thread_item_too_large and
// invalid_thread_envelope are documented (post_session_thread_item,
// list_session_thread_items), not_found for get_session and
// get_session_thread_item. A missing session object is answered 403
// (docs/wire.md).
const (
	CodeNotFound              = "not_found"
	CodeThreadItemTooLarge    = "thread_item_too_large"
	CodeInvalidThreadEnvelope = "invalid_thread_envelope"
)

// APIError is an answer the server gave with an error status. Other 4xx are
// permanent: no retry. It matches ErrNotFound, ErrAuth, ErrItemTooLarge and
// ErrNoThread under errors.Is by status and code. invalid_thread_envelope
// is recognised by its code whatever the status: the documentation names
// the code but not the status it comes with.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Absent marks a 403 the API gives for an object that does not exist
	// (download_session_object): it matches ErrNotFound as well as ErrAuth.
	Absent bool
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("status %d", e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Code != "" {
		s += ", code " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	switch {
	case e.Absent:
		return "not found, or not readable with this key (" + s + ")"
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ErrAuth.Error() + " (" + s + ")"
	case e.Code == CodeThreadItemTooLarge:
		return "thread item too large (" + s + "); shrink it"
	case e.Code == CodeInvalidThreadEnvelope:
		return "no such thread (" + s + "): the alias does not exist or is not a thread"
	}
	return s
}

// Is reports the sentinel this answer means.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Code == CodeNotFound || e.Absent
	case ErrAuth:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrItemTooLarge:
		return e.Code == CodeThreadItemTooLarge
	case ErrNoThread:
		return e.Code == CodeInvalidThreadEnvelope
	}
	return false
}

// OpError names the command and alias of a failed call.
type OpError struct {
	Command string // e.g. download_session_object
	Alias   string // empty for session-wide commands
	Err     error
}

func (e *OpError) Error() string {
	if e.Alias != "" {
		return fmt.Sprintf("blobhub %s %q: %v", e.Command, e.Alias, e.Err)
	}
	return fmt.Sprintf("blobhub %s: %v", e.Command, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

func opErr(cmd, alias string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Command: cmd, Alias: alias, Err: err}
}

// transientAnswer is a 429 or 5xx answer: its text, but not an *APIError
// under errors.As, which callers take for the server's final word (a
// permanent refusal: the item dropped, the artifact skipped).
type transientAnswer struct{ e *APIError }

func (t transientAnswer) Error() string { return t.e.Error() }

// unavailable wraps a transient cause (kept for errors.Is, e.g.
// context.Canceled) as ErrUnavailable.
func unavailable(cause error) error {
	if cause == nil {
		return ErrUnavailable
	}
	return fmt.Errorf("%w (%w)", ErrUnavailable, cause)
}

func ambiguous(cause error) error {
	if cause == nil {
		return ErrAmbiguous
	}
	return fmt.Errorf("%w (%w)", ErrAmbiguous, cause)
}
