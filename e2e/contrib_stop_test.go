package e2e

// Stopping a pass: systemd (KillMode=mixed), Kubernetes and Nomad send
// SIGTERM to the pass's main process only — the recipe's bash — and SIGKILL
// to every process left once it has exited or the grace has run out. The
// runs save their state only if the bash forwards the SIGTERM to them and
// outlives them. A systemd unit cannot be started here, so a stand-in
// service manager (this test binary, as a child subreaper) plays that part
// around the unit's own ExecStart.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentproc "github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// managerEnv names the report file of the stand-in service manager.
const managerEnv = "BHW_TEST_SERVICE_MANAGER"

// managerReport is what the stand-in service manager saw.
type managerReport struct {
	MainExit int `json:"main_exit"`
	// Killed are the processes (their comm) still running when the main
	// process exited, which it then SIGKILLed as systemd would.
	Killed []string `json:"killed"`
}

// maybeRunServiceManager runs os.Args[1:] as a service manager runs a unit's
// main process: in its own process group, as the reaper of every orphan
// below it. A SIGTERM to the manager goes to the main process only
// (KillMode=mixed); when the main process exits, whatever is left below the
// manager gets SIGKILL. It exits 0 once nothing is left, with its report
// written.
func maybeRunServiceManager() {
	report := os.Getenv(managerEnv)
	if report == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "service manager:", err)
		os.Exit(127)
	}
	if err := agentproc.BecomeSubreaper(); err != nil {
		fail(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, managerEnv+"=") {
			env = append(env, kv)
		}
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	p, err := os.StartProcess(os.Args[1], os.Args[1:], &os.ProcAttr{
		Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fail(err)
	}
	mainPid := p.Pid
	go func() {
		for range terms {
			_ = syscall.Kill(mainPid, syscall.SIGTERM)
		}
	}()
	rep := managerReport{MainExit: -1}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.ECHILD {
			break
		}
		if err != nil {
			fail(err)
		}
		if pid != mainPid {
			continue
		}
		rep.MainExit = ws.ExitStatus()
		if ws.Signaled() {
			rep.MainExit = 128 + int(ws.Signal())
		}
		for _, pid := range agentproc.Descendants(os.Getpid()) {
			rep.Killed = append(rep.Killed, comm(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(report, b, 0o600); err != nil {
		fail(err)
	}
	os.Exit(0)
}

// comm is the command name of pid, for a message.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return strconv.Itoa(pid)
	}
	return strings.TrimSpace(string(b))
}

// TestContribStopSignalsTheRuns: the unit's ExecStart, the CronJob's
// container script and the Nomad task's, each under a stand-in service
// manager with two runs mid-turn (their agent waits to be interrupted), and
// a SIGTERM to the main process only: each run gets a SIGTERM, interrupts
// its agent, saves the turn as interrupted and ends 143, and the bash exits
// 143 only after them, so nothing is left for the SIGKILL.
func TestContribStopSignalsTheRuns(t *testing.T) {
	svc := parseUnit(t, "contrib/systemd/bhw-run.service")
	_, k8s := k8sScript(t)
	for name, argv := range map[string][]string{
		"systemd":    svc.execStart(t),
		"kubernetes": {"/bin/bash", "-c", k8s},
		"nomad":      {"/bin/bash", "-c", nomadScript(t)},
	} {
		t.Run(name, func(t *testing.T) { stopPass(t, argv) })
	}
}

// stopPass runs argv as the main process of a pass over two threads whose
// agent waits to be interrupted, stops it as systemd stops a unit, and
// checks what each run saved.
func stopPass(t *testing.T, args []string) {
	e := pipelineEnv(t)
	e.fakeClaude([]claudetest.FakeStep{{Text: "working"}, {WaitInterrupt: true}})
	aliases := []string{"ci/stop/a", "ci/stop/b"}
	for _, a := range aliases {
		e.handOff(a, claudeType, "", "please do "+a)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(e.root, "manager.json")
	cmd := exec.Command(exe, args...)
	cmd.Env = append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"), managerEnv+"="+report)
	cmd.Dir = e.root
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		for _, pid := range agentproc.Descendants(cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
	})

	// Both runs are in their turn: the agent runs and its first text is
	// posted.
	waitFor(t, 3*time.Minute, "both runs in their turn", func() bool {
		for _, a := range aliases {
			th, err := envelope.LoadThread(filepath.Join(setup.ThreadDir(e.jobDir(), a), "thread.yaml"))
			if err != nil || th == nil || th.Agent.Process == nil || len(e.items(a)) < 2 {
				return false
			}
		}
		return true
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the pass did not end within 2 minutes of the SIGTERM\n%s", tail(out.String(), 4000))
	}
	if err != nil {
		t.Fatalf("service manager: %v\n%s", err, tail(out.String(), 4000))
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep managerReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("manager: %+v\n%s", rep, tail(out.String(), 4000))
	if len(rep.Killed) > 0 {
		t.Errorf("the recipe's bash exited (%d) while %q still ran: the service manager SIGKILLed them", rep.MainExit, rep.Killed)
	}
	if rep.MainExit != exit.Terminated {
		t.Errorf("the recipe's bash exited %d, want 143 (stopped)", rep.MainExit)
	}

	// Each run's own record: interrupted by the SIGTERM, exit 143.
	got := map[string]run.Summary{}
	if f, err := os.Open(filepath.Join(e.jobDir(), "logs", "section.log")); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Event   string      `json:"event"`
				Summary run.Summary `json:"summary"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Event == "run" && slices.Contains(aliases, rec.Summary.Alias) {
				got[rec.Summary.Alias] = rec.Summary
			}
		}
		f.Close()
	}
	for _, a := range aliases {
		sum, ok := got[a]
		if !ok || sum.ExitCode != exit.Terminated || sum.Outcome != run.OutcomeInterrupted {
			t.Errorf("%s: the run's record %+v (found %v), want exit 143 outcome %s", a, sum, ok, run.OutcomeInterrupted)
		}
		th := e.threadYAML(a)
		if th.Turn.State != envelope.TurnStateInterrupted || th.Agent.Process != nil {
			t.Errorf("%s: thread.yaml turn %q, agent process %+v; want interrupted with no process", a, th.Turn.State, th.Agent.Process)
		}
	}
}
