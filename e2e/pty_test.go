package e2e

import (
	"os"
	"syscall"
)

// openPTY opens a pseudo-terminal pair: what the slave side is given
// (stderr) is a terminal to term.IsTerminal, and what it writes is read
// from master. Unlocking the slave and learning its name are per system
// (ptsName in pty_linux_test.go, pty_darwin_test.go).
func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	name, err := ptsName(int(master.Fd()))
	if err == nil {
		slave, err = os.OpenFile(name, os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}
