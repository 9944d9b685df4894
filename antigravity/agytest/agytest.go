// Package agytest is a stand-in for Google's agy CLI, which no test
// machine here can install: the test binary re-executed plays an
// agenttest.Script as agy does what blobhub-worker 0.11.0's adapter shows
// of it. It takes the worker's argv (-p <message> … --add-dir <folder>
// [--model M | --effort E] [--conversation <id>]), prints the NDJSON stream
// (init with the conversation id, step_update with a reply's text in
// deltas and each tool step ACTIVE then DONE or ERROR, result), runs the
// PreToolUse hooks of <folder>/.agents/hooks.json before every call and
// honours their decision (a hook that fails or prints no decision denies
// the call), ends INTERRUPTED on SIGINT, and keeps its conversations in a
// folder beside its script so --conversation resumes one it began.
// Imported by tests only.
package agytest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// ScriptEnv selects the stand-in in a re-executed test binary; its value is
// the path of an agenttest.Script.
const ScriptEnv = "ANTIGRAVITY_AGYTEST_SCRIPT"

// NoHooksEnv set to 1 makes the stand-in an agy that does not find the
// workspace's hooks (the hook config was not discovered): its calls run
// ungated.
const NoHooksEnv = "ANTIGRAVITY_AGYTEST_NO_HOOKS"

// HookFirstEnv set to 1 makes the stand-in run a call's hooks before it
// prints the call's ACTIVE step, not after.
const HookFirstEnv = "ANTIGRAVITY_AGYTEST_HOOK_FIRST"

// Version is what the stand-in prints for --version.
const Version = "agy 1.0.0 (bhw-run stand-in)"

// Command writes s and returns the command that plays it and the
// environment to run it with: the test binary itself, whose TestMain must
// call MaybeRun (and antigravity's hook dispatch).
func Command(t testing.TB, s agenttest.Script) (exe string, env []string, script string) {
	t.Helper()
	script = agenttest.WriteScript(t, s)
	return agenttest.Executable(t), []string{ScriptEnv + "=" + script}, script
}

// MaybeRun plays the stand-in and exits when ScriptEnv is set; otherwise it
// returns at once. Call it first thing in TestMain.
func MaybeRun() {
	agenttest.RunIfSet(ScriptEnv, func(p string) int { return Main(p, os.Args[1:]) })
}

// ConversationsEnv names the folder the stand-in keeps its conversations
// in (default: ~/.gemini/antigravity/conversations, writable to agy under
// confinement); its prefix passes the agent's allowlist.
const ConversationsEnv = "ANTIGRAVITY_AGYTEST_CONVERSATIONS"

// nextTurn counts the processes that played the script: each plays the
// next turn of it, as each agy process runs one turn.
func nextTurn(convs, script string) int {
	sum := sha256.Sum256([]byte(script))
	p := filepath.Join(convs, "turns-"+hex.EncodeToString(sum[:8]))
	b, _ := os.ReadFile(p)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	_ = os.WriteFile(p, []byte(strconv.Itoa(n+1)), 0o600)
	return n
}

type stand struct {
	sc        agenttest.Script
	workspace string
	cid       string
	step      int
	interrupt chan os.Signal
	last      string // the last reply
}

// Main plays the script at path with argv args; it returns the exit status.
func Main(path string, args []string) int {
	sc, code, ok := agenttest.StandIn[agenttest.Script]("agy", Version, path, args)
	if !ok {
		return code
	}
	flags, err := parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agy: "+err.Error())
		return 2
	}
	s := &stand{sc: sc, workspace: flags["--add-dir"], interrupt: make(chan os.Signal, 1)}
	signal.Notify(s.interrupt, syscall.SIGINT)
	convs := os.Getenv(ConversationsEnv)
	if convs == "" {
		convs = filepath.Join(os.Getenv("HOME"), ".gemini", "antigravity", "conversations")
	}
	if err := os.MkdirAll(convs, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "agy: "+err.Error())
		return 2
	}
	if id := flags["--conversation"]; id != "" {
		if _, err := os.Stat(filepath.Join(convs, id)); err != nil || sc.ResumeFails {
			s.print(map[string]any{"event": "result", "result": map[string]any{"status": "ERROR", "error": "conversation " + id + " not found"}})
			return 1
		}
		s.cid = id
	} else {
		s.cid = sc.SessionID
		if s.cid == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			s.cid = hex.EncodeToString(b[:])
		}
		_ = os.WriteFile(filepath.Join(convs, s.cid), nil, 0o600)
	}
	f, _ := os.OpenFile(filepath.Join(convs, s.cid), os.O_APPEND|os.O_WRONLY, 0o600)
	if f != nil {
		fmt.Fprintf(f, "%s\n", flags["-p"])
		f.Close()
	}
	if sc.StopReading || sc.Flood > 0 {
		for i := 0; i < sc.Flood; i++ {
			s.print(map[string]any{"event": "bhw_test_flood", "n": i})
		}
		fmt.Fprintln(os.Stderr, "agy: writing nothing more")
		agenttest.Tell(sc.Deaf)
		agenttest.Forever()
	}
	s.print(map[string]any{"event": "init", "conversation_id": s.cid, "init": map[string]any{
		"model": flags["--model"], "effort": flags["--effort"], "tools": []string{"run_command", "write_to_file", "view_file", "read_url_content"}}})
	n := nextTurn(convs, path)
	steps := []agenttest.Step{{Text: "no more script"}}
	if n < len(sc.Turns) {
		steps = sc.Turns[n]
	}
	status, errText := "SUCCESS", ""
