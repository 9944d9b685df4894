package agenttest

import (
	"context"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
)

// RunTurn runs one turn of sess with message, failing t when it returns an
// error or outlasts timeout: the adapters' own tests drive their sessions
// with it.
func RunTurn(t testing.TB, sess agent.Session, message string, h agent.Handler, timeout time.Duration) agent.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := sess.Turn(ctx, message, h)
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	return res
}

// CloseWithin closes sess, giving it timeout, and reports an error to t.
func CloseWithin(t testing.TB, sess agent.Session, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := sess.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
