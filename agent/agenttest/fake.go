package agenttest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/blobhub/bhw-run/agent/jsonrpc"
)

// ScriptEnv selects the fake agent in a re-executed test binary; its value
// is the path of a Script (WriteScript).
const ScriptEnv = "AGENTTEST_SCRIPT"

// MaybeRunFake plays the fake agent and exits when ScriptEnv is set;
// otherwise it returns at once. Call it first thing in TestMain.
func MaybeRunFake() {
	RunIfSet(ScriptEnv, fakeMain)
}

// The test agent's protocol, JSON-RPC 2.0 over stdio:
//
//	host → agent  request      initialize {session_id, resume}  → {session_id, env}
//	host → agent  request      prompt {message}                 → {outcome, error_text, usage}
//	host → agent  notification cancel
//	agent → host  notification update {kind, …}
//	agent → host  request      permission {id, tool, effect, input, target, kind, questions} → {action, message}
//
// outcome is end, failed or interrupted; an update's kind is text,
// thinking, tool_call, tool_result or status; action is allow, deny or park.
const (
	codeNoSession = -32001 // initialize: no such session to resume
)

type fake struct {
	*FakeServer
	sid       string
	interrupt chan struct{}
}

func fakeMain(path string) int {
	f := &fake{interrupt: make(chan struct{}, 4)}
	return ServeFake(path, true, func(fs *FakeServer) jsonrpc.Options {
		f.FakeServer = fs
		return jsonrpc.Options{OnRequest: f.request, OnNotification: func(m jsonrpc.Message) {
			if m.Method == "cancel" {
				f.interrupt <- struct{}{}
			}
		}}
	})
}

