package proc

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// owned are the pids of the processes Start spawned whose exec.Cmd has not
// waited for them yet: the reaper leaves them alone, or cmd.Wait would find
// its child gone and report a wrong exit status.
var (
	ownMu     sync.Mutex
	owned     = map[int]bool{}
	subreaper bool // orphans are reparented to this process
	// closeSweep: bhw-run asked to become a subreaper and the system has
	// none (macOS), so an orphan goes to init, beyond SweepDescendants'
	// reach. Close then looks below the agent before ending it, and stops
	// what is still alive there once the agent is gone.
	closeSweep bool
)

// BecomeSubreaper makes bhw-run the reaper of every orphaned descendant,
// so a tool child the agent leaves behind (Claude's Bash children run in
// their own session) is reparented to bhw-run and can be swept. Where the
// system has no subreaper (macOS), it returns nil and Process.Close
// stands in: it stops what the agent left below itself.
func BecomeSubreaper() error {
	ok, err := becomeSubreaper()
	ownMu.Lock()
	subreaper, closeSweep = ok, !ok
	ownMu.Unlock()
	return err
}

// sweepAtClose reports whether Close must stop what the agent leaves below
// itself (see closeSweep).
func sweepAtClose() bool {
	ownMu.Lock()
	defer ownMu.Unlock()
	return closeSweep
}

// NotDumpable keeps processes of bhw-run's own user (an agent's tools) out
// of its memory, where BLOBHUB_API_KEY is. What the system offers differs,
// and so does what it covers: see notDumpable in sys_linux.go and
// sys_darwin.go, and docs/macos.md.
func NotDumpable() error { return notDumpable() }

// GroupAlive reports whether any process of group pgid runs. A group of
// zombies only is gone: its members have exited, and wait only for a
// parent to reap them (an agent killed with its supervisor is an orphan
// until its new parent does).
func GroupAlive(pgid int) bool {
	if pgid <= 1 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	if st, ok := lookup(pgid); ok && !st.zombie {
		return true // the leader runs: no need to read the whole table
	}
	return len(Members(pgid)) > 0
}

// IsAgentGroup checks that the group's leader still runs executable, so a
// recycled process group id never gets our signals. An executable that is
// a script (Gemini CLI and Qwen Code are node programs started through
// their "#!/usr/bin/env node" line) runs as its interpreter: the leader's
// executable is node, and the script is the argument after it, as the
// kernel passed it on.
func IsAgentGroup(pgid int, executable string) bool {
	if executable == "" {
		return false
	}
	exe, args, err := image(pgid)
	if err != nil {
		// The leader is gone but members may live on: the group id cannot
		// be reused while any member exists, so it is still the agent's.
		_, alive := lookup(pgid)
		return !alive
	}
	real := executable
	if r, err := filepath.EvalSymlinks(executable); err == nil {
		real = r
	}
	return runs(exe, args, executable, real)
}

// runs reports whether a process whose executable is exe and whose
// arguments are args runs executable (real: the same with its links
// resolved), itself or as the script its interpreter was given, or is the
// supervisor that started it (bhw-run's binary, with the agent's path as
// its argv[0], or a holding shell's argv: the group's leader since agents
// start below one).
func runs(exe string, args []string, executable, real string) bool {
	if exe == real || exe == executable {
		return true
	}
	if len(args) >= 1 && (args[0] == executable || args[0] == real) {
		return true
	}
	if len(args) >= 2 && (args[1] == executable || args[1] == real) {
		return true
	}
	// A shell that holds the agent's place until its input is written
	// (sh -c SCRIPT EXECUTABLE ARGS…, Antigravity's turn) names the agent
	// as the script's $0; under a supervisor the leader keeps that argv.
	return len(args) >= 4 && args[1] == "-c" && (args[3] == executable || args[3] == real)
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
	strays := strays(procTable(), pgid)
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

// stopStrays ends the processes of ps still alive: the agent usually ends
// its tools itself when it gets SIGTERM, so SIGTERM, then SIGKILL after
// grace. A process counts as the same one only with the same start time,
// so a pid reused meanwhile by a stranger is left alone.
func stopStrays(ps []procStat, grace time.Duration) {
	alive := func() []int {
		var out []int
		for _, p := range ps {
			if now, ok := lookup(p.pid); ok && !now.zombie && now.start == p.start {
				out = append(out, p.pid)
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

// SweepDescendants ends every process below bhw-run (reparented orphans
// included, thanks to the subreaper): SIGTERM, then SIGKILL after grace. Call
// it only once the agent itself has been waited for. It returns how many
// it found.
func SweepDescendants(grace time.Duration) int {
	if _, any := peekChild(); !any {
		// No child at all, so no descendant: every one of them would be a
		// child of bhw-run or below one. The common case, without reading
		// the whole process table.
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
	// Peek at one exited child at a time (peekChild leaves it unreaped)
	// and reap it if nobody waits for it; only an exited child some
	// exec.Cmd owns sends us to the process table to look past it.
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
	me := os.Getpid()
	for _, st := range procTable() {
		if st.zombie && st.ppid == me && !owned[st.pid] {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(st.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// Descendants lists the live (non-zombie) processes below pid.
func Descendants(pid int) []int {
	var out []int
	for _, st := range descendants(procTable(), pid) {
		out = append(out, st.pid)
	}
	return out
}

// Exited reports whether pid has exited: there is no such process, or it
// is a zombie not yet waited for.
func Exited(pid int) bool {
	st, ok := lookup(pid)
	return !ok || st.zombie
}

// Members lists the live processes of group pgid.
func Members(pgid int) []int {
	var out []int
	for _, st := range procTable() {
		if st.pgrp == pgid && !st.zombie {
			out = append(out, st.pid)
		}
	}
	return out
}
