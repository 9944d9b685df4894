//go:build realcli

package codex

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/policy"
)

// countingListener listens on 127.0.0.1 until the test ends and counts
// the connections it accepts: a sandbox that shuts the network leaves it
// at zero.
func countingListener(t *testing.T) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// TestSandboxKeepsTheWorkersBounds: an unconfined approval thread runs
// Codex in its workspace-write sandbox, which the machine owner's
// config.toml could widen (network_access, writable_roots) where
// blobhub-worker's ":workspace" profile ignores both. bhw-run pins them:
// a sandboxed connect to a listener on 127.0.0.1 and a write to the
// owner's extra root both fail, unasked, as under the worker, while a
// write in the work folder runs.
func TestSandboxKeepsTheWorkersBounds(t *testing.T) {
	port, accepted := countingListener(t)
	extra := t.TempDir()
	r := newRig(t,
		codextest.Run(fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'", port)),
		codextest.Run("echo out > "+filepath.Join(extra, "out.txt")+" && echo wrote-out"),
		codextest.Run("echo in > in.txt && echo wrote-in"),
		codextest.Say("done"),
	)
	// The owner widens the sandbox; /tmp (where the test's folders are) is
	// taken out of it so that only writable_roots could let the write in.
	f, err := os.OpenFile(filepath.Join(r.home, "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "\n[sandbox_workspace_write]\nnetwork_access = true\nwritable_roots = [%q]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n", extra)
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	s := r.start(r.launch("approval", ""))
	h := &recorder{Gate: func(c policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Allow} }}
	res := runTurn(t, s, "try", h)
	if len(h.Calls()) != 0 {
		t.Errorf("asked %d times, want none: %+v", len(h.Calls()), h.Calls())
	}
	reqs := r.model.Requests()
	outs := reqs[len(reqs)-1].ToolOutputs()
	all := fmt.Sprint(outs)
	if strings.Contains(all, "connected") || accepted.Load() != 0 {
		t.Errorf("a sandboxed command reached 127.0.0.1:%d (%d accepted): %v", port, accepted.Load(), outs)
	}
	if exists(filepath.Join(extra, "out.txt")) || strings.Contains(all, "wrote-out") {
		t.Errorf("a sandboxed command wrote to the owner's writable root: %v", outs)
	}
	if !exists(r.path("in.txt")) {
		t.Errorf("the write in the work folder did not run (%s): %v", res.Outcome, outs)
	}
}
