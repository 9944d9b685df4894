//go:build !linux

package confine

import (
	"errors"
	"os"
)

// memFile: Landlock, and so the confinement, is Linux's; elsewhere the
// checklist has already refused a confined agent (Check finds no ABI), and
// this is never reached.
func memFile(string) (*os.File, error) {
	return nil, errors.New("the confinement needs Linux (Landlock); set confine.mode: off in config.yaml")
}

// isMemFile: no trampoline outside Linux.
func isMemFile(string) bool { return false }
