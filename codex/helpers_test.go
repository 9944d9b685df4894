package codex

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
)

func closeNow(t testing.TB, s *Session) { agenttest.CloseWithin(t, s, 15*time.Second) }

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// recorder is the shared test Handler.
type recorder = agenttest.Recorder

func toolMeta(it agent.Item) map[string]any {
	m, _ := it.Meta["tool"].(map[string]any)
	return m
}

func asEnvelopeError(err error) *agent.Error {
	var e *agent.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testSession is a Session without a process whose answers to the agent
// are written to w, one line each.
func testSession(w io.Writer) *Session {
	s := &Session{logger: discardLogger(), q: jsonrpc.NewQueue()}
	s.rpc = jsonrpc.NewConn(jsonrpc.Options{Write: func(b []byte) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}})
	return s
}
