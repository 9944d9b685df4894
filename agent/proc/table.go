package proc

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// procStat is one row of the process table, as sys_linux.go (/proc) and
// sys_darwin.go (sysctl kern.proc) read it. The walks over the table are
// here, shared, so the Linux tests cover them for every system.
type procStat struct {
	pid, ppid, pgrp int
	zombie          bool   // exited, not yet waited for
	start           uint64 // when it started, in the system's own unit: with pid, who it is
}

// descendants are the live processes below pid in table.
func descendants(table []procStat, pid int) []procStat {
	return walk(table, []int{pid}, func(procStat) bool { return true })
}

// strays are the live processes below the members of group pgid that are
// not in it themselves: what an agent started in a group or a session of
// its own.
func strays(table []procStat, pgid int) []procStat {
	var members []int
	for _, st := range table {
		if !st.zombie && st.pgrp == pgid {
			members = append(members, st.pid)
		}
	}
	return walk(table, members, func(st procStat) bool { return st.pgrp != pgid })
}

// walk goes down table from roots, breadth first, and lists the live
// processes below them that keep accepts; each process once.
func walk(table []procStat, roots []int, keep func(procStat) bool) []procStat {
	children := map[int][]procStat{}
	for _, st := range table {
		if !st.zombie {
			children[st.ppid] = append(children[st.ppid], st)
		}
	}
	seen := map[int]bool{}
	for _, r := range roots {
		seen[r] = true
	}
	var out []procStat
	for queue := roots; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			if seen[c.pid] {
				continue
			}
			seen[c.pid] = true
			queue = append(queue, c.pid)
			if keep(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// parseProcargs reads what macOS's sysctl kern.procargs2 gives for a
// process: its argument count (a native-endian int32; little-endian on
// every Mac Go builds for), the path it was executed by, NUL padding, then
// the arguments, each NUL-terminated, and the environment after them. It
// returns the path and the arguments; the environment is not read. Here,
// not in sys_darwin.go, so the Linux tests cover it.
func parseProcargs(b []byte) (exe string, args []string, err error) {
	if len(b) < 4 {
		return "", nil, errors.New("procargs: too short")
	}
	argc := int(int32(binary.LittleEndian.Uint32(b)))
	rest := b[4:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return "", nil, errors.New("procargs: no end to the executable path")
	}
	exe, rest = string(rest[:i]), rest[i:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	if argc < 0 || argc > len(rest) {
		return "", nil, errors.New("procargs: bad argument count")
	}
	for range argc {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return "", nil, errors.New("procargs: an argument without its end")
		}
		args = append(args, string(rest[:i]))
		rest = rest[i+1:]
	}
	return exe, args, nil
}
