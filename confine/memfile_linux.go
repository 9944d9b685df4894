package confine

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// memFile is a file in memory only, closed on exec (the trampoline gets
// it through ExtraFiles, which dups it without the flag).
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// closeInherited: close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11),
// else each descriptor /proc/self/fd lists.
func closeInherited() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
