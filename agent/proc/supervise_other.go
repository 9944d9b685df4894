//go:build !linux

package proc

import (
	"os"
	"os/exec"
	"time"

	"github.com/blobhub/bhw-run/confine"
)

// supervised: no supervisor where the system has no child subreaper
// (macOS, docs/macos.md): the agent starts directly, through the
// trampoline when confined (never, without Landlock).
func supervised(cmd *exec.Cmd, r *confine.Rules, _ time.Duration) (*os.File, error) {
	if r == nil {
		return nil, nil
	}
	return confine.Wrap(cmd, *r)
}