play:
	for _, st := range steps {
		switch {
		case st.Text != "" || st.Thinking != "":
			s.reply(st.Text + st.Thinking)
		case st.Status != "":
			s.print(map[string]any{"event": "bhw_test_status", "status": st.Status})
		case st.Tool != nil:
			s.call(st.Tool)
		case st.Call != nil:
			s.call(st.Call)
		case len(st.Ask) > 0:
			s.call(&agenttest.Tool{Name: "ask_question", Input: map[string]any{"Question": st.Ask[0].Question}})
		case st.Crash != 0:
			if st.Stderr != "" {
				fmt.Fprintln(os.Stderr, st.Stderr)
			}
			return st.Crash
		case st.Hang:
			agenttest.Forever()
		case st.WaitInterrupt:
			<-s.interrupt
			status = "INTERRUPTED"
			break play
		case st.Fail != "":
			status, errText = "ERROR", st.Fail
			break play
		case st.Grandchild:
			pid, err := agenttest.StartGrandchild()
			if err != nil {
				fmt.Fprintln(os.Stderr, "agy: grandchild:", err)
				return 2
			}
			s.reply(fmt.Sprintf("grandchild %d", pid))
		case st.Garbage != "":
			fmt.Println(st.Garbage)
		case st.BigLine > 0:
			s.step++
			s.print(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": s.step, "step_type": "agent_response",
				"state": "DONE", "text_delta": strings.Repeat("x", st.BigLine)}})
		}
		select {
		case <-s.interrupt:
			status = "INTERRUPTED"
			break play
		default:
		}
	}
	s.print(map[string]any{"event": "result", "result": map[string]any{"status": status, "response": s.last, "error": errText,
		"conversation_id": s.cid, "denied_actions": []any{},
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 3, "cache_read_tokens": 4}}})
	return 0
}

func parse(args []string) (map[string]string, error) {
	withValue := map[string]bool{"-p": true, "--output-format": true, "--print-timeout": true, "--add-dir": true,
		"--model": true, "--effort": true, "--conversation": true}
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if withValue[a] {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a value", a)
			}
			out[a] = args[i+1]
			i++
			continue
		}
		out[a] = "true"
	}
	switch {
	case out["-p"] == "":
		return nil, fmt.Errorf("-p <prompt> is required headless")
	case out["--output-format"] != "stream-json":
		return nil, fmt.Errorf("--output-format must be stream-json here, got %q", out["--output-format"])
	case out["--model"] != "" && out["--effort"] != "":
		return nil, fmt.Errorf("--model and --effort cannot be used together")
	}
	return out, nil
}

func (s *stand) print(v any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

// reply streams text as agy does: deltas of a few bytes, the last DONE.
func (s *stand) reply(text string) {
	s.step++
	s.last = text
	for len(text) > 0 {
		n := min(len(text), 7)
		state := "ACTIVE"
		if n == len(text) {
			state = "DONE"
		}
		s.print(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": s.step, "step_type": "agent_response",
			"state": state, "text_delta": text[:n]}})
		text = text[n:]
	}
}

