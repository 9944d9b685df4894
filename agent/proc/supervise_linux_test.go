package proc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// holderEnv makes the test binary a stand-in for bhw-run (TestHolder): it
// starts the agent script the variable names and waits to be killed.
const holderEnv = "BHW_PROC_TEST_HOLDER"

// escapingTools is an agent whose tools leave it every way a tool can: a
// process group of its own (job control), a session of its own (setsid),
// a double fork, and a daemon (double fork and setsid, its parent gone).
// Each writes its pid to a file of pids; "ready" once all four run.
const escapingTools = `pids=$1
(set -m; sleep 301 & echo $! >> "$pids"; wait) &
setsid sleep 302 & echo $! >> "$pids"
( (sleep 303 & echo $! >> "$pids") & )
setsid sh -c '(sleep 304 & echo $! >> "$1") &' daemon "$pids" &
while [ "$(wc -l < "$pids")" -lt 4 ]; do sleep 0.05; done
echo ready
read x
`

// TestHolder is not a test: run with holderEnv set it is the bhw-run that
// TestKill9LeavesNothing kills.
func TestHolder(t *testing.T) {
	agentPath := os.Getenv(holderEnv)
	if agentPath == "" {
		t.Skip("the stand-in for bhw-run in TestKill9LeavesNothing")
	}
	dir := filepath.Dir(agentPath)
	p, err := Start(Config{Path: agentPath, Args: []string{filepath.Join(dir, "pids")}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
		StdinGrace: time.Second, KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for l := range p.Lines() {
		os.Stdout.WriteString(string(l.Data) + "\n")
	}
	// Until killed: a sleep, not select{}, which the runtime may end as a
	// deadlock (exit 2) once no other goroutine is left.
	for {
		time.Sleep(time.Hour)
	}
}

// TestKill9LeavesNothing: bhw-run killed with SIGKILL while its agent's
// tools run (in groups and sessions of their own, double-forked,
// daemonised) leaves none of them running: the supervisor below it sees it
// gone and stops the whole tree.
func TestKill9LeavesNothing(t *testing.T) {
	dir := t.TempDir()
	agentPath := filepath.Join(dir, "agent")
	if err := os.WriteFile(agentPath, []byte("#!/bin/sh\n"+escapingTools), 0o755); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("/proc/self/exe", "-test.run=^TestHolder$", "-test.v")
	holder.Env = append(os.Environ(), holderEnv+"="+agentPath)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the stand-in for bhw-run ended before its agent's tools ran")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the agent's tools did not start within 2 minutes")
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	var tools []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pids file %q", b)
		}
		tools = append(tools, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	// The supervisor notices within parentPoll and gives SIGTERM a second
	// (the holder's KillGrace); a busy machine gets far more.
	deadline := time.Now().Add(time.Minute)
	for _, pid := range tools {
		if !waitGone(pid, time.Until(deadline)) {
			t.Errorf("tool %d outlived a kill -9 of the process that started its agent", pid)
		}
	}
}

// TestNoInheritedDescriptors: a descriptor open without close-on-exec in
// the process that starts the agent (bhw-run started with
// `7<credentials.yaml`) is not open in the agent, confined or not.
func TestNoInheritedDescriptors(t *testing.T) {
	f, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const leaked = 77
	if err := unix.Dup3(int(f.Fd()), leaked, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leaked)
	p := start(t, "if [ -e /proc/self/fd/77 ]; then echo leaked; else echo closed; fi\n", &logBuf{})
	l := <-p.Lines()
	if got := string(l.Data); got != "closed" {
		t.Fatalf("the agent says %q of descriptor %d", got, leaked)
	}
}

// TestStraySuperviseVariable: a BHW_SUPERVISE that is no supervisor's (a
// person's environment) is dropped: the program runs as itself.
func TestStraySuperviseVariable(t *testing.T) {
	for _, v := range []string{"5,1,1", "x", "0,0,0"} {
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestNothingAtAll$")
		cmd.Env = []string{superviseEnv + "=" + v}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s=%q: %v\n%s", "BHW_SUPERVISE", v, err, out)
		}
	}
}

// TestSupervisorMirrorsExit: the agent's exit status and its death by a
// signal reach bhw-run unchanged through the supervisor.
func TestSupervisorMirrorsExit(t *testing.T) {
	p := start(t, "exit 7\n", &logBuf{})
	<-p.Done()
	if st := p.ExitStatus(0); st != "exit status 7" {
		t.Errorf("status %q, want exit status 7", st)
	}
	p = start(t, "kill -TERM $$\n", &logBuf{})
	<-p.Done()
	if st := p.ExitStatus(0); st != "signal: terminated" {
		t.Errorf("status %q, want signal: terminated", st)
	}
	_ = p.Close(context.Background())
}

// TestLeftoverFoundWithoutSupervisor: when the supervisor is killed too
// (SIGKILL to it alone, the OOM killer), the agent lives on in the group
// bhw-run recorded; the next run still recognises that group as the
// agent's and stops it.
func TestLeftoverFoundWithoutSupervisor(t *testing.T) {
	path := script(t, "echo ready\nread x\n")
	p, err := Start(Config{Path: path, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, StdinGrace: time.Second, KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-p.Pid(), syscall.SIGKILL) })
	if l, ok := <-p.Lines(); !ok || string(l.Data) != "ready" {
		t.Fatalf("the agent did not start: %q", l.Data)
	}
	pgid := p.Pid()
	var agentPid int
	for _, m := range Members(pgid) {
		if m != pgid {
			agentPid = m
		}
	}
	if agentPid == 0 {
		t.Fatalf("no agent below the supervisor in group %d", pgid)
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL) // the supervisor alone
	<-p.Done()
	if !GroupAlive(pgid) {
		t.Fatal("the agent died with its supervisor: the test shows nothing")
	}
	if !IsAgentGroup(pgid, path) {
		t.Fatal("the group whose supervisor is gone is not recognised as the agent's")
	}
	StopGroup(pgid, time.Second)
	if !waitGone(agentPid, time.Minute) {
		t.Fatalf("the agent %d outlived StopGroup", agentPid)
	}
}
