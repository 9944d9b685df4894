package confine

import (
	"fmt"
	"os"

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
