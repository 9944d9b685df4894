// Command rusagewrap is the measuring wrapper of the overhead benchmarks:
// configured as an agent's executable, it runs the real agent as its child
// (BHW_E2E_RUSAGE_WRAP="real-executable,report-file") with its own argv,
// stdio and environment, and writes to the report file the child's CPU and
// peak RSS as wait4 reports them (the child and the descendants it waited
// for) and its own CPU (RUSAGE_SELF). bhw-run's own CPU is then its total
// minus both.
//
// It is a program of its own, not the test binary, because what it costs
// after its report (exiting) cannot be measured and so counts as bhw-run's:
// a small static binary exits in about 0.4 ms of CPU, the test binary in
// about 0.7 ms.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const wrapEnv = "BHW_E2E_RUSAGE_WRAP"

// report is what the wrapper writes (the tests' wrapReport).
type report struct {
	ChildCPU   time.Duration `json:"child_cpu"`
	ChildRSSKB int64         `json:"child_rss_kb"`
	SelfCPU    time.Duration `json:"self_cpu"`
}

func main() {
	exe, path, ok := strings.Cut(os.Getenv(wrapEnv), ",")
	if !ok {
		fmt.Fprintln(os.Stderr, "rusagewrap: set", wrapEnv+"=real-executable,report-file")
		os.Exit(127)
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, wrapEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// The agent's group gets bhw-run's SIGTERM directly (same group); the
	// wrapper only waits for it. Notify, not Ignore: an ignored signal
	// would stay ignored in the child across exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, os.Interrupt)
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "rusagewrap:", err)
		os.Exit(127)
	}
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	rep := report{
		ChildCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
		SelfCPU:  time.Duration(self.Utime.Nano() + self.Stime.Nano()),
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rep.ChildRSSKB = ru.Maxrss
	}
	b, _ := json.Marshal(rep)
	_ = os.WriteFile(path, b, 0o600)
	code := cmd.ProcessState.ExitCode()
	if code < 0 {
		code = 1
	}
	os.Exit(code)
}
