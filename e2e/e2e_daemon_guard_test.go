//go:build realcli

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/exit"
)

// TestRunRefusesLiveDaemon: while a live blobhub-worker's instance.yaml
// holds the state tree, a run of a thread ends WORKER_ALREADY_RUNNING
// (75, try again later) with what to do, and touches nothing: no thread
// folder, no item, the thread still pending. The record of a daemon
// that is gone does not stop it.
func TestRunRefusesLiveDaemon(t *testing.T) {
	e := newClaudeE2E(t)
	const alias = "guard/one"
	e.handOff(alias, claudeType, "approval", "hello")
	host, _ := os.Hostname()
	body := fmt.Sprintf("instance:\n  instance_id: ins_01J\n  pid: %d\n  host: %s\n  version: 0.11.0\n  started_at: 2026-05-27T12:35:00Z\n", workerLookalike(t), host)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(e.state, "instance.yaml")
	if err := os.WriteFile(record, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(e.items(alias))
	code, out, stderr := e.run("--json", alias)
	s := parseSummary(t, out)
	if code != exit.TempFail || s.Error == nil || s.Error.Code != exit.CodeWorkerRunning ||
		!strings.Contains(s.Error.Message, "stop it first") {
		t.Fatalf("exit %d, summary %+v, want 75 WORKER_ALREADY_RUNNING saying what to do\n%s", code, s, stderr)
	}
	if _, err := os.Stat(filepath.Join(e.state, "jobs")); err == nil {
		t.Errorf("the refused run made the state tree's jobs folder")
	}
	if n := len(e.items(alias)); n != before || e.wireState(alias) != "pending" {
		t.Errorf("the refused run changed the thread: %d items (was %d), state %s", n, before, e.wireState(alias))
	}

	// The daemon stopped without removing its record: the pid is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	body = fmt.Sprintf("instance:\n  instance_id: ins_01J\n  pid: %d\n  host: %s\n", gone.Process.Pid, host)
	if err := os.WriteFile(record, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	e.model.Push(claudetest.Text("HELLO-BACK"))
	if code, _, stderr := e.run(alias); code != 0 {
		t.Fatalf("with a stale record: exit %d\n%s", code, stderr)
	}
}
