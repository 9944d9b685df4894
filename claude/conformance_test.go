package claude_test

import (
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

// TestConformance: the Claude adapter against the fake claude.
func TestConformance(t *testing.T) {
	agenttest.Conformance(t, agenttest.Fixture{
		Adapter: claude.Adapter,
		Launch: func(t *testing.T, s agenttest.Script) agent.Launch {
			l, log := fakeLaunch(t, claudetest.FromScript(s), "approval")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("thread.log:\n%s", log.String())
				}
			})
			return l
		},
		Graces: func(s agent.Session) { fastClose(s.(*claude.Session)) },
	})
}
