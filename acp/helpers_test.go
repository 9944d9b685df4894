package acp

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/internal/hermetic"
)

func TestMain(m *testing.M) {
	acptest.MaybeRunFakeAgent()
	hermetic.Main(m.Run)
}

func presetOf(t testing.TB, typ string) *preset {
	for _, p := range presets {
		if p.typ == typ {
			return p
		}
	}
	t.Fatalf("no preset %s", typ)
	return nil
}

func closeNow(t testing.TB, s *Session) { agenttest.CloseWithin(t, s, 30*time.Second) }

func runTurn(t *testing.T, s *Session, msg string, h agent.Handler) agent.TurnResult {
	t.Helper()
	return agenttest.RunTurn(t, s, msg, h, 3*time.Minute)
}

func toolMeta(it agent.Item) map[string]any {
	m, _ := it.Meta["tool"].(map[string]any)
	return m
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func types(h *agenttest.Recorder) string {
	var out []string
	for _, it := range h.Items() {
		out = append(out, it.Type())
	}
	return strings.Join(out, " ")
}
