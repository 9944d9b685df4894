//go:build realcli

package acptest

// A minimal ACP (JSON-RPC 2.0 over stdio, one message per line) client for
// the probe tests: it spawns an agent in its own process group, records every
// line both ways, queues what the agent sends, answers the agent requests a
// client must answer, and leaves session/request_permission to the test.
//
// It is not agent/jsonrpc and agent/proc on purpose: the probes check the
// facts the adapter is built on, so they must not lean on the adapter's
// own machinery (a bug there would hide a change of the agent), and they
// need what that machinery deliberately hides — every raw line with its
// time and length, the lines that are not JSON-RPC, the tree of processes
// tagged by an environment variable.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

var record = flag.Bool("record", false, "write the probe transcripts to testdata/acp/<agent>/")

// maxLine is the size above which a transcript line's command list is cut.
const maxLine = 32 << 10

// trimCommands cuts an available_commands_update to its first 3 commands
// (and Qwen Code's skill bodies in _meta to the first one).
func trimCommands(msg json.RawMessage) (json.RawMessage, bool) {
	var m map[string]any
	if json.Unmarshal(msg, &m) != nil {
		return msg, false
	}
	params, _ := m["params"].(map[string]any)
	upd, _ := params["update"].(map[string]any)
	cmds, ok := upd["availableCommands"].([]any)
	if !ok {
		return msg, false
	}
	if len(cmds) > 3 {
		upd["availableCommands"] = cmds[:3]
	}
	if meta, ok := upd["_meta"].(map[string]any); ok {
		if d, ok := meta["availableSkillDetails"].([]any); ok && len(d) > 1 {
			meta["availableSkillDetails"] = d[:1]
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return msg, false
	}
	return b, true
}

type agentProc struct {
	t     testing.TB
	label string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	start time.Time
	tag   string // BHW_PROBE_TAG in the agent's env: finds every descendant
	root  string // replaced by /probe in transcripts

	mu       sync.Mutex
	nextID   int
	pending  map[string]chan *rpcMsg
	queue    []*rpcMsg     // agent requests and notifications, not yet taken
	changed  chan struct{} // closed and replaced when queue grows or stdout ends
	lines    []line
	noise    []string // stdout lines that are not JSON-RPC
	longest  int      // bytes of the longest stdout line
	auto     []*rpcMsg
	eof      bool
	stderr   bytes.Buffer
	exited   chan struct{}
	waitErr  error
	procStat *os.ProcessState
}

// spawn starts argv with env in dir, in its own process group.
func spawn(t testing.TB, label, root, dir string, env, argv []string) *agentProc {
	t.Helper()
	tag := fmt.Sprintf("%s-%d-%d", label, os.Getpid(), time.Now().UnixNano())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), env...), "BHW_PROBE_TAG="+tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a := &agentProc{t: t, label: label, cmd: cmd, tag: tag, root: root,
		pending: map[string]chan *rpcMsg{}, changed: make(chan struct{}), exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &a.mu, b: &a.stderr}
	a.stdin = stdin
	// The slot is held from the start to the exit: a probe runs its
	// processes one after another, so it never waits for a second slot.
	probeSlots.Acquire(t, slotWait)
	a.start = time.Now()
	if err := cmd.Start(); err != nil {
		probeSlots.Release()
		t.Fatalf("start %s: %v", argv[0], err)
	}
	go a.read(stdout)
	go func() {
		err := cmd.Wait()
		a.mu.Lock()
		a.waitErr, a.procStat = err, cmd.ProcessState
		a.mu.Unlock()
		probeSlots.Release()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.killGroup()
		if t.Failed() {
			a.dump()
		}
	})
	return a
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (a *agentProc) pgid() int { return a.cmd.Process.Pid }

func (a *agentProc) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		b, err := br.ReadBytes('\n')
		if s := bytes.TrimSpace(b); len(s) > 0 {
			a.handle(s)
		}
		if err != nil {
			a.mu.Lock()
			a.eof = true
			close(a.changed)
			a.changed = make(chan struct{})
			a.mu.Unlock()
			return
		}
	}
}

