package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests of the Linux-only mechanisms (the subreaper's reaping, waitid)
// and the ones that read /proc or wait on a pidfd.

// TestReaperLeavesOwnedChildren: the orphan reaper never takes a child an
// exec.Cmd is about to wait for (it used to wait4(-1), and the adapter's
// cmd.Wait then reported "no child processes" instead of the exit status).
func TestReaperLeavesOwnedChildren(t *testing.T) {
	ownMu.Lock()
	was := subreaper
	subreaper = true // as in the binary, where orphans come to bhw-run
	ownMu.Unlock()
	t.Cleanup(func() { ownMu.Lock(); subreaper = was; ownMu.Unlock() })

	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	ownMu.Lock()
	if err := cmd.Start(); err != nil {
		ownMu.Unlock()
		t.Fatal(err)
	}
	owned[cmd.Process.Pid] = true
	ownMu.Unlock()
	t.Cleanup(func() { ownMu.Lock(); delete(owned, cmd.Process.Pid); ownMu.Unlock() })
	// Wait until it has exited (a zombie: nobody reaped it), then reap.
	waitExited(t, cmd.Process.Pid)
	reapOrphans()
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("cmd.Wait = %v, want exit status 3", err)
	}
}

// waitExited waits on a pidfd until pid has exited, without reaping it.
func waitExited(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("pid %d did not exit: %v", pid, err)
		}
		return
	}
}

// TestPeekChild: peekChild tells "no child at all" from "a child that has
// exited", naming the exited one without reaping it, and the reaper takes
// an exited child nobody owns without reading /proc; one an exec.Cmd owns
// it leaves for cmd.Wait.
func TestPeekChild(t *testing.T) {
	if _, any := peekChild(); any {
		t.Fatal("the test process already has a child: a test before this one left a process unwaited")
	}
	ownMu.Lock()
	was := subreaper
	subreaper = true
	ownMu.Unlock()
	t.Cleanup(func() { ownMu.Lock(); subreaper = was; ownMu.Unlock() })

	orphan := exec.Command("/bin/sh", "-c", "exit 0")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	if pid, any := peekChild(); !any || pid != 0 && pid != orphan.Process.Pid {
		t.Fatalf("peekChild = %d, %v with a child running or just exited", pid, any)
	}
	waitExited(t, orphan.Process.Pid)
	if pid, any := peekChild(); !any || pid != orphan.Process.Pid {
		t.Fatalf("peekChild = %d, %v; want the exited child %d", pid, any, orphan.Process.Pid)
	}
	reapOrphans() // nobody owns it: reaped
	if _, any := peekChild(); any {
		t.Fatal("the exited child nobody owns was not reaped")
	}
	if err := orphan.Wait(); err == nil {
		t.Fatal("cmd.Wait found a child the reaper had already taken")
	}
}

// TestStopGroupTakesStrays: a tool the agent started outside its group
// (a session of its own, as Gemini CLI's shells; a group of its own, as
// OpenCode's) is stopped with the group, though it is no descendant of
// the process that stops it.
func TestStopGroupTakesStrays(t *testing.T) {
	p, stray := startWithStray(t)
	if pg, _ := syscall.Getpgid(stray); pg == p.Pid() {
		t.Fatalf("the stray %d is in the group %d: the test shows nothing", stray, p.Pid())
	}
	StopGroup(p.Pid(), 500*time.Millisecond)
	if !waitGone(stray, 5*time.Second) {
		t.Fatalf("the stray %d outlived StopGroup", stray)
	}
}

// waitGone waits until pid has exited (a zombie counts) or d passes:
// pidfd_open and poll, so the exit itself wakes it.
func waitGone(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return Exited(pid)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for time.Until(deadline) > 0 {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n > 0 {
			break
		}
	}
	return Exited(pid)
}

// TestCloseSweepsWithoutSubreaper: where bhw-run cannot be a subreaper
// (macOS), an orphan the agent leaves goes to init, beyond the sweep; Close
// finds it below the agent before ending it, and stops it once the agent
// is gone. Here on Linux the same code runs with the subreaper off.
func TestCloseSweepsWithoutSubreaper(t *testing.T) {
	ownMu.Lock()
	was, wasSweep := subreaper, closeSweep
	subreaper, closeSweep = false, true // as BecomeSubreaper leaves it on macOS
	ownMu.Unlock()
	t.Cleanup(func() { ownMu.Lock(); subreaper, closeSweep = was, wasSweep; ownMu.Unlock() })

	// A tool in a session of its own (as Claude Code's Bash children), so
	// the group kill does not reach it.
	p, stray := startWithStray(t)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !waitGone(stray, 5*time.Second) {
		t.Fatalf("the tool %d the agent left outlived Close", stray)
	}
}

// TestStopStraysKnowsItsOwn: a process that is not the one listed (same
// pid, another start time: the pid reused by a stranger) is left alone.
func TestStopStraysKnowsItsOwn(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, ok := lookup(cmd.Process.Pid)
	if !ok {
		t.Fatalf("pid %d is not in /proc", cmd.Process.Pid)
	}
	other := st
	other.start++
	stopStrays([]procStat{other}, 100*time.Millisecond)
	if now, ok := lookup(cmd.Process.Pid); !ok || now.zombie {
		t.Fatal("stopStrays killed a process with another start time")
	}
	stopStrays([]procStat{st}, 2*time.Second)
	if err := cmd.Wait(); err == nil {
		t.Fatal("the listed process was not stopped")
	}
}

// TestProcTable: this process is in the table, under its parent, with its
// group and a start time, and lookup agrees with the table.
func TestProcTable(t *testing.T) {
	me := os.Getpid()
	for _, st := range procTable() {
		if st.pid != me {
			continue
		}
		if st.ppid != os.Getppid() || st.pgrp != syscall.Getpgrp() || st.zombie || st.start == 0 {
			t.Fatalf("own row %+v", st)
		}
		if one, ok := lookup(me); !ok || one != st {
			t.Fatalf("lookup = %+v, %v; the table has %+v", one, ok, st)
		}
		return
	}
	t.Fatal("this process is not in the table")
}

// startWithStray starts an agent that leaves a tool in a session of its
// own, and returns it with the tool's pid. The pid is printed once the
// tool has its own session (field 6 of its stat), so no check races the
// setsid.
func startWithStray(t *testing.T) (*Process, int) {
	t.Helper()
	p := start(t, "setsid sleep 300 & pid=$!\nwhile [ \"$(cut -d' ' -f6 /proc/$pid/stat)\" != \"$pid\" ]; do :; done\necho $pid\nread x\n", &logBuf{})
	l := <-p.Lines()
	stray, err := strconv.Atoi(strings.TrimSpace(string(l.Data)))
	if err != nil {
		t.Fatalf("the script printed %q", l.Data)
	}
	t.Cleanup(func() { _ = syscall.Kill(stray, syscall.SIGKILL) })
	return p, stray
}
