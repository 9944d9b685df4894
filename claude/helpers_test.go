package claude_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

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
