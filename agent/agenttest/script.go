package agenttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/policy"
)

// Script is what a fake agent plays, in the terms of no agent in
// particular: each adapter's fake (Claude's, Codex's, and this package's
// own) plays the same script in its own protocol. A new process starts at
// the first turn.
type Script struct {
	// SessionID is the id the agent reports for a new session (default:
	// the host's, or one of its own).
	SessionID string `json:"session_id,omitempty"`
	// ResumeFails: a resume finds no such session.
	ResumeFails bool `json:"resume_fails,omitempty"`
	// IgnoreSIGTERM: only SIGKILL ends the agent.
	IgnoreSIGTERM bool `json:"ignore_sigterm,omitempty"`
	// StartupError is printed on stderr before exiting 1, before the agent
	// is ready (bad flags, a refused start).
	StartupError string `json:"startup_error,omitempty"`
	// StopReading: once its session is open the agent reads nothing more
	// of its stdin, and keeps running: a prompt larger than the pipe holds
	// stays stuck in it.
	StopReading bool `json:"stop_reading,omitempty"`
	// Flood: once its session is open the agent sends this many requests
	// (of a method nobody knows) without reading their answers, then reads
	// nothing more, as StopReading.
	Flood int `json:"flood,omitempty"`
	// Deaf, with StopReading or Flood, is a named pipe the agent writes a
	// line to once it reads nothing more: a test opening it for reading
	// wakes then, without polling.
	Deaf string `json:"deaf,omitempty"`
	// Sent is a named pipe the agent writes a line to once a Flood or an
	// AfterEnd step has sent all it sends (Tell), so a test can hold the
	// turn until then.
	Sent string `json:"sent,omitempty"`
	// Turns are the steps of each user turn, in order; a turn without a
	// terminal step ends normally. Turns past the last one say "no more
	// script".
	Turns [][]Step `json:"turns"`
}

// Step is one step of a turn; set one field (Stderr goes with Crash).
type Step struct {
	Text     string `json:"text,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	// Tool runs a call without asking: its tool_call, then its result.
	Tool *Tool `json:"tool,omitempty"`
	// Call asks the gate first: allowed, it runs; denied, its result is an
	// error carrying the message and the turn goes on; parked, it does not
	// run and the turn ends.
	Call *Tool `json:"call,omitempty"`
	// Ask is the agent's own question to a person (it always parks).
	Ask []policy.Question `json:"ask,omitempty"`
	// Status is a status item with this token.
	Status string `json:"status,omitempty"`
	// Crash exits with this status mid-turn, after printing Stderr.
	Crash  int    `json:"crash,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Hang never answers again: it ignores stdin and keeps running.
	Hang bool `json:"hang,omitempty"`
	// WaitInterrupt blocks until the host interrupts the turn, which then
	// ends interrupted.
	WaitInterrupt bool `json:"wait_interrupt,omitempty"`
	// Fail ends the turn as an error turn with this text.
	Fail string `json:"fail,omitempty"`
	// Grandchild starts `sleep 300` in its own session holding a copy of
	// stdout (as a leaked tool child would) and says "grandchild <pid>".
	Grandchild bool `json:"grandchild,omitempty"`
	// Garbage prints this line as it is.
	Garbage string `json:"garbage,omitempty"`
	// BigLine prints a text message of this many bytes.
	BigLine int `json:"big_line,omitempty"`
	// BigRequest asks the gate with a request of this many bytes and says
	// how it was answered: "big request answered: <action>: <message>".
	BigRequest int `json:"big_request,omitempty"`
	// Stream (the ACP fake) streams a text message of this many bytes in
	// chunks of 64 KiB, the first starting "BEGIN", the last ending "END".
	Stream int `json:"stream,omitempty"`
	// AfterEnd (the JSON-RPC fakes: the test agent's, Codex's, ACP's) ends
	// the turn here, as completed, then goes on as if it had not: a text
	// "said after the end" and a permission request for a write of
	// /after-the-end, then, without waiting for its answer, two updates
	// more (ACP's last a plan whose _meta.last is "after the end"); it
	// tells Script.Sent, and reports on stderr how the request was
	// answered: "fake agent: the request after the end was allowed" (or
	// "… refused").
	AfterEnd bool `json:"after_end,omitempty"`
	// Flood (the JSON-RPC fakes) sends this many short text messages
	// ("flood <n>") at once, without waiting for the host, then tells
	// Script.Sent.
	Flood int `json:"flood,omitempty"`
}

// Tool is a call of a script, described by what it does; each fake names
// and shapes it as its agent would (a write is Claude's Write, Codex's file
// change).
type Tool struct {
	// Name and Input, when set, are used as they are; else the fake makes
	// them up from Effect and Target.
	Name   string         `json:"name,omitempty"`
	Input  map[string]any `json:"input,omitempty"`
	Effect string         `json:"effect"` // read, write, exec, network
	Target policy.Target  `json:"target"`
	// Result is what the call prints when it runs (default "ran").
	Result string `json:"result,omitempty"`
	// Running: the call never finishes (a long build, a hung command): the
	// test agent's fake announces it and then waits for the host's
	// interrupt, which ends the turn interrupted with no result. The other
	// agents' fakes ignore it.
	Running bool `json:"running,omitempty"`
}

// Write is a call that writes path.
func Write(path string) *Tool {
	return &Tool{Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{path}}}
}

// Exec is a call that runs command.
func Exec(command string) *Tool {
	return &Tool{Effect: policy.EffectExec, Target: policy.Target{Command: command}}
}

// Read is a call that reads path.
func Read(path string) *Tool {
	return &Tool{Effect: policy.EffectRead, Target: policy.Target{Paths: []string{path}}}
}

// Turn is a script of one turn.
func Turn(steps ...Step) Script { return Script{Turns: [][]Step{steps}} }

// WriteScript writes s as JSON to a file of t's and returns its path.
func WriteScript(t testing.TB, s Script) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	Play(t, p, s)
	return p
}

// Executable is the test binary itself, which plays a fake agent when its
// TestMain is told to by the environment.
func Executable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// Play (re)writes the script at path: the next agent started plays it.
func Play(t testing.TB, path string, s Script) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ReadScript reads a script written by WriteScript.
func ReadScript(path string) (Script, error) {
	var s Script
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
