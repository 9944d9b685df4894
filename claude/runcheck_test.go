package claude_test

import (
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude"
)

// *claude.Session is an agent.Session.
var _ agent.Session = (*claude.Session)(nil)
