package codextest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// FakeEnv selects the fake app-server in a re-executed test binary; its
// value is the path of an agenttest.Script.
const FakeEnv = "BHW_FAKE_CODEX_SCRIPT"

// MaybeRunFakeAppServer plays a fake `codex app-server` and exits when
// FakeEnv is set; otherwise it returns at once. Call it first thing in
// TestMain.
//
// The fake speaks the part of the v2 app-server protocol the adapter uses
// (initialize, thread/start, thread/resume, turn/start, turn/interrupt;
// item/started, item/completed, turn/started, turn/completed; command and
// file-change approvals), with the real server's habits: no "jsonrpc"
// field, its own requests numbered from 0. It plays the cases the real CLI
// cannot be made to show on demand: a crash mid-turn, a hang, an over-long
// request.
func MaybeRunFakeAppServer() {
	agenttest.RunIfSet(FakeEnv, fakeMain)
}

type fakeServer struct {
	*agenttest.FakeServer
	thread    string
	interrupt chan jsonrpc.ID
}

func fakeMain(path string) int {
	f := &fakeServer{interrupt: make(chan jsonrpc.ID, 4)}
	// No "jsonrpc" field, as the real server.
	return agenttest.ServeFake(path, false, func(fs *agenttest.FakeServer) jsonrpc.Options {
		f.FakeServer = fs
		return jsonrpc.Options{OnRequest: f.request}
	})
}

func (f *fakeServer) notify(method string, params map[string]any) { _ = f.Conn.Notify(method, params) }

