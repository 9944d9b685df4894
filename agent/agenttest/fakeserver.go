package agenttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/agent/proc"
)

// FakeServer is the plumbing of a scripted fake agent that speaks JSON-RPC
// on stdio, which each fake (this package's, codextest's, acptest's) gives
// its own protocol: the script, the connection, one writer, hanging, the
// turns and ids it counts, and the steps every fake plays alike.
type FakeServer struct {
	Script Script
	Conn   *jsonrpc.Conn

	wmu     sync.Mutex
	out     *bufio.Writer
	hanging atomic.Bool
	deaf    atomic.Bool // reads nothing more (Script.StopReading, Flood)
	turn    int         // the turns begun (NextTurn)
	seq     int         // the ids given (NextID)
}

// NextTurn begins the script's next turn: its steps (a turn past the last
// says "no more script") and its number, from 1.
func (f *FakeServer) NextTurn() ([]Step, int) {
	steps := []Step{{Text: "no more script"}}
	if f.turn < len(f.Script.Turns) {
		steps = f.Script.Turns[f.turn]
	}
	f.turn++
	return steps, f.turn
}

// NextID is a new id for what the fake sends: prefix_<n>, n counting from
// 1 over the fake's life.
func (f *FakeServer) NextID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s_%d", prefix, f.seq)
}

// PlayAlike plays st when it is a step every fake plays alike, whatever
// its protocol (Crash, Hang, Garbage), and ignores any other. A fake plays
// the other steps its own way and hands PlayAlike what is left (its
// switch's default).
func (f *FakeServer) PlayAlike(st Step) {
	switch {
	case st.Crash != 0:
		f.Crash(st.Crash, st.Stderr)
	case st.Hang:
		f.Hang()
	case st.Garbage != "":
		_ = f.WriteLine([]byte(st.Garbage))
	}
}

// ReplyAtEnd answers the prompt request id with *res, unless *res is nil
// by then (the play answered it itself, as an AfterEnd step does). A
// fake's play defers it, and sets *res as its turn goes.
func (f *FakeServer) ReplyAtEnd(id jsonrpc.ID, res *map[string]any) {
	if *res != nil {
		_ = f.Conn.Reply(id, *res)
	}
}

// FloodMethod is the method of the requests a Flood sends.
const FloodMethod = "bhw_test/flood"

// Opened is what each fake calls once its session is open, from the
// handler of the request that opened it: the script's Flood and
// StopReading start there.
func (f *FakeServer) Opened() {
	for i := 0; i < f.Script.Flood; i++ {
		_, _, _ = f.Conn.Go(FloodMethod, map[string]any{"n": i})
	}
	if f.Script.Flood > 0 || f.Script.StopReading {
		fmt.Fprintln(os.Stderr, "fake agent: reading nothing more")
		f.deaf.Store(true)
		Tell(f.Script.Deaf)
	}
}

// AfterEndAnswer ends a Step.AfterEnd once it has sent all it sends: it
// tells Script.Sent, waits for the answer to its request (ch; err when it
// could not be sent) and says on stderr how it was answered: allowed when
// the result's key is allow, else refused.
func (f *FakeServer) AfterEndAnswer(ch <-chan jsonrpc.Message, err error, key, allow string) {
	Tell(f.Script.Sent)
	verdict := "refused"
	if err == nil {
		select {
		case m := <-ch:
			var res map[string]any
			if m.Error == nil && json.Unmarshal(m.Result, &res) == nil && res[key] == allow {
				verdict = "allowed"
			}
		case <-f.Conn.Done():
		}
	}
	fmt.Fprintln(os.Stderr, "fake agent: the request after the end was "+verdict)
}

// Told waits, up to within, for a line on the named pipe path (Tell's
// other end).
func Told(path string, within time.Duration) error {
	told := make(chan error, 1)
	go func() {
		f, err := os.Open(path)
		if err == nil {
			_, err = bufio.NewReader(f).ReadString('\n')
			f.Close()
		}
		told <- err
	}()
	select {
	case err := <-told:
		return err
	case <-time.After(within):
		return fmt.Errorf("nothing told on %s within %s", path, within)
	}
}

// Tell writes a line to the named pipe path (Script.Deaf, Script.Sent),
// when one is named, in the background: the open waits for a reader.
func Tell(path string) {
	if path == "" {
		return
	}
	go func() {
		if p, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(p, "reading nothing more")
			p.Close()
		}
	}()
}

