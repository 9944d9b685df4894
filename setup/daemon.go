package setup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/statefile"
)

// workerInstance is the instance.yaml blobhub-worker creates (exclusively)
// at the root of the state tree it runs on, and removes when it stops
// cleanly.
type workerInstance struct {
	Instance struct {
		InstanceID string `yaml:"instance_id"`
		PID        int    `yaml:"pid"`
		Host       string `yaml:"host"`
		StartedAt  string `yaml:"started_at"`
	} `yaml:"instance"`
}

// workerCommand is a command a blobhub-worker runs as: its console script
// or its module.
var workerCommand = regexp.MustCompile(`blobhub[-_]worker`)

// pythonCommand is an interpreter's argv[0], whatever its version suffix.
var pythonCommand = regexp.MustCompile(`(^|/)(python|pypy)[0-9.]*$`)

// isWorkerProcess tells whether pid runs blobhub-worker, judged on its
// argv[0] (or the script or module an interpreter runs) as the worker
// judges its own record: known is false when /proc cannot say.
func isWorkerProcess(pid int) (worker, known bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return false, false
	}
	argv := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if workerCommand.Match(argv[0]) {
		return true, true
	}
	if !pythonCommand.Match(argv[0]) || len(argv) < 2 {
		return false, true
	}
	if string(argv[1]) == "-m" {
		return len(argv) > 2 && workerCommand.Match(argv[2]), true
	}
	return workerCommand.Match(argv[1]), true
}

// WorkerRunning reads the instance record blobhub-worker keeps at path:
// running when it names a live blobhub-worker (a pid that is dead, or
// that runs something else, is a stale record, as the worker reads it; a
// pid /proc cannot tell about counts as a worker, as it does for the
// worker). detail says what was found.
func WorkerRunning(path string) (running bool, detail string) {
	b, err := statefile.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, ""
	}
	var wi workerInstance
	if err != nil || yaml.Unmarshal(b, &wi) != nil || wi.Instance.PID <= 0 {
		return true, fmt.Sprintf("%s exists but cannot be read as a blobhub-worker instance (%v): a blobhub-worker may run", path, err)
	}
	in := wi.Instance
	who := fmt.Sprintf("a blobhub-worker (pid %d, instance %s, since %s)", in.PID, in.InstanceID, in.StartedAt)
	if host, _ := os.Hostname(); in.Host != "" && in.Host != host {
		return true, fmt.Sprintf("%s of host %s holds %s, which this host cannot check", who, in.Host, path)
	}
	if err := syscall.Kill(in.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, fmt.Sprintf("%s names pid %d, which is not running: stale", path, in.PID)
	}
	if worker, known := isWorkerProcess(in.PID); known && !worker {
		return false, fmt.Sprintf("%s names pid %d, which runs something else now: stale", path, in.PID)
	}
	return true, who + " runs"
}

// CheckNoDaemon refuses a state tree a live blobhub-worker holds: both
// would run the same threads from the same records, neither knowing of
// the other, and the daemon reads a thread's record only when it
// starts (WORKER_ALREADY_RUNNING).
func (s *Setup) CheckNoDaemon() error {
	path := filepath.Join(s.StateDir, "instance.yaml")
	if running, detail := WorkerRunning(path); running {
		return exit.Errorf(exit.CodeWorkerRunning, "%s on this state tree (%s); stop it first (blobhub-worker instance stop, or systemctl stop for its unit), or give bhw-run a state tree of its own (--state-dir or another profile)", detail, s.StateDir)
	}
	return nil
}
