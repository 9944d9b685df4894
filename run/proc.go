package run

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes bhw-run the reaper of every orphaned descendant, so
// a tool child the agent leaves behind (Claude's Bash children run in their
// own session) is reparented to us and can be swept (SPEC §6.7).
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// groupAlive reports whether any process of group pgid exists.
func groupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	return syscall.Kill(-pgid, 0) == nil
}

// isAgentGroup checks that the group's leader still runs the agent's
// executable, so a recycled process group id never gets our signals.
func isAgentGroup(pgid int, executable string) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pgid) + "/exe")
	if err != nil {
		// The leader is gone but members may live on: the group id cannot
		// be reused while any member exists, so it is still the agent's.
		return !leaderAlive(pgid)
	}
	if real, err := filepath.EvalSymlinks(executable); err == nil {
		executable = real
	}
	return executable != "" && strings.TrimSuffix(exe, " (deleted)") == executable
}

func leaderAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// stopGroup sends SIGTERM to the group, waits up to grace for it to go,
// then SIGKILLs what is left. SIGTERM first: Claude Code kills its tool
// children on SIGTERM, while SIGKILL would orphan them.
func stopGroup(pgid int, grace time.Duration) {
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		reapZombies()
		time.Sleep(20 * time.Millisecond)
	}
	if groupAlive(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	reapZombies()
}

// sweepDescendants ends every process below bhw-run (reparented orphans
// included, thanks to the subreaper): SIGTERM, then SIGKILL after grace. Call
// it only once the agent itself has been waited for.
func sweepDescendants(grace time.Duration) int {
	me := os.Getpid()
	kids := descendants(me)
	if len(kids) == 0 {
		reapZombies()
		return 0
	}
	for _, p := range kids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		reapZombies()
		if len(descendants(me)) == 0 {
			return len(kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range descendants(me) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	time.Sleep(10 * time.Millisecond)
	reapZombies()
	return len(kids)
}

// reapZombies collects exited children without blocking.
func reapZombies() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// descendants lists the live (non-zombie) processes below pid, from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: parse after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range parent[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