func (a *agentProc) handle(b []byte) {
	at := time.Since(a.start)
	a.mu.Lock()
	a.longest = max(a.longest, len(b))
	a.mu.Unlock()
	var m rpcMsg
	if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
		a.mu.Lock()
		a.noise = append(a.noise, string(b))
		a.mu.Unlock()
		return
	}
	m.at = at
	a.mu.Lock()
	a.lines = append(a.lines, line{Dir: "recv", T: at.Seconds(), Msg: append(json.RawMessage(nil), b...)})
	if m.Method == "" { // a response to one of ours
		ch := a.pending[string(m.ID)]
		delete(a.pending, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			ch <- &m
		}
		return
	}
	a.mu.Unlock()
	if m.isRequest() && m.Method != "session/request_permission" {
		a.answerAuto(&m)
		return
	}
	a.mu.Lock()
	a.queue = append(a.queue, &m)
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// answerAuto answers the agent requests a client must answer but the test
// does not decide: fs/write_text_file with {} (the agent writes the file
// itself; the client advertised no fs capability), anything else with
// "method not found".
func (a *agentProc) answerAuto(m *rpcMsg) {
	a.mu.Lock()
	a.auto = append(a.auto, m)
	a.mu.Unlock()
	if m.Method == "fs/write_text_file" {
		a.reply(m, map[string]any{})
		return
	}
	a.replyError(m, -32601, "method not found: "+m.Method)
}

func (a *agentProc) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.t.Fatal(err)
	}
	a.mu.Lock()
	a.lines = append(a.lines, line{Dir: "send", T: time.Since(a.start).Seconds(), Msg: b})
	a.mu.Unlock()
	// A write after the agent exited fails; the test sees that elsewhere.
	_, _ = a.stdin.Write(append(b, '\n'))
}

// call is a request in flight.
type call struct {
	method string
	ch     chan *rpcMsg
}

func (a *agentProc) send(method string, params any) *call {
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	ch := make(chan *rpcMsg, 1)
	a.pending[strconv.Itoa(id)] = ch // the id's JSON form, as the response carries it
	a.mu.Unlock()
	c := &call{method: method, ch: ch}
	a.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return c
}

// wait returns the response to c, or fails the test after d.
func (a *agentProc) wait(c *call, d time.Duration) *rpcMsg {
	a.t.Helper()
	select {
	case m := <-c.ch:
		return m
	case <-a.exited:
		select {
		case m := <-c.ch:
			return m
		default:
		}
		a.t.Fatalf("%s: the agent exited before answering %s (%v)", a.label, c.method, a.waitErr)
	case <-time.After(d):
		a.t.Fatalf("%s: no answer to %s within %s", a.label, c.method, d)
	}
	return nil
}

// request sends method and waits for its result; a JSON-RPC error fails
// the test.
func (a *agentProc) request(method string, params any, d time.Duration) json.RawMessage {
	a.t.Helper()
	m := a.wait(a.send(method, params), d)
	if m.Error != nil {
		a.t.Fatalf("%s: %s: %v", a.label, method, m.Error)
	}
	return m.Result
}