func (f *fake) request(m jsonrpc.Message) {
	switch m.Method {
	case "initialize":
		var p struct {
			SessionID string `json:"session_id"`
			Resume    bool   `json:"resume"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Resume && f.Script.ResumeFails {
			_ = f.Conn.ReplyError(m.ID, codeNoSession, "no such session: "+p.SessionID)
			return
		}
		f.sid = p.SessionID
		if f.sid == "" {
			f.sid = f.Script.SessionID
		}
		if f.sid == "" {
			var b [8]byte
			_, _ = rand.Read(b[:])
			f.sid = "agt_" + hex.EncodeToString(b[:])
		}
		env := map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, _ := strings.Cut(kv, "="); k == "HOME" || strings.HasPrefix(k, "AGENTTEST_") {
				env[k] = v
			}
		}
		cwd, _ := os.Getwd()
		_ = f.Conn.Reply(m.ID, map[string]any{"session_id": f.sid, "env": env, "cwd": cwd, "argv": os.Args[1:]})
		f.Opened()
	case "prompt":
		steps, _ := f.NextTurn()
		// Played on its own goroutine: the reader must go on reading the
		// host's answers to the agent's requests.
		go f.play(m.ID, steps)
	default:
		_ = f.Conn.ReplyError(m.ID, jsonrpc.CodeMethodNotFound, "fake agent: no method "+m.Method)
	}
}

func (f *fake) update(kind string, fields map[string]any) {
	fields["kind"] = kind
	_ = f.Conn.Notify("update", fields)
}

// play plays one turn's steps and answers the prompt.
func (f *fake) play(prompt jsonrpc.ID, steps []Step) {
	outcome := map[string]any{"outcome": "end", "usage": map[string]any{"input_tokens": 10, "input_tokens_cached": 4, "output_tokens": 3}}
	defer f.ReplyAtEnd(prompt, &outcome)
	for _, st := range steps {
		switch {
		case st.Text != "":
			f.update("text", map[string]any{"text": st.Text})
		case st.Thinking != "":
			f.update("thinking", map[string]any{"text": st.Thinking})
		case st.Status != "":
			f.update("status", map[string]any{"token": st.Status, "text": "status " + st.Status})
		case st.Tool != nil:
			id := f.NextID("call")
			f.update("tool_call", map[string]any{"id": id, "tool": toolName(st.Tool), "input": toolInput(st.Tool)})
			if st.Tool.Running {
				<-f.interrupt
				outcome["outcome"] = "interrupted"
				return
			}
			f.update("tool_result", map[string]any{"id": id, "output": cmp.Or(st.Tool.Result, "ran")})
		case st.Call != nil || len(st.Ask) > 0:
			if !f.ask(st) {
				outcome["outcome"] = "interrupted"
				return
			}
		case st.WaitInterrupt:
			<-f.interrupt
			outcome["outcome"] = "interrupted"
			return
		case st.Fail != "":
			outcome["outcome"], outcome["error_text"] = "failed", st.Fail
			return
		case st.Grandchild:
			f.update("text", map[string]any{"text": fmt.Sprintf("grandchild %d", f.Grandchild())})
		case st.BigLine > 0:
			f.update("text", map[string]any{"text": strings.Repeat("x", st.BigLine)})
		case st.AfterEnd:
			_ = f.Conn.Reply(prompt, outcome)
			outcome = nil
			f.update("text", map[string]any{"text": "said after the end"})
			tool := Write("/after-the-end")
			_, ch, err := f.Conn.Go("permission", map[string]any{"id": f.NextID("call"), "kind": "approval", "tool": toolName(tool),
				"input": toolInput(tool), "effect": tool.Effect, "target": tool.Target})
			f.update("text", map[string]any{"text": " and more"})
			f.update("status", map[string]any{"token": "late", "text": "after the end"})
			f.AfterEndAnswer(ch, err, "action", "allow")
			return
		case st.Flood > 0:
			for i := 0; i < st.Flood; i++ {
				f.update("text", map[string]any{"text": fmt.Sprintf("flood %d", i)})
			}
			Tell(f.Script.Sent)
		case st.BigRequest > 0:
			res, err := f.Conn.Call(context.Background(), "permission", map[string]any{"id": "call_big", "tool": "write_file", "effect": "write",
				"input": map[string]any{"path": "/big", "content": strings.Repeat("x", st.BigRequest)}})
			var a struct{ Action, Message string }
			_ = json.Unmarshal(res, &a)
			if err != nil {
				a.Action, a.Message = "error", err.Error()
			}
			f.update("text", map[string]any{"text": fmt.Sprintf("big request answered: %s: %s", a.Action, a.Message)})
		default:
			f.PlayAlike(st)
		}
	}
}

// ask puts a call (or a question) to the gate and plays the answer; false
// when the turn ends there (parked, interrupted).
func (f *fake) ask(st Step) bool {
	id := f.NextID("call")
	params := map[string]any{"id": id, "kind": "approval"}
	tool := st.Call
	if tool == nil {
		tool = &Tool{Name: "ask_user", Input: map[string]any{"questions": st.Ask}}
		params["kind"], params["questions"] = "ask_user_question", st.Ask
	}
	params["tool"], params["input"], params["effect"], params["target"] = toolName(tool), toolInput(tool), tool.Effect, tool.Target
	f.update("tool_call", map[string]any{"id": id, "tool": toolName(tool), "input": toolInput(tool)})
	type answer struct {
		res json.RawMessage
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := f.Conn.Call(context.Background(), "permission", params)
		got <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-f.interrupt:
		f.update("tool_result", map[string]any{"id": id, "output": "interrupted", "is_error": true})
		return false
	}
	var v struct{ Action, Message string }
	if a.err != nil || json.Unmarshal(a.res, &v) != nil {
		v.Action, v.Message = "deny", fmt.Sprint(a.err)
	}
	switch v.Action {
	case "allow":
		f.update("tool_result", map[string]any{"id": id, "output": cmp.Or(tool.Result, "ran")})
		return true
	case "park":
		f.update("tool_result", map[string]any{"id": id, "output": "not run: waiting for a person", "is_error": true})
		return false
	default:
		f.update("tool_result", map[string]any{"id": id, "output": cmp.Or(v.Message, "denied"), "is_error": true})
		return true
	}
}

// toolName is the test agent's name for a call: shell, read_file,
// write_file or fetch, unless the script names it.
func toolName(t *Tool) string {
	if t.Name != "" {
		return t.Name
	}
	return map[string]string{"exec": "shell", "read": "read_file", "write": "write_file", "network": "fetch"}[t.Effect]
}

func toolInput(t *Tool) map[string]any {
	if t.Input != nil {
		return t.Input
	}
	switch {
	case t.Target.Command != "":
		return map[string]any{"command": t.Target.Command}
	case len(t.Target.Paths) > 0:
		return map[string]any{"path": t.Target.Paths[0]}
	case t.Target.URL != "":
		return map[string]any{"url": t.Target.URL}
	}
	return map[string]any{}
}
