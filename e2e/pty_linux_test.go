package e2e

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ptsName unlocks the slave of the pseudo-terminal master fd and names
// it: unlockpt and ptsname are TIOCSPTLCK and TIOCGPTN on Linux.
func ptsName(fd int) (string, error) {
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		return "", fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		return "", fmt.Errorf("ptsname: %w", err)
	}
	return fmt.Sprintf("/dev/pts/%d", n), nil
}
