package antigravity

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const program = "/opt/bhw run/bhw-run"

func newTestHooks(t *testing.T) (*hooks, string) {
	t.Helper()
	work := t.TempDir()
	h, err := newHooks(filepath.Join(t.TempDir(), "agy-hooks"), work, program)
	if err != nil {
		t.Fatal(err)
	}
	return h, work
}

// mustAcquire is a hold of h's hook, failing the test without one.
func mustAcquire(t *testing.T, h *hooks) *hold {
	t.Helper()
	o, err := h.acquire()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func hookInstalled(t *testing.T, work string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, ".agents", "hooks.json"))
	if err != nil {
		return false
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("hooks.json does not parse: %v\n%s", err, b)
	}
	return strings.Contains(string(doc[HookKey]), "agy-gate")
}

// TestHooksMergedAndRestored: the operator's hooks.json keeps its own
// entries while the hook is in, and is put back byte for byte, mode
// included; a folder made for the hook goes with it.
func TestHooksMergedAndRestored(t *testing.T) {
	h, work := newTestHooks(t)
	dir := filepath.Join(work, ".agents")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := []byte("{\n    \"mine\": {\"enabled\": true},   \"order\": [3,1]\n}")
	file := filepath.Join(dir, "hooks.json")
	if err := os.WriteFile(file, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	o := mustAcquire(t, h)
	b, _ := os.ReadFile(file)
	if !hookInstalled(t, work) || !strings.Contains(string(b), `"mine"`) || !strings.Contains(string(b), "if [ -x '/opt/bhw run/bhw-run' ]") {
		t.Fatalf("merged:\n%s", b)
	}
	if err := o.release(); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(file)
	fi, _ := os.Stat(file)
	if !bytes.Equal(b, orig) || fi.Mode().Perm() != 0o640 {
		t.Fatalf("restored %q (%v), want %q (0640)", b, fi.Mode().Perm(), orig)
	}

	h2, work2 := newTestHooks(t)
	o, err := h2.acquire()
	if err != nil || !hookInstalled(t, work2) {
		t.Fatalf("acquire in an empty folder: %v", err)
	}
	if err := o.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(work2, ".agents")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".agents made for the hook was left: %v", err)
	}
	// A folder made for the hook that something else moved into stays.
	o, _ = h2.acquire()
	_ = os.WriteFile(filepath.Join(work2, ".agents", "other"), []byte("x"), 0o600)
	_ = o.release()
	if _, err := os.Stat(filepath.Join(work2, ".agents", "other")); err != nil {
		t.Fatalf("a file beside the hook went: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work2, ".agents", "hooks.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("hooks.json left: %v", err)
	}
}

// TestHooksShared: two runs in one folder share the hook; it stays until
// the last leaves.
func TestHooksShared(t *testing.T) {
	h, work := newTestHooks(t)
	a, b := mustAcquire(t, h), mustAcquire(t, h)
	if err := a.release(); err != nil || !hookInstalled(t, work) {
		t.Fatalf("the first run out took the hook from the second: %v", err)
	}
	if err := b.release(); err != nil || hookInstalled(t, work) {
		t.Fatalf("the last run out left the hook: %v", err)
	}
}

// TestHooksRefusesMalformed: a hooks.json that is not a JSON object is
// left as it is, and the run fails naming it.
func TestHooksRefusesMalformed(t *testing.T) {
	for _, body := range []string{"{not json", "[1,2]", "null"} {
		h, work := newTestHooks(t)
		file := filepath.Join(work, ".agents", "hooks.json")
		_ = os.MkdirAll(filepath.Dir(file), 0o755)
		_ = os.WriteFile(file, []byte(body), 0o644)
		_, err := h.acquire()
		var he *HookConfigError
		if !errors.As(err, &he) || he.Path != file {
			t.Fatalf("%q: %v, want a HookConfigError naming %s", body, err, file)
		}
		if b, _ := os.ReadFile(file); string(b) != body {
			t.Fatalf("%q was changed to %q", body, b)
		}
	}
}

// TestHooksWorkerPrepared: a folder blobhub-worker prepared (its entry
// under the same key, its command) gets bhw-run's entry for the run and
// the worker's file back after it.
func TestHooksWorkerPrepared(t *testing.T) {
	h, work := newTestHooks(t)
	worker := `{
  "blobhub_gate": {
    "enabled": true,
    "PreToolUse": [
      {
        "matcher": "",
        "hooks": [
          {
            "type": "command",
            "command": "command -v blobhub-worker >/dev/null 2>&1 && blobhub-worker agy-gate || echo '{\"decision\":\"allow\"}'",
            "timeout": 600
          }
        ]
      }
    ]
  }
}
`
	file := filepath.Join(work, ".agents", "hooks.json")
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	_ = os.WriteFile(file, []byte(worker), 0o644)
	o, err := h.acquire()
	if err != nil || !hookInstalled(t, work) {
		t.Fatalf("acquire: %v", err)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), "blobhub-worker") {
		t.Fatalf("the worker's command stayed in: %s", b)
	}
	_ = o.release()
	if b, _ := os.ReadFile(file); string(b) != worker {
		t.Fatalf("the worker's file came back as %s", b)
	}
}

