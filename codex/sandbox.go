package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/statefile"
)

// SandboxWorks runs `true` inside the Codex sandbox the way approval and
// guarded threads use it, and reports why when it cannot. On Linux that is
// bubblewrap with user, mount and net namespaces plus seccomp; on macOS
// the same command runs it under Seatbelt (/usr/bin/sandbox-exec), which
// every Mac has (docs/macos.md). Without user namespaces
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

// SandboxCacheFile is the file, in Launch.CacheDir, where preflight
// remembers the executables whose sandbox check passed. Deleting it makes
// the next approval or guarded thread check again (after a change to the
// machine the check cannot see: user namespaces, AppArmor, bubblewrap).
const SandboxCacheFile = "codex-sandbox.json"

// sandboxCache is SandboxCacheFile: the executables whose check passed, by
// absolute path, each with the size and modification time it had then. A
// new Codex (another size or mtime, or a symlink now pointing elsewhere) is
// checked again. It is only a cache: unreadable is empty, and a write that
// fails leaves the next run to check again.
type sandboxCache struct{ dir string }

type sandboxStamp struct {
	Size      int64     `json:"size"`
	ModTime   time.Time `json:"mtime"`
	CheckedAt time.Time `json:"checked_at"`
}

func (c sandboxCache) path() string { return filepath.Join(c.dir, SandboxCacheFile) }

func (c sandboxCache) load() map[string]sandboxStamp {
	m := map[string]sandboxStamp{}
	// Never through a link nor blocking on a named pipe: the cache is a
	// file of the state tree like the others.
	if b, err := statefile.Read(c.path()); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// stamp is what the cache keys an executable by, following symlinks.
func stamp(executable string) (sandboxStamp, bool) {
	fi, err := os.Stat(executable)
	if err != nil {
		return sandboxStamp{}, false
	}
	return sandboxStamp{Size: fi.Size(), ModTime: fi.ModTime().UTC()}, true
}

// passed reports whether the check passed for executable as it is now.
func (c sandboxCache) passed(executable string) bool {
	if c.dir == "" {
		return false
	}
	now, ok := stamp(executable)
	was, seen := c.load()[executable]
	return ok && seen && was.Size == now.Size && was.ModTime.Equal(now.ModTime)
}

// remember records that the check passed for executable. The file is
// replaced by a rename, so a reader never sees half of it.
func (c sandboxCache) remember(executable string) {
	st, ok := stamp(executable)
	if c.dir == "" || !ok || os.MkdirAll(c.dir, 0o700) != nil {
		return
	}
	m := c.load()
	st.CheckedAt = time.Now().UTC()
	m[executable] = st
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, "."+SandboxCacheFile+".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), c.path()) != nil {
		_ = os.Remove(tmp.Name())
	}
}
