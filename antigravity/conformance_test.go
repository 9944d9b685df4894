package antigravity_test

import (
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity"
)

// TestConformance: the Antigravity adapter against the stand-in agy, its
// gate through the PreToolUse hook and bhw-run's hook program.
func TestConformance(t *testing.T) {
	agenttest.Conformance(t, agenttest.Fixture{
		Adapter: antigravity.Adapter,
		Launch: func(t *testing.T, s agenttest.Script) agent.Launch {
			l, _ := launch(t, s, "approval")
			return l
		},
		Graces: func(s agent.Session) {
			a := s.(*antigravity.Session)
			a.ExitWait, a.KillGrace, a.TurnGrace = 100*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
		},
		DeniedFails: true,
	})
}
