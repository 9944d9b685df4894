package claudetest

import (
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// Bin is the real Claude Code of the pinned version ($BHW_CLAUDE_BIN, or
// the npm install under the module's .tools/); a missing one fails t.
func Bin(t testing.TB) string {
	t.Helper()
	return agenttest.PinnedCLI(t, "claude CLI", "BHW_CLAUDE_BIN", ".tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}
