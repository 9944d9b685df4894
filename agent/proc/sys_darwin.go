package proc

import (
	"golang.org/x/sys/unix"
)

// The macOS side of the process handling: sysctl kern.proc for the
// process table, kern.procargs2 for a process's executable and arguments.
// The logic over them is shared (group.go, table.go). It is built and
// vetted on Linux, not run there: docs/macos.md says what has run where.

// becomeSubreaper: macOS has no subreaper; an orphan goes to launchd.
// Process.Close then stops what the agent left below itself instead.
func becomeSubreaper() (bool, error) { return false, nil }

// notDumpable: ptrace(PT_DENY_ATTACH) refuses every debugger that would
// attach to bhw-run with ptrace, and makes it exit if one is attached
// already. It does not hide its arguments and environment: the kernel
// hands those to any process of the same user (sysctl kern.procargs2,
// what `ps -E` reads), so on a Mac BLOBHUB_API_KEY belongs in the
// credentials file, not the environment (docs/macos.md). Root is not
// held back.
func notDumpable() error { return unix.PtraceDenyAttach() }

// peekChild: macOS has no waitid in x/sys/unix, and bhw-run is no
// subreaper there, so there is never an orphan of its own to reap. It
// answers "cannot tell", and SweepDescendants reads the table.
func peekChild() (pid int, any bool) { return 0, true }

// sZOMB is p_stat of an exited process not yet waited for (SZOMB in
// <sys/proc.h>).
const sZOMB = 5

func fromKinfo(k *unix.KinfoProc) procStat {
	t := k.Proc.P_starttime
	return procStat{
		pid:    int(k.Proc.P_pid),
		ppid:   int(k.Eproc.Ppid),
		pgrp:   int(k.Eproc.Pgid),
		zombie: k.Proc.P_stat == sZOMB,
		start:  uint64(t.Sec)*1e6 + uint64(t.Usec),
	}
}

// procTable reads every process with sysctl kern.proc.all: one call, no
// cgo, no ps.
func procTable() []procStat {
	kps, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(kps))
	for i := range kps {
		out = append(out, fromKinfo(&kps[i]))
	}
	return out
}

// lookup reads one process with sysctl kern.proc.pid; false when there is
// no such process (the kernel then answers with nothing, an error here).
func lookup(pid int) (procStat, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return procStat{}, false
	}
	return fromKinfo(k), true
}

// image is the path pid was executed by and its arguments, from sysctl
// kern.procargs2; an error for a process that is gone, a zombie, or
// another user's.
func image(pid int) (exe string, args []string, err error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return "", nil, err
	}
	return parseProcargs(b)
}
