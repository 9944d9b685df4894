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

// isMemFile reports whether fdText is an open descriptor of an in-memory
// file (memfd_create's, which alone answers F_GET_SEALS; no /proc needed).
func isMemFile(fdText string) bool {
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		return false
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	return err == nil
}
