//go:build realcli

package codex

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/confine"
)

// TestConfinedCodexSandboxes re-measures why a confined Codex thread runs
// with no sandbox of Codex's own and asks before every command
// (docs/security.md, "Codex under approval, confined, asks before every
// command"): each sandbox Codex offers, run through `codex sandbox` (the
// machinery its app-server runs commands with) inside the confinement
// bhw-run gives the agent. A Codex release that changes one of them fails
// this test: then the posture is to be weighed again.
func TestConfinedCodexSandboxes(t *testing.T) {
	if confine.ABI() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this kernel has no Landlock; the confinement needs it")
		}
		t.Skip("this kernel has no Landlock")
	}
	bin := codextest.Bin(t)
	base := t.TempDir()
	home, work, temp := filepath.Join(base, "codex-home"), filepath.Join(base, "work"), filepath.Join(base, "tmp")
	for _, d := range []string{home, work, temp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The one sandbox Codex runs without bubblewrap: the network shut,
	// every write left to the confinement.
	profile := "[permissions.netoff.filesystem]\n\":root\" = \"write\"\n[permissions.netoff.network]\nenabled = false\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := confine.Build(confine.Spec{WorkFolder: work, Temp: temp, Writable: []string{home}})
	if err != nil {
		t.Fatal(err)
	}
	env := append(codextest.Env(home), "TMPDIR="+temp)
	// run runs `codex sandbox args -- sh -c script` in work, confined or
	// not, and returns its output and exit error.
	run := func(confined bool, script string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{"sandbox"}, args...), "--", "sh", "-c", script)...)
		cmd.Dir, cmd.Env = work, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if confined {
			f, err := confine.Wrap(cmd, rules)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
		}
		err := cmd.Run()
		return out.String(), err
	}

	// The worker's sandbox, bubblewrap: nothing runs inside the confinement.
	if out, err := run(true, "echo ran", "-c", `sandbox_mode="workspace-write"`); err == nil || strings.Contains(out, "ran") || !strings.Contains(out, "bwrap") {
		t.Errorf("workspace-write inside the confinement: %v, %q; want bubblewrap failing", err, out)
	}
	// Codex's legacy Landlock mode panics, confined or not.
	if out, err := run(false, "echo ran", "-c", `sandbox_mode="workspace-write"`, "-c", "features.use_legacy_landlock=true"); err == nil || !strings.Contains(out, "requires bubblewrap") {
		t.Errorf("legacy Landlock: %v, %q; want its panic", err, out)
	}

	// The network-only profile runs inside the confinement and shuts the
	// network, but its commands write the agent home unasked: Codex's
	// config.toml there runs hooks and servers at its next start.
	port, accepted := countingListener(t)
	script := fmt.Sprintf("echo ran; echo '# probe' >> %s && echo home-written; bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo connected",
		filepath.Join(home, "config.toml"), port)
	out, err := run(true, script, "-P", "netoff")
	if !strings.Contains(out, "ran") || strings.Contains(out, "connected") || accepted.Load() != 0 {
		t.Errorf("network-only profile inside the confinement: %v, %q (%d accepted); want it to run with no network", err, out, accepted.Load())
	}
	if !strings.Contains(out, "home-written") {
		t.Errorf("network-only profile: %q; the agent home is no longer written unasked: weigh it again", out)
	}
}
