package proc

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Linux side of the process handling: the subreaper, waitid for a
// peek at exited children, /proc for the process table. The logic over
// them is shared (group.go, table.go).

func becomeSubreaper() (bool, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return false, err
	}
	return true, nil
}

// notDumpable: a process of the same user can then read neither
// /proc/<pid>/environ nor /proc/<pid>/mem, nor ptrace it. The agents
// bhw-run starts are dumpable again (execve resets it). Root's readers
// (CAP_SYS_PTRACE) are not held back.
func notDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// peekChild looks at bhw-run's children without reaping any: any is false
// when it has none at all, live or exited; pid is one that has exited and
// is not yet reaped, 0 when none has.
func peekChild() (pid int, any bool) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	switch {
	case errors.Is(err, unix.ECHILD):
		return 0, false
	case err != nil:
		return 0, true // cannot tell: as if there were children
	}
	return siginfoPid(&info), true
}

// siginfoPid is si_pid of a siginfo_t filled by waitid: after three ints
// (si_signo, si_errno, si_code), at the start of the union, which is
// pointer-aligned (offset 16 on 64-bit Linux, 12 on 32-bit). x/sys/unix
// declares the union as bytes.
func siginfoPid(info *unix.Siginfo) int {
	off := 3 * unsafe.Sizeof(int32(0))
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}

// procTable reads every process in /proc.
func procTable() []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := lookup(p); ok {
			out = append(out, st)
		}
	}
	return out
}

// lookup reads /proc/<pid>/stat; false when there is no such process.
func lookup(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: parse after the
	// last ')'. Then state, ppid, pgrp, … and starttime, the 22nd field.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	pp, _ := strconv.Atoi(f[1])
	pg, _ := strconv.Atoi(f[2])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{pid: pid, ppid: pp, pgrp: pg, zombie: f[0] == "Z", start: start}, true
}

// image is the executable pid runs (its /proc exe link) and its arguments;
// an error when the link cannot be read (the process is gone, a zombie, or
// another user's).
func image(pid int) (exe string, args []string, err error) {
	dir := "/proc/" + strconv.Itoa(pid)
	exe, err = os.Readlink(dir + "/exe")
	if err != nil {
		return "", nil, err
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
		args = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	return strings.TrimSuffix(exe, " (deleted)"), args, nil
}
