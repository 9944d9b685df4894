package codextest

import (
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// Bin is the real Codex CLI of the pinned version ($BHW_CODEX_BIN, or the
// npm install under the module's .tools/); a missing one fails t.
func Bin(t testing.TB) string {
	t.Helper()
	return agenttest.PinnedCLI(t, "codex CLI", "BHW_CODEX_BIN", ".tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
}
