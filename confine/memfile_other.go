//go:build !linux

package confine

import (
	"errors"
	"os"
	"syscall"
)

// memFile: Landlock, and so the confinement, is Linux's; elsewhere the
// checklist has already refused a confined agent (Check finds no ABI), and
// this is never reached.
func memFile(string) (*os.File, error) {
	return nil, errors.New("the confinement needs Linux (Landlock); set confine.mode: off in config.yaml")
}

// closeInherited: every descriptor up to the soft limit (no /proc, no
// close_range).
func closeInherited() {
	var lim syscall.Rlimit
	n := uint64(1024)
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<16 {
		n = lim.Cur
	}
	for fd := 3; uint64(fd) < n; fd++ {
		syscall.CloseOnExec(fd)
	}
}
