// Command bhw-run runs one activation of one BlobHub thread and exits.
// This file is the table of contents: the version, the agents this build
// runs, what the process sets before anything else, then the command line
// (cli/).
package main

import (
	"os"
	"runtime"

	"github.com/blobhub/bhw-run/acp"
	"github.com/blobhub/bhw-run/agent"
	agentproc "github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/cli"
	"github.com/blobhub/bhw-run/codex"
)

// version is stamped by `make build` (-ldflags "-X main.version=…", from
// git describe); a plain `go build` or `go install` leaves it empty and
// the command line reads the build's own record instead.
var version string

// adapters are the agents this build runs; the first is `thread new`'s
// default. Adding an agent is its folder plus one entry here.
// claude.TestDouble is blobhub-worker's scripted test_double, last.
var adapters = append(append([]agent.Adapter{claude.Adapter, codex.Adapter}, append(acp.Adapters(), antigravity.Adapter)...), claude.TestDouble)

func main() {
	// Not dumpable, first: a process of the same user (an agent's tool)
	// can then neither read bhw-run's memory, where BLOBHUB_API_KEY is, nor
	// ptrace it; on Linux not its /proc/<pid>/environ either. What each
	// system covers: agentproc.NotDumpable.
	_ = agentproc.NotDumpable()
	// agy's PreToolUse hook is bhw-run itself: a hidden subcommand, run
	// before the command line so each of agy's calls pays for nothing else.
	if len(os.Args) == 2 && os.Args[1] == antigravity.HookArg {
		os.Exit(antigravity.Hook(os.Stdin, os.Stdout, os.Getenv))
	}
	// One P. bhw-run waits on its agent and on BlobHub nearly all the time,
	// and with a P per core every burst of work (an agent's line, a
	// request, its answer) is handed between threads that wake each other:
	// one P saves 12-17 % of a turn's CPU on two cores
	// (BenchmarkE2ECodexTurnOverhead, BenchmarkE2EClaudeTurnOverhead), and
	// nothing bhw-run does is parallel work. GOMAXPROCS in the environment
	// still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr, version, adapters))
}
