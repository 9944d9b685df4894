package cli

import (
	"testing"

	"github.com/blobhub/bhw-run/acp"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/codex"
	"github.com/blobhub/bhw-run/internal/hermetic"
)

// adapters are the agents the tests run the command line with: the list
// main.go passes to Main.
var adapters = append([]agent.Adapter{claude.Adapter, codex.Adapter}, append(acp.Adapters(), antigravity.Adapter)...)

// claudeType is the agent type of the threads the tests hand off.
var claudeType = claude.Adapter.Type

func TestMain(m *testing.M) {
	// The test binary doubles as the scripted test agent when its
	// environment says so (TestThirdAdapterRunsAWholeThread).
	agenttest.MaybeRunFake()
	hermetic.Main(m.Run)
}