// Begin plays what a fake agent's script says of its start: a
// startupError is printed on stderr and Begin is false (the fake exits 1 at
// once); ignoreSIGTERM leaves only SIGKILL to end the process.
func Begin(startupError string, ignoreSIGTERM bool) bool {
	if startupError != "" {
		fmt.Fprintln(os.Stderr, startupError)
		return false
	}
	if ignoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	return true
}

// A StandInScript is the script of a stand-in CLI: it says how the
// stand-in's start goes (Begin).
type StandInScript interface {
	Start() (startupError string, ignoreSIGTERM bool)
}

// Start is what s says of the agent's start.
func (s Script) Start() (startupError string, ignoreSIGTERM bool) {
	return s.StartupError, s.IgnoreSIGTERM
}

// StandIn starts a stand-in CLI (agytest's agy, claudetest's claude) run
// with args: with --version among them it prints version; else it reads
// its script, the JSON file at path, and plays what the script says of its
// start (Begin). ok false: the stand-in exits at once with status, 0 after
// --version, 2 when the script cannot be read (said on stderr after who),
// 1 for a StartupError.
func StandIn[S StandInScript](who, version, path string, args []string) (sc S, status int, ok bool) {
	if slices.Contains(args, "--version") {
		fmt.Println(version)
		return sc, 0, false
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &sc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, who+":", err)
		return sc, 2, false
	}
	if !Begin(sc.Start()) {
		return sc, 1, false
	}
	return sc, 0, true
}

// RunIfSet plays a fake and exits with its status when the variable env
// names its script; otherwise it returns at once. A fake's MaybeRun calls
// it first thing in TestMain.
func RunIfSet(env string, fake func(script string) int) {
	if p := os.Getenv(env); p != "" {
		os.Exit(fake(p))
	}
}

// ServeFake plays the fake whose script is at path until its stdin ends,
// and returns its exit status. setup makes the connection's handlers
// (version: send "jsonrpc":"2.0"). A StartupError exits 1 at once.
func ServeFake(path string, version bool, setup func(f *FakeServer) jsonrpc.Options) int {
	sc, err := ReadScript(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake agent:", err)
		return 2
	}
	if !Begin(sc.StartupError, sc.IgnoreSIGTERM) {
		return 1
	}
	f := &FakeServer{Script: sc, out: bufio.NewWriterSize(os.Stdout, 1<<20)}
	o := setup(f)
	o.Write, o.Version = f.WriteLine, version
	f.Conn = jsonrpc.NewConn(o)
	br := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		l, err := proc.ReadLine(br, 64<<20)
		if len(l.Data) > 0 && l.Over == 0 {
			f.Conn.Receive(l.Data)
		}
		if f.deaf.Load() {
			// The pipe fills; only a signal ends it.
			Forever()
		}
		if err != nil {
			// stdin closed: exit, as the real agents do, unless hanging.
			if f.hanging.Load() {
				Forever()
			}
			f.wmu.Lock()
			f.out.Flush()
			f.wmu.Unlock()
			return 0
		}
	}
}

// WriteLine writes one line to stdout (nothing, ever, once hanging).
func (f *FakeServer) WriteLine(b []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.hanging.Load() {
		Forever() // a hung agent writes nothing more
	}
	f.out.Write(b)
	f.out.WriteByte('\n')
	return f.out.Flush()
}

// Hang stops the fake for good: it writes nothing more, ignores the end of
// its stdin, and keeps running.
func (f *FakeServer) Hang() {
	f.hanging.Store(true)
	Forever()
}

// Forever blocks for good: a sleep, not select{}, which the runtime ends as
// a deadlock (exit 2) once every goroutine waits on the others.
func Forever() {
	for {
		time.Sleep(time.Hour)
	}
}

// Crash exits with code after printing stderr.
func (f *FakeServer) Crash(code int, stderr string) {
	if stderr != "" {
		fmt.Fprintln(os.Stderr, stderr)
	}
	f.wmu.Lock()
	f.out.Flush()
	os.Exit(code)
}

// Grandchild starts a grandchild (StartGrandchild) and returns its pid; the
// fake crashes when it cannot.
func (f *FakeServer) Grandchild() int {
	pid, err := StartGrandchild()
	if err != nil {
		f.Crash(2, "fake agent: grandchild: "+err.Error())
	}
	return pid
}

// StartGrandchild starts `sleep 300` in its own session holding a copy of
// stdout, as a leaked tool child would, and returns its pid.
func StartGrandchild() (int, error) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}
