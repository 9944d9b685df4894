package claude_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/internal/hermetic"
)

func TestMain(m *testing.M) {
	claudetest.MaybeRunFakeAgent()
	hermetic.Main(m.Run)
}

// newUUID is a new session id, as run picks one.
func newUUID() string { return agent.NewSessionID() }

// syncBuf is a thread.log in memory.
type syncBuf = agenttest.LogBuffer

// recorder is the shared test Handler.
type recorder = agenttest.Recorder

// start starts a session and closes it at cleanup.
func start(t *testing.T, l agent.Launch) *claude.Session {
	t.Helper()
	s, err := claude.Start(context.Background(), l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// turn runs one turn with a deadline.
func turn(t *testing.T, s *claude.Session, msg string, h agent.Handler) agent.TurnResult {
	t.Helper()
	return agenttest.RunTurn(t, s, msg, h, 60*time.Second)
}

func closeSession(t *testing.T, s *claude.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func asEnvelopeError(err error) *agent.Error {
	var e *agent.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
