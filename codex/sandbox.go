package codex

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// SandboxWorks runs `true` inside the Codex Linux sandbox (bubblewrap with
// user, mount and net namespaces plus seccomp) the way approval and guarded
// threads use it, and reports why when it cannot. Without user namespaces
// every sandboxed command fails with no fallback and no approval prompt
// (docs/agents.md, the sandbox), so such a machine must refuse those
// postures: the adapter's preflight turns this into SANDBOX_UNAVAILABLE.
//
// codex 0.171.0 has no `codex sandbox linux` subcommand (a trailing "linux"
// is taken as the command to run); the form is `codex sandbox -c
// sandbox_mode="workspace-write" -- true`. env should carry the CODEX_HOME
// the thread will use.
func SandboxWorks(ctx context.Context, executable string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "bhw-codex-sandbox-")
	if err != nil {
		return fmt.Errorf("codex sandbox check: %w", err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, executable, "sandbox", "-c", `sandbox_mode="workspace-write"`, "--", "true")
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("codex sandbox does not work on this machine (%v): %s", err, sandboxOutput(out.String()))
	}
	return nil
}

// sandboxOutput keeps the informative lines of the check's output: Codex
// always prints a bubblewrap-on-PATH and a temporary-dir warning here.
func sandboxOutput(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, "could not find bubblewrap on PATH") || strings.Contains(l, "could not create PATH aliases") {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		return "no output"
	}
	if len(keep) > 5 {
		keep = keep[len(keep)-5:]
	}
	return strings.Join(keep, " | ")
}
