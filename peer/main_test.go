//go:build realcli

package peer_test

import (
	"testing"

	"github.com/blobhub/bhw-run/internal/hermetic"
)

// TestMain keeps the peer's processes off the person's machine: no agent
// CLI on PATH, a HOME of the tests' own, none of their keys
// (internal/hermetic).
func TestMain(m *testing.M) { hermetic.Main(m.Run) }