func (a *agentProc) notify(method string, params any) {
	a.write(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func (a *agentProc) reply(m *rpcMsg, result any) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
}

func (a *agentProc) replyError(m *rpcMsg, code int, msg string) {
	a.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": code, "message": msg}})
}

// next takes queued agent messages in order until one satisfies ok; it
// returns that one and those taken before it. It fails the test after d.
func (a *agentProc) next(ok func(*rpcMsg) bool, d time.Duration) (*rpcMsg, []*rpcMsg) {
	a.t.Helper()
	m, skipped, err := a.tryNext(ok, d)
	if err != nil {
		a.t.Fatalf("%s: %v", a.label, err)
	}
	return m, skipped
}

func (a *agentProc) tryNext(ok func(*rpcMsg) bool, d time.Duration) (*rpcMsg, []*rpcMsg, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var skipped []*rpcMsg
	for {
		a.mu.Lock()
		for len(a.queue) > 0 {
			m := a.queue[0]
			a.queue = a.queue[1:]
			if ok(m) {
				a.mu.Unlock()
				return m, skipped, nil
			}
			skipped = append(skipped, m)
		}
		ch, eof := a.changed, a.eof
		a.mu.Unlock()
		if eof {
			return nil, skipped, errors.New("the agent closed stdout before the awaited message")
		}
		select {
		case <-ch:
		case <-deadline.C:
			return nil, skipped, fmt.Errorf("the awaited message did not come within %s", d)
		}
	}
}

// drain takes every queued message without waiting.
func (a *agentProc) drain() []*rpcMsg {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue
	a.queue = nil
	return q
}

// collectUntil takes queued messages until the response of c arrives (or d
// passes), returning them and the response.
func (a *agentProc) collectUntil(c *call, d time.Duration) (*rpcMsg, []*rpcMsg) {
	a.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var got []*rpcMsg
	for {
		a.mu.Lock()
		got = append(got, a.queue...)
		a.queue = nil
		ch := a.changed
		a.mu.Unlock()
		select {
		case m := <-c.ch:
			// Notifications sent before the response are queued already:
			// the reader handles lines in order.
			got = append(got, a.drain()...)
			return m, got
		case <-ch:
		case <-a.exited:
			a.t.Fatalf("%s: the agent exited before answering %s", a.label, c.method)
		case <-deadline.C:
			a.t.Fatalf("%s: no answer to %s within %s", a.label, c.method, d)
		}
	}
}

func isPermission(m *rpcMsg) bool { return m.Method == "session/request_permission" }

func (a *agentProc) closeStdin() { _ = a.stdin.Close() }

// waitExit waits for the process to exit and returns its exit code.
func (a *agentProc) waitExit(d time.Duration) (int, time.Duration) {
	a.t.Helper()
	t0 := time.Now()
	select {
	case <-a.exited:
	case <-time.After(d):
		a.t.Fatalf("%s: still running %s after stdin closed", a.label, d)
	}
	return a.procStat.ExitCode(), time.Since(t0)
}

// killGroup ends whatever is left: SIGTERM to the group, SIGKILL after 3 s.
// Processes that left the group (a setsid shell) are found by their tag.
func (a *agentProc) killGroup() {
	_ = syscall.Kill(-a.pgid(), syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-a.pgid(), syscall.SIGKILL)
		<-a.exited
	}
	for _, p := range tagged(a.tag) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// tagged lists the live processes whose environment holds BHW_PROBE_TAG=tag.
func tagged(tag string) []int {
	want := []byte("BHW_PROBE_TAG=" + tag + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// A zombie waits for its parent's wait; it is not running.
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// groupMembers lists the live processes of group pgid (state and command).
func groupMembers(pgid int) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		// A zombie has exited; it stays listed until init reaps it (which a
		// container's init may never do).
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" {
			continue
		}
		out = append(out, e.Name()+" "+f[0]+" "+string(st[bytes.IndexByte(st, '(')+1:i]))
	}
	return out
}

// rss is the summed resident set (KiB) of every tagged process.
func rssKiB(tag string) int {
	total := 0
	for _, pid := range tagged(tag) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				total += n
			}
		}
	}
	return total
}

// transcript is every JSON-RPC line so far, paths under root shown as /probe.
func (a *agentProc) transcript() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b bytes.Buffer
	mod := agenttest.ModuleRoot(a.t)
	for _, l := range a.lines {
		l.T = float64(int(l.T*1000)) / 1000
		if len(l.Msg) > maxLine {
			if cut, ok := trimCommands(l.Msg); ok {
				l.Trimmed, l.Msg = len(l.Msg), cut
			}
		}
		// Absolute and relative (OpenCode's titles) forms of the test root,
		// and the checkout (the CLIs name their own install path).
		l.Msg = bytes.ReplaceAll(l.Msg, []byte(a.root), []byte("/probe"))
		l.Msg = bytes.ReplaceAll(l.Msg, []byte(strings.TrimPrefix(a.root, "/")), []byte("probe"))
		l.Msg = bytes.ReplaceAll(l.Msg, []byte(mod), []byte("/bhw-run"))
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// save writes the transcript to testdata/acp/<agent>/<name>.jsonl when the
// test runs with -record.
func (a *agentProc) save(agent, name string) {
	if !*record {
		return
	}
	dir := filepath.Join(agenttest.ModuleRoot(a.t), "testdata", "acp", agent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), a.transcript(), 0o644); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agentProc) stderrText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.String()
}

func (a *agentProc) dump() {
	var lines []string
	for _, l := range strings.Split(string(a.transcript()), "\n") {
		lines = append(lines, clip(l, 3000))
	}
	a.t.Logf("%s transcript:\n%s", a.label, clip(strings.Join(lines, "\n"), 60000))
	a.t.Logf("%s stderr:\n%s", a.label, clip(a.stderrText(), 8000))
	a.mu.Lock()
	noise := a.noise
	a.mu.Unlock()
	if len(noise) > 0 {
		a.t.Logf("%s stdout noise: %q", a.label, noise)
	}
}

func waitCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
