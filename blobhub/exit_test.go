package blobhub_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/exit"
)

// TestAsExit: what the client answers over real HTTP from the test hub
// becomes the exit its class documents, with the call named in the message;
// a cancelled context and an *exit.Error pass through as they are.
func TestAsExit(t *testing.T) {
	srv := bhtest.New(t)
	srv.Put("big", `{"type":"note","text":"`+strings.Repeat("x", 200)+`"}`)
	srv.Put("note", `{"type":"note"}`)
	c := srv.Client(bhtest.RunnerKey)
	cfg := srv.Config(bhtest.RunnerKey)
	cfg.RetryBudget = time.Millisecond
	impatient := newClient(t, cfg)
	ctx := t.Context()

	_, refused := srv.Client("bhk_nobody").Me(ctx)
	_, tooLarge := c.Download(blobhub.WithMaxValue(ctx, 100), "big")
	_, noThread := c.Post(ctx, "note", text("x"))
	srv.FailNext("list_session_objects", 1, 503, "60")
	_, down := impatient.List(ctx)
	for _, tc := range []struct {
		name, what, code, says string
		err                    error
	}{
		{"a refused key", "users/me", exit.CodeAuthInvalid, "refused the API key (users/me)", refused},
		{"a value over its bound", "download big", exit.CodeEnvelopeTooLarge, "download big: ", tooLarge},
		{"no such thread", "post to note", exit.CodeNoThread, "no such thread (post to note)", noThread},
		{"a BlobHub that is down", "list", exit.CodeUnavailable, "unreachable (list)", down},
		{"another answer", "x", exit.CodeUnavailable, "answered an error (x): odd", errors.New("odd")},
	} {
		err := blobhub.AsExit(tc.err, tc.what)
		var ee *exit.Error
		if !errors.As(err, &ee) || ee.Code != tc.code || !strings.Contains(ee.Message, tc.says) {
			t.Errorf("%s: AsExit(%v) = %v; want %s saying %q", tc.name, tc.err, err, tc.code, tc.says)
		}
	}
	// The bound the download carried, not one AsExit knows.
	if err := blobhub.AsExit(tooLarge, "download big"); !strings.Contains(err.Error(), "is 100 bytes: shrink it") {
		t.Errorf("a value over its bound: %v; want the bound of 100 bytes named", err)
	}

	coded := exit.Errorf(exit.CodeNotJob, "not a job")
	if err := blobhub.AsExit(coded, "x"); err != error(coded) {
		t.Errorf("an *exit.Error became %v; want it as it is", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := blobhub.AsExit(cancelled.Err(), "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context became %v; want it as it is", err)
	}
}