// call makes one tool call: ACTIVE, the hooks, then the call run (DONE) or
// refused (ERROR).
func (s *stand) call(t *agenttest.Tool) {
	s.step++
	name, args := agyTool(t)
	info := map[string]any{"name": name, "parameters": args}
	active := func() {
		s.print(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": s.step, "step_type": "tool",
			"state": "ACTIVE", "tool_name": name, "tool_info": info}})
	}
	hookFirst := os.Getenv(HookFirstEnv) == "1"
	if !hookFirst {
		active()
	}
	ok, reason := s.hooks(name, args)
	if hookFirst {
		active()
	}
	if !ok {
		info["error"] = map[string]any{"message": "Tool call denied by pre-tool hook: " + reason}
		s.print(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": s.step, "step_type": "tool",
			"state": "ERROR", "tool_name": name, "tool_info": info}})
		return
	}
	out, err := run(name, args, t.Result)
	state := "DONE"
	info["output"] = out
	if err != nil {
		state, info["error"] = "ERROR", map[string]any{"message": err.Error()}
	}
	s.print(map[string]any{"event": "step_update", "step_update": map[string]any{"step_index": s.step, "step_type": "tool",
		"state": state, "tool_name": name, "tool_info": info}})
}

// agyTool names a script's call as agy does, with its PascalCase arguments.
func agyTool(t *agenttest.Tool) (string, map[string]any) {
	if t.Name != "" {
		return t.Name, t.Input
	}
	path := ""
	if len(t.Target.Paths) > 0 {
		path = t.Target.Paths[0]
	}
	switch t.Effect {
	case policy.EffectExec:
		return "run_command", map[string]any{"CommandLine": t.Target.Command, "Cwd": t.Target.Cwd}
	case policy.EffectRead:
		return "view_file", map[string]any{"AbsolutePath": path}
	case policy.EffectNetwork:
		return "read_url_content", map[string]any{"Url": t.Target.URL}
	}
	return "write_to_file", map[string]any{"TargetFile": path, "CodeContent": "written by the stand-in agy\n"}
}

// run does the call: a write writes, a command runs (sh -c, 30 s at
// most), a read reads; anything else says it ran.
func run(name string, args map[string]any, result string) (string, error) {
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch name {
	case "write_to_file":
		if err := os.WriteFile(str("TargetFile"), []byte(str("CodeContent")), 0o644); err != nil {
			return "", err
		}
		return cmp(result, "wrote "+str("TargetFile")), nil
	case "run_command":
		cmd := exec.Command("sh", "-c", str("CommandLine"))
		cmd.Dir = str("Cwd")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return "", err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return out.String(), fmt.Errorf("%v: %s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return out.String(), fmt.Errorf("timed out")
		}
		return cmp(result, out.String()), nil
	case "view_file":
		b, err := os.ReadFile(str("AbsolutePath"))
		if err != nil {
			return "", err
		}
		return cmp(result, string(b)), nil
	}
	return cmp(result, "ran"), nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hooks runs every enabled PreToolUse hook of the workspace's
// .agents/hooks.json whose matcher takes the tool, through sh -c, the call
// on stdin; the first deny, or a hook that fails, refuses the call.
func (s *stand) hooks(name string, args map[string]any) (bool, string) {
	if s.workspace == "" || os.Getenv(NoHooksEnv) == "1" {
		return true, ""
	}
	b, err := os.ReadFile(filepath.Join(s.workspace, ".agents", "hooks.json"))
	if err != nil {
		return true, ""
	}
	var doc map[string]struct {
		Enabled    bool `json:"enabled"`
		PreToolUse []struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"PreToolUse"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return false, "hooks.json does not parse: " + err.Error()
	}
	in, _ := json.Marshal(map[string]any{"toolCall": map[string]any{"name": name, "args": args}})
	for _, e := range doc {
		if !e.Enabled {
			continue
		}
		for _, m := range e.PreToolUse {
			if m.Matcher != "" && m.Matcher != name {
				continue
			}
			for _, h := range m.Hooks {
				if h.Type != "command" {
					continue
				}
				if ok, reason := hook(h.Command, in, h.Timeout); !ok {
					return false, reason
				}
			}
		}
	}
	return true, ""
}

func hook(command string, in []byte, timeout int) (bool, string) {
	if timeout <= 0 {
		timeout = 60
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return false, "hook failed: " + err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return false, "hook failed: " + err.Error()
		}
	case <-time.After(time.Duration(timeout) * time.Second):
		_ = cmd.Process.Kill()
		return false, "hook timed out"
	}
	var v struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	if json.Unmarshal(bytes.TrimSpace(out.Bytes()), &v) != nil {
		return false, "hook printed no decision"
	}
	switch v.Decision {
	case "allow":
		return true, ""
	case "deny":
		return false, v.Reason
	}
	return false, "hook printed no decision"
}
