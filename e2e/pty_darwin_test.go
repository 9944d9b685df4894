package e2e

import (
	"bytes"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptsName unlocks the slave of the pseudo-terminal master fd and names
// it: grantpt, unlockpt and ptsname are TIOCPTYGRANT, TIOCPTYUNLK and
// TIOCPTYGNAME (into a 128-byte buffer) on macOS.
func ptsName(fd int) (string, error) {
	for _, req := range []uint{unix.TIOCPTYGRANT, unix.TIOCPTYUNLK} {
		if err := unix.IoctlSetInt(fd, req, 0); err != nil {
			return "", fmt.Errorf("grantpt/unlockpt: %w", err)
		}
	}
	var name [128]byte
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(unix.TIOCPTYGNAME), uintptr(unsafe.Pointer(&name[0]))); errno != 0 {
		return "", fmt.Errorf("ptsname: %w", errno)
	}
	n := bytes.IndexByte(name[:], 0)
	if n < 0 {
		n = len(name)
	}
	return string(name[:n]), nil
}