func (f *fakeServer) request(m jsonrpc.Message) {
	var p struct {
		ThreadID string `json:"threadId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		_ = f.Conn.Reply(m.ID, map[string]any{"userAgent": "fake-codex"})
	case "thread/start":
		f.thread = cmp.Or(f.Script.SessionID, "019a0000-fake-7000-8000-000000000001")
		_ = f.Conn.Reply(m.ID, map[string]any{"thread": map[string]any{"id": f.thread}})
		f.Opened()
	case "thread/resume":
		if f.Script.ResumeFails {
			_ = f.Conn.ReplyError(m.ID, -32600, "no rollout found for thread id "+p.ThreadID)
			return
		}
		f.thread = p.ThreadID
		_ = f.Conn.Reply(m.ID, map[string]any{"thread": map[string]any{"id": f.thread}})
		f.Opened()
	case "turn/start":
		steps, n := f.NextTurn()
		id := fmt.Sprintf("turn_%d", n)
		_ = f.Conn.Reply(m.ID, map[string]any{"turn": map[string]any{"id": id, "status": "inProgress"}})
		f.notify("turn/started", map[string]any{"threadId": f.thread, "turn": map[string]any{"id": id, "status": "inProgress"}})
		go f.play(id, steps)
	case "turn/interrupt":
		f.interrupt <- m.ID
	default:
		_ = f.Conn.ReplyError(m.ID, jsonrpc.CodeMethodNotFound, "fake codex: no method "+m.Method)
	}
}

func (f *fakeServer) completed(turn, status, message string) {
	t := map[string]any{"id": turn, "status": status, "error": nil}
	if message != "" {
		t["error"] = map[string]any{"message": message}
	}
	f.notify("turn/completed", map[string]any{"threadId": f.thread, "turn": t})
}

func (f *fakeServer) item(method string, item map[string]any, turn string) {
	f.notify(method, map[string]any{"threadId": f.thread, "turnId": turn, "item": item})
}

// play plays one turn's steps and completes it.
func (f *fakeServer) play(turn string, steps []agenttest.Step) {
	for _, st := range steps {
		id := f.NextID("item")
		switch {
		case st.Text != "":
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id, "text": st.Text}, turn)
		case st.Thinking != "":
			f.item("item/completed", map[string]any{"type": "reasoning", "id": id, "summary": []string{st.Thinking}}, turn)
		case st.Tool != nil:
			it := f.toolItem(id, st.Tool)
			f.item("item/started", it, turn)
			it["status"], it["aggregatedOutput"], it["exitCode"] = "completed", cmp.Or(st.Tool.Result, "ran"), 0
			f.item("item/completed", it, turn)
		case st.Call != nil:
			if !f.approve(turn, id, st.Call) {
				return
			}
		case st.WaitInterrupt:
			_ = f.Conn.Reply(<-f.interrupt, map[string]any{})
			f.completed(turn, "interrupted", "")
			return
		case st.Fail != "":
			f.completed(turn, "failed", st.Fail)
			return
		case st.Grandchild:
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id, "text": fmt.Sprintf("grandchild %d", f.Grandchild())}, turn)
		case st.AfterEnd:
			f.completed(turn, "completed", "")
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id, "text": "said after the end"}, turn)
			it := f.toolItem(id+"_write", agenttest.Write("/after-the-end"))
			f.item("item/started", it, turn)
			_, ch, err := f.Conn.Go("item/fileChange/requestApproval", map[string]any{"threadId": f.thread, "turnId": turn,
				"itemId": it["id"], "grantRoot": nil})
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id + "_more", "text": " and more"}, turn)
			f.item("item/completed", map[string]any{"type": "reasoning", "id": id + "_last", "summary": []string{"after the end"}}, turn)
			f.AfterEndAnswer(ch, err, "decision", "accept")
			return
		case st.Flood > 0:
			for i := 0; i < st.Flood; i++ {
				f.item("item/completed", map[string]any{"type": "agentMessage", "id": fmt.Sprintf("%s_%d", id, i), "text": fmt.Sprintf("flood %d", i)}, turn)
			}
			agenttest.Tell(f.Script.Sent)
		case st.BigLine > 0:
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id, "text": strings.Repeat("x", st.BigLine)}, turn)
		case st.BigRequest > 0:
			// An approval far over the limit, then a request the adapter does
			// not know: both must be answered.
			res, err := f.Conn.Call(context.Background(), "item/commandExecution/requestApproval", map[string]any{
				"threadId": f.thread, "turnId": turn, "itemId": id, "command": strings.Repeat("x", st.BigRequest)})
			var a struct{ Decision string }
			_ = json.Unmarshal(res, &a)
			_, uerr := f.Conn.Call(context.Background(), "item/tool/requestUserInput", map[string]any{"threadId": f.thread})
			f.item("item/completed", map[string]any{"type": "agentMessage", "id": id + "_text",
				"text": fmt.Sprintf("big request answered: %s (%v); unknown request answered: %v", a.Decision, err, uerr)}, turn)
		default:
			f.PlayAlike(st)
		}
	}
	f.completed(turn, "completed", "")
}

// toolItem is the item of a call: a command, or a file change.
func (f *fakeServer) toolItem(id string, t *agenttest.Tool) map[string]any {
	cwd, _ := os.Getwd()
	if t.Effect == policy.EffectWrite && len(t.Target.Paths) > 0 {
		return map[string]any{"type": "fileChange", "id": id, "status": "inProgress",
			"changes": []any{map[string]any{"path": t.Target.Paths[0], "kind": map[string]any{"type": "add"}, "diff": "written by the fake\n"}}}
	}
	cmd := t.Target.Command
	if cmd == "" {
		cmd = "true"
	}
	return map[string]any{"type": "commandExecution", "id": id, "status": "inProgress", "cwd": cwd,
		"command": "/bin/bash -lc '" + cmd + "'", "commandActions": []any{}}
}

// approve asks for a call as codex does and plays the decision; false when
// the turn ended there (cancel: the turn is interrupted).
func (f *fakeServer) approve(turn, id string, t *agenttest.Tool) bool {
	it := f.toolItem(id, t)
	f.item("item/started", it, turn)
	method, params := "item/commandExecution/requestApproval", map[string]any{"threadId": f.thread, "turnId": turn, "itemId": id,
		"command": it["command"], "cwd": it["cwd"]}
	if it["type"] == "fileChange" {
		method, params = "item/fileChange/requestApproval", map[string]any{"threadId": f.thread, "turnId": turn, "itemId": id, "grantRoot": nil}
	}
	type answer struct {
		res json.RawMessage
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := f.Conn.Call(context.Background(), method, params)
		got <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-got:
	case iid := <-f.interrupt:
		_ = f.Conn.Reply(iid, map[string]any{})
		f.completed(turn, "interrupted", "")
		return false
	}
	var d struct{ Decision string }
	_ = json.Unmarshal(a.res, &d)
	switch d.Decision {
	case "accept":
		it["status"], it["aggregatedOutput"], it["exitCode"] = "completed", cmp.Or(t.Result, "ran"), 0
		f.item("item/completed", it, turn)
		return true
	case "cancel":
		// A cancelled file change gets no item/completed; the turn ends.
		f.completed(turn, "interrupted", "")
		return false
	default:
		it["status"] = "declined"
		f.item("item/completed", it, turn)
		return true
	}
}
