package claude_test

import (
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/run"
)

// *claude.Session must satisfy run.Session; the adapter cannot import run.
var _ run.Session = (*claude.Session)(nil)