// HolderEnv makes the test binary a holder (HoldForTest).
const HolderEnv = "ANTIGRAVITY_TEST_HOLD"

// kept holds the holder's hold for as long as the process lives: a hold
// nothing refers to is collected, and its file's finalizer closes the
// descriptor that carries the flock, which would let the holder look dead.
var kept *hold

// HoldForTest makes the test binary a run that acquires the hook of the
// folder spec names ("<record root>\n<work folder>"), says "held" and
// waits to be killed (TestMain calls it).
func HoldForTest(spec string) {
	root, work, _ := strings.Cut(spec, "\n")
	h, err := newHooks(root, work, program)
	if err == nil {
		kept, err = h.acquire()
	}
	if err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	os.Stdout.WriteString("held\n")
	// Until killed: a sleep, not select{}, which the runtime ends as a
	// deadlock (exit 2) once no other goroutine is left, letting the hold go.
	for {
		time.Sleep(time.Hour)
	}
}

// TestHooksAfterKill: a run killed with -9 while it held the hook leaves
// it in; the next run in the folder, gated or not, puts the operator's
// file back first.
func TestHooksAfterKill(t *testing.T) {
	root, work := filepath.Join(t.TempDir(), "agy-hooks"), t.TempDir()
	file := filepath.Join(work, ".agents", "hooks.json")
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	orig := []byte(`{"theirs":1}`)
	_ = os.WriteFile(file, orig, 0o644)
	for _, gated := range []bool{true, false} {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), HolderEnv+"="+root+"\n"+work)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 5)
		if _, err := out.Read(line); err != nil || string(line) != "held\n" {
			t.Fatalf("holder: %q %v", line, err)
		}
		h, _ := newHooks(root, work, program)
		if !hookInstalled(t, work) {
			t.Fatal("the holder installed no hook")
		}
		// A live holder is not recovered from.
		if err := h.recoverLeft(); err != nil || !hookInstalled(t, work) {
			t.Fatalf("recovered from a live holder: %v", err)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if !hookInstalled(t, work) {
			t.Fatal("the hook went with the killed run")
		}
		if gated {
			if err := mustAcquire(t, h).release(); err != nil {
				t.Fatal(err)
			}
		} else if err := h.recoverLeft(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(file); !bytes.Equal(b, orig) {
			t.Fatalf("gated %v: after the kill the file reads %s", gated, b)
		}
	}
}

// TestHookProgram: the hook's answers. No socket: allow (not a gated
// turn). A socket set but unreachable, or a bridge that answers nothing
// usable: deny. A bridge's answer is printed as it gave it.
func TestHookProgram(t *testing.T) {
	run := func(env map[string]string) verdict {
		var out bytes.Buffer
		Hook(strings.NewReader(`{"toolCall":{"name":"run_command","args":{"CommandLine":"ls"}}}`), &out, func(k string) string { return env[k] })
		var v verdict
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("hook printed %q", out.String())
		}
		return v
	}
	if v := run(nil); v.Decision != "allow" {
		t.Fatalf("no socket: %+v", v)
	}
	if v := run(map[string]string{SocketEnv: filepath.Join(t.TempDir(), "gone.sock")}); v.Decision != "deny" || !strings.Contains(v.Reason, "unreachable") {
		t.Fatalf("unreachable socket: %+v", v)
	}
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answers := []string{"{\"decision\":\"deny\",\"reason\":\"no\"}\n", "{\"decision\":\"ask\"}\n", "garbage\n"}
	got := make(chan string, len(answers))
	go func() {
		for _, a := range answers {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			n, _ := c.Read(buf)
			got <- string(buf[:n])
			_, _ = c.Write([]byte(a))
			c.Close()
		}
	}()
	env := map[string]string{SocketEnv: sock}
	if v := run(env); v.Decision != "deny" || v.Reason != "no" {
		t.Fatalf("bridge deny: %+v", v)
	}
	if req := <-got; !strings.Contains(req, `"CommandLine":"ls"`) || !strings.HasSuffix(req, "\n") {
		t.Fatalf("the bridge got %q", req)
	}
	for range 2 {
		if v := run(env); v.Decision != "deny" {
			t.Fatalf("an answer that is no decision: %+v", v)
		}
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
	}
}

// TestBridgeBoundsConnections: connections that never send their call
// hold at most maxServed slots; a hook after them waits, and is answered
// once they are closed, and the bridge denies what comes as it closes.
func TestBridgeBoundsConnections(t *testing.T) {
	b, err := startBridge()
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	var idle []net.Conn
	for range maxServed + 3 {
		c, err := net.Dial("unix", b.path)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	answered := make(chan verdict, 1)
	go func() { answered <- relay(strings.NewReader(`{"toolCall":{"name":"view_file","args":{}}}`), b.path) }()
	select {
	case r := <-b.reqs:
		t.Fatalf("a hook was served past %d idle connections: %s", maxServed, r.name)
	case <-time.After(300 * time.Millisecond):
	}
	for _, c := range idle {
		c.Close()
	}
	select {
	case r := <-b.reqs:
		r.answer <- verdict{Decision: "allow"}
	case <-time.After(time.Minute):
		t.Fatal("the hook was never served once the idle connections closed")
	}
	if v := <-answered; v.Decision != "allow" {
		t.Fatalf("the hook got %+v", v)
	}
}
