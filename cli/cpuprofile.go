//go:build cpuprofile

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
)

// cpuProfileDir is where a build with the cpuprofile tag writes one CPU
// profile per process, cpu-<pid>.pprof: BHW_CPUPROFILE_DIR, or a folder
// baked in with -ldflags -X github.com/blobhub/bhw-run/cli.cpuProfileDir=…
// for runs whose environment bhw-run does not control (the end-to-end tests
// give it a clean one):
//
//	GOFLAGS='-tags=cpuprofile -ldflags=-X=github.com/blobhub/bhw-run/cli.cpuProfileDir=/tmp/prof' make bench
//	go tool pprof -top bin/bhw-run /tmp/prof/cpu-*.pprof
//
// A turn costs bhw-run tens of milliseconds of CPU, two samples at the
// default 100 Hz, so the rate is raised to 1 kHz: set before
// StartCPUProfile, it is kept (StartCPUProfile only warns on stderr that
// it cannot lower it). Next to each profile, cpu-<pid>.rusage holds the
// process's own user and system CPU in µs and its arguments.
var cpuProfileDir string

func init() {
	dir := os.Getenv("BHW_CPUPROFILE_DIR")
	if dir == "" {
		dir = cpuProfileDir
	}
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bhw-run: cpu profile:", err)
		return
	}
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "bhw-run: cpu profile:", err)
		f.Close()
		return
	}
	stopProfile = func() {
		pprof.StopCPUProfile()
		f.Close()
		// The process's own CPU (all threads, no child), exactly: what a
		// parent's wait4 reports folds in every child bhw-run reaped.
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			line := fmt.Sprintf("%d %d %s\n", ru.Utime.Nano()/1000, ru.Stime.Nano()/1000, strings.Join(os.Args[1:], " "))
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("cpu-%d.rusage", os.Getpid())), []byte(line), 0o644)
		}
	}
}
