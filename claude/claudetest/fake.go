package claudetest

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// FakeAgentEnv selects the fake agent in a re-executed test binary; its
// value is the path of a JSON FakeScript.
const FakeAgentEnv = "BHW_FAKE_CLAUDE_SCRIPT"

// FakeScript is what the fake claude plays: one list of steps per user
// turn, in order. A turn without a terminal step ends with a success result.
type FakeScript struct {
	SessionID string `json:"session_id,omitempty"` // default: from --session-id/--resume
	// IgnoreSIGTERM makes the agent survive SIGTERM (only SIGKILL ends it).
	IgnoreSIGTERM bool `json:"ignore_sigterm,omitempty"`
	// StartupError is printed on stderr before exiting 1 at once, without
	// reading stdin (bad flags, root bypass refused).
	StartupError string `json:"startup_error,omitempty"`
	// ResumeFails: with --resume the first turn ends as the CLI's does for
	// a session it cannot find ("No conversation found", no system/init).
	ResumeFails bool `json:"resume_fails,omitempty"`
	// StopReading: the agent never reads its stdin, and keeps running: a
	// first message larger than the pipe holds stays stuck in it.
	StopReading bool `json:"stop_reading,omitempty"`
	// Flood: at start the agent prints this many control requests (of a
	// subtype nobody knows) without reading their answers, then reads
	// nothing, as StopReading.
	Flood int `json:"flood,omitempty"`
	// Deaf is agenttest.Script.Deaf.
	Deaf  string       `json:"deaf,omitempty"`
	Turns [][]FakeStep `json:"turns"`
}

// Start is what s says of the agent's start (agenttest.StandIn).
func (s FakeScript) Start() (startupError string, ignoreSIGTERM bool) {
	return s.StartupError, s.IgnoreSIGTERM
}

