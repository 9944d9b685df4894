package proc

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blobhub/bhw-run/confine"
)

// The supervisor: every agent starts below a small process of bhw-run's
// own that outlives a kill -9 of bhw-run (docs/processes.md). bhw-run
// re-executes itself (/proc/self/exe) as the supervisor, in the agent's
// process group, which it leads; the supervisor makes itself the child
// subreaper of everything below it, confines itself (the rule set applies
// to it and to all it starts), marks every inherited descriptor above 2
// close-on-exec, and starts the agent. Every process the agent's tools
// start, in groups or sessions of their own, double-forked or daemonised,
// stays below the supervisor: an orphan is reparented to it, not to init.
// When the agent exits it stops what is left below itself; when bhw-run
// is gone (its parent changed) it stops the whole tree, the agent
// included, and exits.

// superviseEnv, in a process's environment, makes it the supervisor:
// "<rules descriptor>,<bhw-run's pid>,<grace in ms>". Only Start sets it;
// it counts only when the descriptor is a rule set confine.RulesFile made
// (a stray value is dropped), and the agent never sees it.
const superviseEnv = "BHW_SUPERVISE"

// parentPoll is how often the supervisor looks whether bhw-run is gone:
// one getppid a tick, the longest a kill -9 goes unnoticed.
const parentPoll = 100 * time.Millisecond

func init() {
	v, ok := os.LookupEnv(superviseEnv)
	if !ok {
		return
	}
	os.Unsetenv(superviseEnv)
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return
	}
	fd, ok := confine.RulesFD(f[0])
	parent, err1 := strconv.Atoi(f[1])
	ms, err2 := strconv.Atoi(f[2])
	if !ok || err1 != nil || err2 != nil {
		return
	}
	// syscall.Exit, not os.Exit: a binary built with the race detector
	// would otherwise sleep a second at every exit (GORACE's
	// atexit_sleep_ms), after every agent's end.
	syscall.Exit(supervise(fd, parent, time.Duration(ms)*time.Millisecond))
}

// supervised makes cmd start the supervisor, which starts cmd's program
// under r (nil: unconfined). The caller closes the returned file once cmd
// has started.
func supervised(cmd *exec.Cmd, r *confine.Rules, grace time.Duration) (*os.File, error) {
	if !strings.HasPrefix(cmd.Path, "/") {
		return nil, fmt.Errorf("%q is not an absolute path", cmd.Path)
	}
	// What exec would refuse, refused here as exec says it: the
	// supervisor's own start succeeds whatever its program.
	if err := unix.Access(cmd.Path, unix.X_OK); err != nil {
		return nil, &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	f, err := confine.RulesFile(r)
	switch {
	case err != nil && r == nil:
		// A kernel without memfd_create (before 3.17) has no Landlock
		// either: an unconfined agent starts as it did before the
		// supervisor, directly, covered by bhw-run's own subreaper only.
		return nil, nil
	case err != nil:
		return nil, err
	}
	n := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	// Args[0] is the program the supervisor starts; the leader's command
	// line then names the agent (IsAgentGroup).
	cmd.Args = append([]string{cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/proc/self/exe"
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], fmt.Sprintf("%s=%d,%d,%d", superviseEnv, n, os.Getpid(), grace.Milliseconds()))
	return f, nil
}

// supervise is the supervisor's life; it returns its exit status, the
// agent's own.
func supervise(fd, parent int, grace time.Duration) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "bhw-run: the agent was not started: "+format+"\n", args...)
		return confine.ExitTrampoline
	}
	r, err := confine.ReadRules(fd)
	if err != nil {
		return fail("%v", err)
	}
	if _, err := becomeSubreaper(); err != nil {
		return fail("cannot become the agent's subreaper: %v", err)
	}
	if os.Getppid() != parent {
		return fail("bhw-run is gone")
	}
	if r != nil {
		if err := confine.Apply(*r); err != nil {
			return fail("the confinement failed: %v", err)
		}
	}
	confine.CloseInherited()
	// The group's SIGTERM (bhw-run's Close) is the agent's to act on; the
	// supervisor stays until the agent is gone. A handler, not an ignore:
	// the agent gets the default dispositions back at exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if len(os.Args) == 0 || !strings.HasPrefix(os.Args[0], "/") {
		return fail("no program to start")
	}
	agent, err := os.StartProcess(os.Args[0], os.Args, &os.ProcAttr{Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		return fail("%v", err)
	}
	status := make(chan syscall.WaitStatus, 1)
	go reapAll(agent.Pid, status)
	tick := time.NewTicker(parentPoll)
	defer tick.Stop()
	for {
		select {
		case ws := <-status:
			stopBelow(grace)
			return exitLike(ws)
		case <-tick.C:
			if os.Getppid() != parent {
				// bhw-run was killed: nobody reads the agent any more.
				stopBelow(grace)
				return 1
			}
		}
	}
}

// reapAll waits for every child, the orphans reparented to the supervisor
// too, and sends the agent's status on status.
func reapAll(agent int, status chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			time.Sleep(20 * time.Millisecond) // no child now; orphans may come
		case pid == agent:
			status <- ws
		}
	}
}

// stopBelow stops every process below the supervisor: SIGTERM, SIGKILL
// after grace to what is left, again until none is (a process forking
// while it is killed).
func stopBelow(grace time.Duration) {
	if _, any := peekChild(); !any {
		// No child, so nothing below (an orphan comes to the supervisor):
		// the common end, without reading the process table.
		return
	}
	me := os.Getpid()
	below := func() []procStat { return descendants(procTable(), me) }
	ps := below()
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(below()) == 0 {
			return
		}
	}
	for range 500 {
		ps := below()
		if len(ps) == 0 {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitLike ends as the agent ended: by the same signal where the runtime
// lets a process die of it, else with 128 and its number, as a shell says.
func exitLike(ws syscall.WaitStatus) int {
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	switch sig := ws.Signal(); sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGKILL:
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second)
	}
	return 128 + int(ws.Signal())
}
