package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// owned are the pids of the processes Start spawned whose exec.Cmd has not
// waited for them yet: the reaper leaves them alone, or cmd.Wait would find
// its child gone and report a wrong exit status.
var (
	ownMu     sync.Mutex
	owned     = map[int]bool{}
	subreaper bool // orphans are reparented to this process
)

// BecomeSubreaper makes bhw-run the reaper of every orphaned descendant,
// so a tool child the agent leaves behind (Claude's Bash children run in
// their own session) is reparented to bhw-run and can be swept.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	ownMu.Lock()
	subreaper = true
	ownMu.Unlock()
	return nil
}

// GroupAlive reports whether any process of group pgid exists.
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	return syscall.Kill(-pgid, 0) == nil
}

// IsAgentGroup checks that the group's leader still runs executable, so a
// recycled process group id never gets our signals. An executable that is
// a script (Gemini CLI and Qwen Code are node programs started through
// their "#!/usr/bin/env node" line) runs as its interpreter: the leader's
// /proc exe is node, and the script is the argument after it, as the
// kernel passed it on.
func IsAgentGroup(pgid int, executable string) bool {
	if executable == "" {
		return false
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pgid) + "/exe")
	if err != nil {
		// The leader is gone but members may live on: the group id cannot
		// be reused while any member exists, so it is still the agent's.
		return !leaderAlive(pgid)
	}
	real := executable
	if r, err := filepath.EvalSymlinks(executable); err == nil {
		real = r
	}
	if strings.TrimSuffix(exe, " (deleted)") == real {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pgid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(args) >= 2 && (args[1] == executable || args[1] == real)
}

func leaderAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// StopGroup sends SIGTERM to the group, waits up to grace for it to go,
// then SIGKILLs what is left. SIGTERM first: Claude Code kills its tool
// children on SIGTERM, while SIGKILL would orphan them. The processes
// below the group's members that left the group (OpenCode runs a command
// in a group of its own, Gemini CLI in a session of its own) are found
// first and stopped the same way once the group is gone: an agent a
// killed bhw-run left behind is no descendant of the bhw-run that stops
// it, so no sweep would find its tools once they are orphaned.
func StopGroup(pgid int, grace time.Duration) {
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return
	}
	strays := belowGroup(pgid)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		reapOrphans()
		time.Sleep(20 * time.Millisecond)
	}
	if GroupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	reapOrphans()
	stopStrays(strays, grace)
}

// belowGroup lists the live processes below the members of group pgid
// that are not in it themselves.
func belowGroup(pgid int) []int {
	stats := procStats()
	children := map[int][]procStat{}
	var queue []int
	for _, st := range stats {
		if st.state == "Z" {
			continue
		}
		children[st.ppid] = append(children[st.ppid], st)
		if st.pgrp == pgid {
			queue = append(queue, st.pid)
		}
	}
	var out []int
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			queue = append(queue, c.pid)
			if c.pgrp != pgid {
				out = append(out, c.pid)
			}
		}
	}
	return out
}

// stopStrays ends the processes of pids still alive: the agent usually
// ends its tools itself when it gets SIGTERM, so SIGTERM, then SIGKILL
// after grace.
func stopStrays(pids []int, grace time.Duration) {
	alive := func() []int {
		var out []int
		for _, p := range pids {
			if leaderAlive(p) && !processZombie(p) {
				out = append(out, p)
			}
		}
		return out
	}
	for _, p := range alive() {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(alive()) > 0 && time.Now().Before(deadline) {
		reapOrphans()
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range alive() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	reapOrphans()
}

// processZombie reports whether pid has exited but is not reaped yet.
func processZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// SweepDescendants ends every process below bhw-run (reparented orphans
// included, thanks to the subreaper): SIGTERM, then SIGKILL after grace. Call
// it only once the agent itself has been waited for. It returns how many
// it found.
func SweepDescendants(grace time.Duration) int {
	if _, any := peekChild(); !any {
		// No child at all, so no descendant: every one of them would be a
		// child of bhw-run or below one. The common case, without reading
		// every process of the machine in /proc.
		return 0
	}
	me := os.Getpid()
	kids := Descendants(me)
	if len(kids) == 0 {
		reapOrphans()
		return 0
	}
	for _, p := range kids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		reapOrphans()
		if len(Descendants(me)) == 0 {
			return len(kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range Descendants(me) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	time.Sleep(10 * time.Millisecond)
	reapOrphans()
	return len(kids)
}

// reapOrphans collects the exited children of bhw-run that nobody waits
// for: orphans reparented to it as subreaper (none when it is not one, and
// then every child is some exec.Cmd's). Never wait4(-1): that could take an
// agent whose exec.Cmd is about to wait for it, which would then report a
// wrong exit status. The lock is held so Start cannot spawn a child between
// the check and the wait.
func reapOrphans() {
	ownMu.Lock()
	defer ownMu.Unlock()
	if !subreaper {
		return
	}
	// Peek at one exited child at a time (waitid with WNOWAIT leaves it
	// unreaped) and reap it if nobody waits for it; only an exited child
	// some exec.Cmd owns sends us to /proc to look past it.
	for {
		pid, any := peekChild()
		if !any || pid == 0 {
			return
		}
		if owned[pid] {
			break
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil || got != pid {
			break
		}
	}
	for _, pid := range zombieChildren(os.Getpid()) {
		if owned[pid] {
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
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

// zombieChildren lists the exited, unreaped children of pid, from /proc.
func zombieChildren(pid int) []int {
	var out []int
	for _, st := range procStats() {
		if st.state == "Z" && st.ppid == pid {
			out = append(out, st.pid)
		}
	}
	return out
}

type procStat struct {
	pid, ppid, pgrp int
	state           string
}

// procStats reads the pid, parent and state of every process in /proc.
func procStats() []procStat {
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
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: parse after
		// the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		pg, _ := strconv.Atoi(f[2])
		out = append(out, procStat{pid: p, ppid: pp, pgrp: pg, state: f[0]})
	}
	return out
}

// Descendants lists the live (non-zombie) processes below pid, from /proc.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, st := range procStats() {
		if st.state != "Z" {
			children[st.ppid] = append(children[st.ppid], st.pid)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