// FakeStep is one step of a turn; set exactly one field.
type FakeStep struct {
	Text string `json:"text,omitempty"`
	// Tool prints a tool_use and its tool_result (no permission asked).
	Tool *FakeTool `json:"tool,omitempty"`
	// Permission asks can_use_tool and honours the answer: allow → the tool
	// "runs"; deny → an error tool_result with the message; deny+interrupt
	// → the turn ends error_during_execution/aborted_tools.
	Permission *FakeTool `json:"permission,omitempty"`
	// Ask is an AskUserQuestion (requires_user_interaction) with these questions.
	Ask json.RawMessage `json:"ask,omitempty"`
	// Crash exits with this status mid-turn, without a result, after
	// printing Stderr.
	Crash  int    `json:"crash,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Garbage prints this line as is.
	Garbage string `json:"garbage,omitempty"`
	// BigLine prints an assistant text line of this many bytes.
	BigLine int `json:"big_line,omitempty"`
	// BigRequest prints a can_use_tool control_request of this many bytes
	// (request_id "big_req_1"), waits for its answer and reports it as text
	// "big request answered: <behavior>: <message>".
	BigRequest int `json:"big_request,omitempty"`
	// RawRequest prints this control_request line as is (its request_id
	// must be "raw_req_1"), waits for the answer and reports it as text
	// "raw request answered: <subtype> <behavior>".
	RawRequest string `json:"raw_request,omitempty"`
	// Hang never answers again (ignores stdin, keeps running).
	Hang bool `json:"hang,omitempty"`
	// Grandchild starts `sleep 300` in its own session, holding a copy of
	// stdout, and prints "grandchild <pid>" as text.
	Grandchild bool `json:"grandchild,omitempty"`
	// WaitInterrupt blocks until an interrupt control_request arrives, then
	// ends the turn the way the CLI does (error_during_execution).
	WaitInterrupt bool `json:"wait_interrupt,omitempty"`
	// Fail ends the turn with an error result carrying this text.
	Fail string `json:"fail,omitempty"`
}

// FakeTool is a tool call of the fake.
type FakeTool struct {
	Name   string         `json:"name"`
	Input  map[string]any `json:"input"`
	Result string         `json:"result,omitempty"`
	// Block is a named pipe the tool reads a line from before its result:
	// the call stays open until the test writes to it (a slow tool a test
	// can watch, without a clock).
	Block string `json:"block,omitempty"`
}

// FakeVersion is what the fake prints for --version.
const FakeVersion = "2.1.332 (Claude Code) fake"

// FakeAgentCommand writes script and returns the command that runs it: the
// test binary itself, whose TestMain must call MaybeRunFakeAgent.
func FakeAgentCommand(t testing.TB, script FakeScript) (exe string, env []string) {
	t.Helper()
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "fake-claude.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return agenttest.Executable(t), append(os.Environ(), FakeAgentEnv+"="+p)
}

// MaybeRunFakeAgent runs the fake agent and exits when FakeAgentEnv is set;
// otherwise it returns at once. Call it first thing in TestMain.
func MaybeRunFakeAgent() {
	agenttest.RunIfSet(FakeAgentEnv, FakeAgentMain)
}

// FakeAgentMain plays the script at path over stdin/stdout and returns
// the exit status.
func FakeAgentMain(path string) int {
	sc, code, ok := agenttest.StandIn[FakeScript]("fake claude", FakeVersion, path, os.Args[1:])
	if !ok {
		return code
	}
	if sc.SessionID == "" {
		for _, a := range os.Args[1:] {
			for _, f := range []string{"--session-id=", "--resume="} {
				if v, ok := strings.CutPrefix(a, f); ok {
					sc.SessionID = v
				}
			}
		}
	}
	resuming := false
	for _, a := range os.Args[1:] {
		resuming = resuming || strings.HasPrefix(a, "--resume=")
	}
	f := newFake(sc.SessionID)
	if sc.StopReading || sc.Flood > 0 {
		for i := 0; i < sc.Flood; i++ {
			f.print(map[string]any{"type": "control_request", "request_id": fmt.Sprintf("flood_%d", i),
				"request": map[string]any{"subtype": "bhw_test_flood"}})
		}
		fmt.Fprintln(os.Stderr, "fake claude: reading nothing more")
		agenttest.Tell(sc.Deaf)
		agenttest.Forever() // the pipe fills; only a signal ends it
	}
	go f.readStdin()
	for n := 0; ; n++ {
		select {
		case <-f.turns:
		case <-f.eof:
			return 0
		}
		if sc.ResumeFails && resuming {
			f.print(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "num_turns": 0,
				"errors": []string{"No conversation found with session ID: " + f.sid}, "session_id": f.sid})
			return 1
		}
		var steps []FakeStep
		if n < len(sc.Turns) {
			steps = sc.Turns[n]
		} else {
			steps = []FakeStep{{Text: "no more script"}}
		}
		if code, exit := f.playTurn(steps); exit {
			return code
		}
	}
}

type fake struct {
	sid       string
	wmu       sync.Mutex
	out       *bufio.Writer
	turns     chan struct{}
	eof       chan struct{}
	interrupt chan string
	mu        sync.Mutex
	responses map[string]chan map[string]any
	seq       int
}

func newFake(sid string) *fake {
	return &fake{sid: sid, out: bufio.NewWriterSize(os.Stdout, 1<<20),
		turns: make(chan struct{}, 16), eof: make(chan struct{}), interrupt: make(chan string, 4),
		responses: map[string]chan map[string]any{}}
}

func (f *fake) print(v any) {
	b, _ := json.Marshal(v)
	f.printRaw(b)
}

func (f *fake) printRaw(b []byte) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.out.Write(b)
	f.out.WriteByte('\n')
	f.out.Flush()
}

func (f *fake) waitFor(id string) chan map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan map[string]any, 1)
	f.responses[id] = c
	return c
}

func (f *fake) readStdin() {
	defer close(f.eof)
	br := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				f.dispatch(m)
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *fake) dispatch(m map[string]any) {
	switch m["type"] {
	case "user":
		f.turns <- struct{}{}
	case "control_response":
		resp, _ := m["response"].(map[string]any)
		id, _ := resp["request_id"].(string)
		f.mu.Lock()
		c := f.responses[id]
		delete(f.responses, id)
		f.mu.Unlock()
		if c != nil {
			c <- resp
		}
	case "control_request":
		id, _ := m["request_id"].(string)
		req, _ := m["request"].(map[string]any)
		if req["subtype"] == "interrupt" {
			f.print(map[string]any{"type": "control_response", "response": map[string]any{
				"subtype": "success", "request_id": id, "response": map[string]any{"still_queued": []any{}}}})
			f.interrupt <- id
			return
		}
		f.print(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "error", "request_id": id, "error": "fake: unsupported"}})
	}
}

func (f *fake) assistant(blocks ...map[string]any) {
	f.print(map[string]any{"type": "assistant", "message": map[string]any{
		"id": "msg_fake", "model": "fake", "role": "assistant", "type": "message", "content": blocks},
		"parent_tool_use_id": nil, "session_id": f.sid})
}

func (f *fake) toolResult(id, content string, isError bool) {
	f.print(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isError}}},
		"parent_tool_use_id": nil, "session_id": f.sid})
}

func (f *fake) result(isError bool, subtype, text string, turns int) {
	f.print(map[string]any{"type": "result", "subtype": subtype, "is_error": isError, "result": text,
		"num_turns": turns, "duration_ms": 12, "total_cost_usd": 0.001, "session_id": f.sid,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 1}})
}

func (f *fake) nextID() string {
	f.seq++
	return fmt.Sprintf("toolu_fakeagent_%d", f.seq)
}

// playTurn plays one turn; exit reports that the process must exit.
func (f *fake) playTurn(steps []FakeStep) (code int, exit bool) {
	f.print(map[string]any{"type": "system", "subtype": "init", "session_id": f.sid, "cwd": mustWd(),
		"tools": []string{"Bash", "Read", "Write"}, "model": "fake", "permissionMode": "default",
		"argv": os.Args[1:], "is_sandbox": os.Getenv("IS_SANDBOX")})
	turns := 1
	for _, st := range steps {
		switch {
		case st.Text != "":
			f.assistant(map[string]any{"type": "text", "text": st.Text})
		case st.Tool != nil:
			id := f.nextID()
			f.assistant(map[string]any{"type": "tool_use", "id": id, "name": st.Tool.Name, "input": st.Tool.Input})
			if st.Tool.Block != "" {
				if err := readLine(st.Tool.Block); err != nil {
					fmt.Fprintln(os.Stderr, "fake claude: block:", err)
					return 2, true
				}
			}
			f.toolResult(id, cmp.Or(st.Tool.Result, "ok"), false)
			turns++
		case st.Permission != nil || len(st.Ask) > 0:
			t := st.Permission
			if t == nil {
				var in map[string]any
				_ = json.Unmarshal(st.Ask, &in)
				if _, ok := in["questions"]; !ok {
					in = map[string]any{"questions": json.RawMessage(st.Ask)}
				}
				t = &FakeTool{Name: "AskUserQuestion", Input: in}
			}
			id := f.nextID()
			f.assistant(map[string]any{"type": "tool_use", "id": id, "name": t.Name, "input": t.Input})
			f.seq++
			reqID := fmt.Sprintf("req_fakeagent_%d", f.seq)
			c := f.waitFor(reqID)
			req := map[string]any{"subtype": "can_use_tool", "tool_name": t.Name, "display_name": t.Name,
				"input": t.Input, "tool_use_id": id,
				"permission_suggestions": []any{map[string]any{"type": "addRules", "destination": "localSettings"}}}
			if len(st.Ask) > 0 {
				req["requires_user_interaction"] = true
				delete(req, "permission_suggestions")
			}
			f.print(map[string]any{"type": "control_request", "request_id": reqID, "request": req})
			var resp map[string]any
			select {
			case resp = <-c:
			case <-f.interrupt:
				f.print(map[string]any{"type": "control_cancel_request", "request_id": reqID})
				f.interrupted(turns)
				return 0, false
			case <-f.eof:
				f.toolResult(id, "Tool permission request failed: AbortError: Stream closed", true)
				f.result(false, "success", "stream closed", turns)
				return 0, true
			}
			turns++
			inner, _ := resp["response"].(map[string]any)
			switch {
			case resp["subtype"] != "success":
				f.toolResult(id, fmt.Sprintf("Tool permission request failed: Error: %v", resp["error"]), true)
			case inner["behavior"] == "allow":
				b, _ := json.Marshal(inner["updatedInput"])
				f.toolResult(id, cmp.Or(t.Result, "ran with "+string(b)), false)
			case inner["interrupt"] == true:
				f.toolResult(id, "The user doesn't want to proceed with this tool use. STOP what you are doing and wait for the user to tell you how to proceed.", true)
				f.print(map[string]any{"type": "user", "message": map[string]any{"role": "user",
					"content": []any{map[string]any{"type": "text", "text": "[Request interrupted by user for tool use]"}}}})
				f.result(true, "error_during_execution", "", turns)
				return 0, false
			default:
				msg, _ := inner["message"].(string)
				f.toolResult(id, msg, true)
			}
		case st.Crash != 0:
			if st.Stderr != "" {
				fmt.Fprintln(os.Stderr, st.Stderr)
			}
			return st.Crash, true
		case st.Garbage != "":
			f.printRaw([]byte(st.Garbage))
		case st.BigLine > 0:
			f.printBig(`{"type":"assistant","message":{"content":[{"type":"text","text":"`, `"}]}}`, st.BigLine)
		case st.BigRequest > 0:
			c := f.waitFor("big_req_1")
			f.printBig(`{"type":"control_request","request_id":"big_req_1","request":{"subtype":"can_use_tool","tool_name":"Write","tool_use_id":"toolu_big","input":{"file_path":"/big","content":"`,
				`"}}}`, st.BigRequest)
			var resp map[string]any
			select {
			case resp = <-c:
			case <-f.eof:
				return 0, true
			}
			inner, _ := resp["response"].(map[string]any)
			f.assistant(map[string]any{"type": "text", "text": fmt.Sprintf("big request answered: %v: %v", inner["behavior"], inner["message"])})
		case st.RawRequest != "":
			c := f.waitFor("raw_req_1")
			f.printRaw([]byte(st.RawRequest))
			var resp map[string]any
			select {
			case resp = <-c:
			case <-f.interrupt:
				f.interrupted(turns)
				return 0, false
			case <-f.eof:
				return 0, true
			}
			inner, _ := resp["response"].(map[string]any)
			f.assistant(map[string]any{"type": "text", "text": fmt.Sprintf("raw request answered: %v %v", resp["subtype"], inner["behavior"])})
		case st.Hang:
			agenttest.Forever()
		case st.Grandchild:
			pid, err := agenttest.StartGrandchild()
			if err != nil {
				fmt.Fprintln(os.Stderr, "fake claude: grandchild:", err)
				return 2, true
			}
			f.assistant(map[string]any{"type": "text", "text": fmt.Sprintf("grandchild %d", pid)})
		case st.WaitInterrupt:
			select {
			case <-f.interrupt:
			case <-f.eof:
				return 0, true
			}
			f.interrupted(turns)
			return 0, false
		case st.Fail != "":
			f.result(true, "success", st.Fail, turns)
			return 0, false
		}
	}
	f.result(false, "success", "done", turns)
	return 0, false
}

func (f *fake) interrupted(turns int) {
	f.print(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "text", "text": "[Request interrupted by user]"}}}})
	f.result(true, "error_during_execution", "", turns)
}

func (f *fake) printBig(prefix, suffix string, n int) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.out.WriteString(prefix)
	chunk := strings.Repeat("x", 1<<20)
	for left := n - len(prefix) - len(suffix); left > 0; left -= len(chunk) {
		f.out.WriteString(chunk[:min(left, len(chunk))])
	}
	f.out.WriteString(suffix)
	f.out.WriteByte('\n')
	f.out.Flush()
}

// readLine blocks until a line can be read from path (a named pipe opens
// for reading only once a writer opens it).
func readLine(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = bufio.NewReader(f).ReadString('\n')
	return err
}

func mustWd() string {
	wd, _ := os.Getwd()
	return wd
}
