package antigravity

// The gate's two halves. agy's only control point per call is its
// PreToolUse hook, a short-lived process it starts before every call (reads
// included) with {toolCall: {name, args}} on stdin, reading
// {"decision": "allow" | "deny", "reason"} from its stdout. The hook is
// bhw-run itself (HookArg): it relays the call over the Unix socket named
// by SocketEnv in the environment agy hands it, one call per connection, a
// JSON line each way, to the bridge the session serves, which puts the call
// to the gate on the turn's goroutine. blobhub-worker's hook speaks the
// same protocol, so either program serves either runner.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// SocketEnv names the bridge's socket in agy's environment (and so its
// hooks'); blobhub-worker's name.
const SocketEnv = "BLOBHUB_AGY_GATE_SOCKET"

// HookArg is bhw-run's hidden subcommand that is the hook's program.
const HookArg = "agy-gate"

// maxHookRequest bounds a call the hook relays (a file's whole content may
// be in it); maxHookAnswer the bridge's answer.
const (
	maxHookRequest = 16 << 20
	maxHookAnswer  = 1 << 20
)

// hookWait bounds the hook's wait for the bridge's answer, as the worker's
// hook does: past it the call is denied.
const hookWait = 600 * time.Second

type verdict struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func deny(reason string) verdict { return verdict{Decision: "deny", Reason: reason} }

// Hook is the hook's program: it relays the call on stdin to the bridge
// at SocketEnv and prints the answer. No socket set: not a bhw-run or
// blobhub-worker turn (a person's own agy in a folder that still has the
// hook), so allow, which grants nothing agy's own permissions would not. A
// socket set but unreachable, or an answer that does not read: the run's
// gate is gone, so deny. It always prints a decision and exits 0.
func Hook(stdin io.Reader, stdout io.Writer, getenv func(string) string) int {
	v := relay(stdin, getenv(SocketEnv))
	b, _ := json.Marshal(v)
	_, _ = stdout.Write(append(b, '\n'))
	return 0
}

func relay(stdin io.Reader, path string) verdict {
	if path == "" {
		return verdict{Decision: "allow"}
	}
	in, _ := io.ReadAll(io.LimitReader(stdin, maxHookRequest+1))
	var payload any = map[string]any{}
	if len(in) <= maxHookRequest && json.Valid(in) {
		payload = json.RawMessage(in)
	}
	req, err := json.Marshal(payload)
	if err != nil {
		req = []byte("{}")
	}
	conn, err := net.DialTimeout("unix", path, 30*time.Second)
	if err != nil {
		return deny("bhw-run gate unreachable: " + err.Error())
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hookWait))
	if _, err := conn.Write(append(req, '\n')); err != nil {
		return deny("bhw-run gate unreachable: " + err.Error())
	}
	line, err := bufio.NewReader(io.LimitReader(conn, maxHookAnswer)).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return deny("bhw-run gate unreachable: " + err.Error())
	}
	var v verdict
	if json.Unmarshal(line, &v) != nil || (v.Decision != "allow" && v.Decision != "deny") {
		return deny("bhw-run gate unreachable: the bridge returned no usable decision")
	}
	return v
}

// hookRequest is one call the bridge received, waiting for the turn.
type hookRequest struct {
	name   string
	args   json.RawMessage
	answer chan verdict // buffered: the turn never waits on the hook
}

// bridge serves one session's hook calls on a Unix socket in a private
// folder; the turn takes them from reqs.
type bridge struct {
	dir, path string
	ln        net.Listener
	reqs      chan *hookRequest
	calls     atomic.Int64 // calls received that read as one (the worker's count)
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

func startBridge() (*bridge, error) {
	dir, err := os.MkdirTemp("", "bhw-agy-")
	if err != nil {
		return nil, err
	}
	// A socket's path has a short limit (104 bytes on macOS, 108 on
	// Linux): a long TMPDIR falls back to /tmp.
	if len(dir)+len("/gate.sock") >= 100 {
		_ = os.Remove(dir)
		if dir, err = os.MkdirTemp("/tmp", "bhw-agy-"); err != nil {
			return nil, err
		}
	}
	b := &bridge{dir: dir, path: filepath.Join(dir, "gate.sock"), reqs: make(chan *hookRequest), done: make(chan struct{})}
	if b.ln, err = net.Listen("unix", b.path); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// maxServed bounds the connections served at once: each may hold a
// request of maxHookRequest, and anything in the agent's confinement can
// connect. agy runs its hooks one call at a time; more wait in the
// listen queue.
const maxServed = 4

func (b *bridge) accept() {
	defer b.wg.Done()
	slots := make(chan struct{}, maxServed)
	for {
		select {
		case slots <- struct{}{}:
		case <-b.done:
			return
		}
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-slots }()
			b.serve(c)
		}()
	}
}

// serve answers one hook: its call goes to the running turn, and a call
// that does not read, or comes when the session is closing, is denied.
func (b *bridge) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, maxHookRequest+2)).ReadBytes('\n')
	v := deny("bhw-run: the turn has ended")
	var p struct {
		ToolCall struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"toolCall"`
	}
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		v = deny("gate error: " + err.Error())
	case len(line) > maxHookRequest:
		v = deny("gate error: the call is larger than bhw-run reads")
	case json.Unmarshal(line, &p) != nil:
		v = deny("gate error: the call does not read as JSON")
	default:
		b.calls.Add(1)
		r := &hookRequest{name: p.ToolCall.Name, args: p.ToolCall.Args, answer: make(chan verdict, 1)}
		select {
		case b.reqs <- r:
			select {
			case v = <-r.answer:
			case <-b.done:
			}
		case <-b.done:
		}
	}
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	out, _ := json.Marshal(v)
	_, _ = c.Write(append(out, '\n'))
}

// close stops serving: every hook still waiting is denied, and the socket
// and its folder go.
func (b *bridge) close() {
	if b == nil {
		return
	}
	b.closeOnce.Do(func() {
		close(b.done)
		_ = b.ln.Close()
		b.wg.Wait()
		_ = os.RemoveAll(b.dir)
	})
}

func (b *bridge) String() string { return fmt.Sprintf("gate bridge %s", b.path) }
