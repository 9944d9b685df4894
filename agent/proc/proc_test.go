package proc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
)

// logBuf is a thread.log in memory; stdin, when set, gets a value for
// each stdin line as it is logged.
type logBuf struct {
	mu    sync.Mutex
	b     strings.Builder
	stdin chan struct{}
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, s, _, ok := agent.ParseLogLine(strings.TrimSuffix(string(p), "\n")); ok && s == agent.StreamStdin && l.stdin != nil {
		l.stdin <- struct{}{}
	}
	return l.b.Write(p)
}

func (l *logBuf) lines(stream string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if _, s, text, ok := agent.ParseLogLine(line); ok && s == stream {
			out = append(out, text)
		}
	}
	return out
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, body string, log *logBuf) *Process {
	t.Helper()
	p, err := Start(Config{Path: script(t, body), Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, Log: agent.NewLog(log), MaxLine: 100,
		StdinGrace: 100 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func TestReadLine(t *testing.T) {
	in := "short\n" + strings.Repeat("y", 300) + "\n" + strings.Repeat("z", 50) + "\nlast-no-newline"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	l, err := ReadLine(br, 50)
	if err != nil || string(l.Data) != "short" || l.Over != 0 {
		t.Fatalf("1: %+v %v", l, err)
	}
	l, err = ReadLine(br, 50)
	if err != nil || l.Over != 300 || !strings.HasPrefix(strings.Repeat("y", 300), string(l.Data)) || len(l.Data) == 0 {
		t.Fatalf("2: over=%d len=%d %v", l.Over, len(l.Data), err)
	}
	// Exactly max bytes is fine.
	if l, err = ReadLine(br, 50); l.Over != 0 || len(l.Data) != 50 || err != nil {
		t.Fatalf("exact: over=%d len=%d %v", l.Over, len(l.Data), err)
	}
	l, err = ReadLine(br, 50)
	if !errors.Is(err, io.EOF) || string(l.Data) != "last-no-newline" {
		t.Fatalf("3: %+v %v", l, err)
	}
	// The head of an over-long line is 4 KiB at most.
	br = bufio.NewReaderSize(strings.NewReader(strings.Repeat("h", 10000)+"\n"), 16)
	if l, _ := ReadLine(br, 100); l.Over != 10000 || len(l.Data) != headKeep {
		t.Fatalf("head: over=%d len=%d", l.Over, len(l.Data))
	}
}

// TestProcess: lines in order, an over-long one handed back by its head,
// stderr's tail kept, every line in thread.log in the one format, and the
// exit status once the process is done.
func TestProcess(t *testing.T) {
	var log logBuf
	p := start(t, `read greeting
echo "got $greeting"
printf '%0200d\n' 0
echo boom >&2
echo "last words" >&2
exit 3
`, &log)
	if err := p.WriteLine([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	var got []Line
	for l := range p.Lines() {
		got = append(got, l)
	}
	if len(got) != 2 || string(got[0].Data) != "got hello" || got[1].Over != 200 || !strings.HasPrefix(string(got[1].Data), "000") {
		t.Fatalf("lines %+v", got)
	}
	<-p.Done()
	if st := p.ExitStatus(0); st != "exit status 3" {
		t.Fatalf("status %q", st)
	}
	if tail := p.Stderr(); strings.Join(tail, "|") != "boom|last words" {
		t.Fatalf("stderr tail %q", tail)
	}
	if in := log.lines(agent.StreamStdin); len(in) != 1 || in[0] != "hello" {
		t.Errorf("stdin lines %q", in)
	}
	if out := log.lines(agent.StreamStdout); len(out) != 2 || out[0] != "got hello" || !strings.Contains(out[1], "over the limit") {
		t.Errorf("stdout lines %q", out)
	}
	if notes := log.lines(agent.StreamAdapter); len(notes) < 2 || !strings.HasPrefix(notes[0], "start: ") || notes[len(notes)-1] != "exit: exit status 3" {
		t.Errorf("adapter lines %q", notes)
	}
}

// TestCloseEscalates: a process that ignores its stdin closing and SIGTERM
// is SIGKILLed after the graces; Close returns once it is gone, in time.
func TestCloseEscalates(t *testing.T) {
	var log logBuf
	p := start(t, "trap '' TERM\necho ready\nexec sleep 60\n", &log)
	// Once the trap is set: a SIGTERM before it would end the shell, and
	// the escalation this test is about would never come.
	if l, ok := <-p.Lines(); !ok || string(l.Data) != "ready" {
		t.Fatalf("the agent did not start: %q", l.Data)
	}
	t0 := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Close returned before the process was gone")
	}
	if d := time.Since(t0); d < 300*time.Millisecond || d > 30*time.Second {
		t.Fatalf("Close took %v, want the two graces (300ms)", d)
	}
	if GroupAlive(p.Pid()) {
		t.Fatal("the group outlived Close")
	}
	notes := strings.Join(log.lines(agent.StreamAdapter), "\n")
	if !strings.Contains(notes, "SIGTERM to group") || !strings.Contains(notes, "SIGKILL to group") {
		t.Fatalf("adapter lines:\n%s", notes)
	}
}

// TestCloseWhileAWriteIsStuck: an agent that stops reading leaves a large
// write stuck in the pipe; WriteLine has returned at once all the same,
// and Close still ends the agent.
func TestCloseWhileAWriteIsStuck(t *testing.T) {
	var log logBuf
	p := start(t, "exec sleep 60\n", &log)
	wrote := make(chan error, 1)
	go func() { wrote <- p.WriteLine([]byte(strings.Repeat("x", 8<<20))) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteLine waits on an agent that does not read")
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is stuck behind the blocked write")
	}
	if err := p.WriteLine([]byte("late")); err == nil {
		t.Error("a write after Close reported success")
	}
}

// notReading starts an agent that never reads its stdin (and ignores
// SIGTERM, so only the escalation's SIGKILL ends it), with the given write
// bounds.
//
// It returns once the agent says it ignores SIGTERM: the write bounds
// start counting at the first write, and an agent still starting on a
// loaded machine would otherwise die of the SIGTERM before its trap, and
// never need the SIGKILL the tests look for.
func notReading(t *testing.T, log *logBuf, writeTimeout time.Duration) *Process {
	t.Helper()
	p, err := Start(Config{Path: script(t, "trap '' TERM\necho ready\nexec sleep 60\n"), Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Log: agent.NewLog(log), StdinGrace: 100 * time.Millisecond, KillGrace: 200 * time.Millisecond,
		WriteTimeout: writeTimeout, InterruptWrite: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if l, ok := <-p.Lines(); !ok || string(l.Data) != "ready" {
		t.Fatalf("the agent did not start: %q", l.Data)
	}
	return p
}

// wantStopped waits for the process to be stopped for not reading.
func wantStopped(t *testing.T, p *Process, log *logBuf) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent that does not read is still running\n%s", strings.Join(log.lines(agent.StreamAdapter), "\n"))
	}
	if !errors.Is(p.NotReading(), ErrNotReading) {
		t.Fatalf("NotReading = %v", p.NotReading())
	}
	if p.WriteLine([]byte("more")) == nil {
		t.Error("a write after the agent was given up reported success")
	}
	if GroupAlive(p.Pid()) {
		t.Error("the group outlived the escalation")
	}
}

// TestWriteTimeoutStopsTheAgent: a line the agent takes nothing of within
// WriteTimeout is abandoned and the agent stopped (stdin, SIGTERM,
// SIGKILL), with no Close or interrupt from anyone.
func TestWriteTimeoutStopsTheAgent(t *testing.T) {
	var log logBuf
	p := notReading(t, &log, 500*time.Millisecond)
	if err := p.WriteLine([]byte(strings.Repeat("x", 1<<20))); err != nil {
		t.Fatal(err)
	}
	wantStopped(t, p, &log)
	if notes := strings.Join(log.lines(agent.StreamAdapter), "\n"); !strings.Contains(notes, "stopped reading its input") || !strings.Contains(notes, "SIGKILL to group") {
		t.Errorf("adapter lines:\n%s", notes)
	}
}

// TestInterruptingBoundsTheStuckWrite: with a write timeout of an hour, a
// write stuck on an agent that stopped reading is abandoned
// InterruptWrite after Interrupting, and the agent is stopped: an
// interrupt never waits on the agent's reading.
func TestInterruptingBoundsTheStuckWrite(t *testing.T) {
	var log logBuf
	p := notReading(t, &log, time.Hour)
	if err := p.WriteLine([]byte(strings.Repeat("x", 1<<20))); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteLine([]byte(`{"method":"cancel"}`)); err != nil {
		t.Fatal(err)
	}
	p.Interrupting()
	wantStopped(t, p, &log)
}

// TestFloodOfAnswersIsBounded: lines queued for an agent that does not
// read are bounded: past maxQueued bytes, WriteLine fails and the agent is
// stopped, without ever blocking the caller.
func TestFloodOfAnswersIsBounded(t *testing.T) {
	var log logBuf
	p := notReading(t, &log, time.Hour)
	line := []byte(strings.Repeat("a", 1<<10))
	var err error
	for i := 0; i < 2*maxQueued/len(line) && err == nil; i++ {
		err = p.WriteLine(line)
	}
	if !errors.Is(err, ErrNotReading) {
		t.Fatalf("after %d bytes queued: %v", 2*maxQueued, err)
	}
	wantStopped(t, p, &log)
}

// TestGrandchildHoldsStdout: a grandchild that keeps a copy of stdout
// open does not keep Done or the end of Lines from coming.
func TestGrandchildHoldsStdout(t *testing.T) {
	var log logBuf
	p := start(t, "setsid sleep 30 &\necho $!\nexit 0\n", &log)
	var pid int
	for l := range p.Lines() {
		pid, _ = strconv.Atoi(string(l.Data))
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("not done while a grandchild holds stdout")
	}
	if pid == 0 {
		t.Fatal("no grandchild pid")
	}
}

// TestIsAgentGroupScript: an agent that is a script (Gemini CLI and Qwen
// Code are node programs) runs as its interpreter, so the group's leader
// is /bin/sh here, not the script; it is still the agent's group, and a
// group running something else is not.
//
// The table is read once the script runs (its first line), never between
// the fork and the exec, when the leader is still a copy of the test.
func TestIsAgentGroupScript(t *testing.T) {
	path := script(t, "echo ready\nread x\n")
	p, err := Start(Config{Path: path, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		StdinGrace: 100 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if l, ok := <-p.Lines(); !ok || string(l.Data) != "ready" {
		t.Fatalf("the script did not start: %q", l.Data)
	}
	if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p.Pid()) + "/exe"); exe == path {
		t.Fatalf("the leader's exe is the script itself (%s): the test shows nothing", exe)
	}
	if !IsAgentGroup(p.Pid(), path) {
		t.Errorf("the group of the script %s is not recognised as the agent's", path)
	}
	if IsAgentGroup(p.Pid(), "/usr/bin/some-other-agent") || IsAgentGroup(p.Pid(), "") {
		t.Error("the group is taken for another executable's")
	}
}
