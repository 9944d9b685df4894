//go:build realcli

package antigravity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestWorkerHookSpeaksToBridge: blobhub-worker's own hook program
// (`blobhub-worker agy-gate`, which a folder the worker prepared names)
// relays a call to bhw-run's bridge and prints its answer, so a run of
// bhw-run is gated through either hook.
func TestWorkerHookSpeaksToBridge(t *testing.T) {
	python := agenttest.PinnedCLI(t, "Python peer", "BHW_PEER_PYTHON", ".tools/peer/bin/python")
	worker := filepath.Join(filepath.Dir(python), "blobhub-worker")
	b, err := startBridge()
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	got := make(chan *hookRequest, 1)
	go func() {
		r := <-b.reqs
		got <- r
		r.answer <- deny("refused by bhw-run")
	}()
	cmd := exec.CommandContext(t.Context(), worker, "agy-gate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", SocketEnv + "=" + b.path}
	cmd.Stdin = strings.NewReader(`{"toolCall":{"name":"run_command","args":{"CommandLine":"rm -rf /"}}}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the worker's hook: %v", err)
	}
	var v verdict
	if err := json.Unmarshal(out, &v); err != nil || v.Decision != "deny" || v.Reason != "refused by bhw-run" {
		t.Fatalf("the worker's hook printed %q (%v)", out, err)
	}
	r := <-got
	if r.name != "run_command" || !strings.Contains(string(r.args), `"CommandLine"`) || b.calls.Load() != 1 {
		t.Fatalf("the bridge got %s %s (%d calls)", r.name, r.args, b.calls.Load())
	}
}

// TestHookSpeaksToWorkerBridge: bhw-run's hook program relays a call to
// blobhub-worker's own GateBridge and prints its answer, so a worker's
// turn is gated through bhw-run's hook too.
func TestHookSpeaksToWorkerBridge(t *testing.T) {
	python := agenttest.PinnedCLI(t, "Python peer", "BHW_PEER_PYTHON", ".tools/peer/bin/python")
	script := `
import asyncio, sys
from blobhub_worker.codeagents.adapters.antigravity_gate import GateBridge

async def gate(harness, name, args):
    return ("deny", "no-" + name) if args.get("CommandLine") == "rm -rf /" else ("allow", "")

async def main():
    bridge = GateBridge(permission_gate=gate, socket_dir=sys.argv[1])
    print(await bridge.start(), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    print(bridge.calls, flush=True)
    await bridge.close()

asyncio.run(main())
`
	cmd := exec.CommandContext(t.Context(), python, "-c", script, t.TempDir())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("the worker's bridge did not start: %s", stderr.String())
	}
	sock := lines.Text()
	env := map[string]string{SocketEnv: sock}
	for call, want := range map[string]verdict{
		`{"toolCall":{"name":"run_command","args":{"CommandLine":"rm -rf /"}}}`: {Decision: "deny", Reason: "Denied by policy rule 'no-run_command'"},
		`{"toolCall":{"name":"view_file","args":{"AbsolutePath":"/w/a"}}}`:      {Decision: "allow"},
	} {
		var out bytes.Buffer
		Hook(strings.NewReader(call), &out, func(k string) string { return env[k] })
		var v verdict
		if err := json.Unmarshal(out.Bytes(), &v); err != nil || v != want {
			t.Errorf("%s: bhw-run's hook printed %q, want %+v", call, out.String(), want)
		}
	}
	_, _ = stdin.Write([]byte("done\n"))
	if !lines.Scan() || lines.Text() != "2" {
		t.Fatalf("the worker's bridge counted %q calls, want 2: %s", lines.Text(), stderr.String())
	}
}
