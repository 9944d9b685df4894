package blobhub

import (
	"context"
	"errors"

	"github.com/blobhub/bhw-run/exit"
)

// AsExit is a BlobHub error as the exit a command ends with: an
// *exit.Error as it is, a refused key AUTH_INVALID (77), a host that does
// not resolve INVALID_CONFIG (78), no such thread NO_THREAD, a value over
// its download's bound ENVELOPE_TOO_LARGE, a cancelled context as it is,
// anything else BLOBHUB_UNAVAILABLE (75). what names the call for the
// message ("users/me", "download <alias>").
//
// It lives beside the client because which sentinel means which exit is a
// fact about BlobHub's answers; exit/ is a leaf every package may import.
func AsExit(err error, what string) error {
	var ee *exit.Error
	switch {
	case errors.As(err, &ee):
		return err
	case errors.Is(err, ErrAuth):
		return exit.Errorf(exit.CodeAuthInvalid, "BlobHub refused the API key (%s); check the key or profile", what)
	case errors.Is(err, ErrNoSuchHost):
		// A wrong URL: no later run mends it, so it is configuration, not
		// a BlobHub that is down.
		var nsh *NoSuchHostError
		errors.As(err, &nsh)
		return exit.Errorf(exit.CodeInvalidConfig, "%v (%s); check --api-url, BLOBHUB_API_URL or the url of the credentials profile", nsh, what)
	case errors.Is(err, ErrNoThread):
		// invalid_thread_envelope: BlobHub's final word that the alias is
		// not a thread (deleted, say), not a reason to try again later.
		return exit.Errorf(exit.CodeNoThread, "BlobHub has no such thread (%s): the alias does not exist or is not a thread; check the alias, or create the thread with `bhw-run thread new`", what)
	case errors.Is(err, ErrTooLarge):
		// The bound is the caller's (WithMaxValue); the only bounded
		// download is an envelope's, bounded by envelope.MaxSize.
		var tl *TooLargeError
		errors.As(err, &tl)
		var most int64
		if tl != nil {
			most = tl.Max
		}
		return exit.Errorf(exit.CodeEnvelopeTooLarge, "%s: %v; the most bhw-run reads of an envelope is %d bytes: shrink it", what, err, most)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrAmbiguous):
		return exit.Errorf(exit.CodeUnavailable, "BlobHub is unreachable (%s): %v; the next run retries", what, err)
	}
	return exit.Errorf(exit.CodeUnavailable, "BlobHub answered an error (%s): %v", what, err)
}
