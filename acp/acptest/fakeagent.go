package acptest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// FakeAgentEnv selects the fake ACP agent in a re-executed test binary;
// its value is the path of an agenttest.Script. FakeDialectEnv names the
// agent whose habits it plays (gemini, qwen_code, opencode, copilot; any
// other value: a plain ACP agent).
const (
	FakeAgentEnv   = "BHW_FAKE_ACP_SCRIPT"
	FakeDialectEnv = "BHW_FAKE_ACP_DIALECT"
)

// Tool names a script's Call may take to play a habit of the real agents.
const (
	// AskTwice asks twice for one toolCallId, first as kind "other" for the
	// folder, then as the call's own kind (OpenCode and Copilot, for a
	// write outside the cwd).
	AskTwice = "ask_twice"
	// AskFirst sends the permission request before the call's tool_call
	// (OpenCode with a permission of "*").
	AskFirst = "ask_first"
	// Runs runs an exec call's command for real once the host allows it
	// (bash -c, in the agent's folder), its output the call's result; a
	// refused one does not run. Other exec calls only say they ran.
	Runs = "runs"
)

// MaybeRunFakeAgent plays the fake ACP agent and exits when FakeAgentEnv
// is set; otherwise it returns at once. Call it first thing in TestMain.
//
// FakeNoImagesEnv, set in the fake agent's environment, makes it
// advertise no promptCapabilities.image.
const FakeNoImagesEnv = "BHW_FAKE_ACP_NO_IMAGES"

// The fake speaks the part of ACP the adapter uses (initialize,
// session/new, session/load with a replay, session/prompt,
// session/request_permission, session/cancel, session/update), with the
// habits of the real agents: its own requests numbered from 0, a prompt's
// text in two chunks, the load's answer in the middle of its replay, an
// unknown request (craft/drainMidTurnQueue) and an fs/write_text_file
// after an allowed write. It plays what the real CLIs cannot be made to
// show on demand: a crash mid-turn, a hang, garbage and over-long lines.
func MaybeRunFakeAgent() {
	agenttest.RunIfSet(FakeAgentEnv, fakeAgentMain)
}

type fakeAgent struct {
	*agenttest.FakeServer
	dialect string
	sid     string

	mu        sync.Mutex
	cancelled bool
	cancel    chan struct{}
}

func fakeAgentMain(path string) int {
	f := &fakeAgent{dialect: os.Getenv(FakeDialectEnv), cancel: make(chan struct{}, 8)}
	return agenttest.ServeFake(path, true, func(fs *agenttest.FakeServer) jsonrpc.Options {
		f.FakeServer = fs
		return jsonrpc.Options{ZeroBased: true, OnRequest: f.request, OnNotification: func(m jsonrpc.Message) {
			if m.Method == "session/cancel" {
				f.mu.Lock()
				f.cancelled = true
				f.mu.Unlock()
				f.cancel <- struct{}{}
			}
		}}
	})
}

func (f *fakeAgent) update(u map[string]any) {
	_ = f.Conn.Notify("session/update", map[string]any{"sessionId": f.sid, "update": u})
}

func (f *fakeAgent) request(m jsonrpc.Message) {
	var p struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			// Its environment without the keys, which a test can then look
			// for elsewhere.
			if strings.Contains(k, "KEY") || strings.Contains(k, "TOKEN") || strings.Contains(k, "PASSWORD") {
				v = "(set)"
			}
			env[k] = v
		}
		_ = f.Conn.Reply(m.ID, map[string]any{"protocolVersion": 1,
			"agentInfo": map[string]any{"name": "fake-acp", "version": "1"},
			"agentCapabilities": map[string]any{"loadSession": true,
				"promptCapabilities": map[string]any{"image": os.Getenv(FakeNoImagesEnv) == ""}},
			"_meta": map[string]any{"env": env, "argv": os.Args[1:], "params": json.RawMessage(m.Params)}})
	case "session/new":
		f.sid = f.Script.SessionID
		if f.sid == "" {
			var b [8]byte
			_, _ = rand.Read(b[:])
			f.sid = "fake-" + hex.EncodeToString(b[:])
		}
		_ = f.Conn.Reply(m.ID, map[string]any{"sessionId": f.sid})
		f.update(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
		f.Opened()
	case "session/load":
		if f.Script.ResumeFails {
			f.noSession(m.ID, p.SessionID)
			return
		}
		f.sid = p.SessionID
		// A replay that the answer interleaves, as Gemini CLI's does.
		f.update(map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": "the first message"}})
		f.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": "REPLAYED TEXT"}})
		_ = f.Conn.Reply(m.ID, map[string]any{})
		f.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "replayed_call", "kind": "edit", "title": "replayed",
			"status": "failed", "content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "replayed"}}}})
		f.update(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
		f.Opened()
	case "session/prompt":
		steps, _ := f.NextTurn()
		// Images in the prompt are said first, so a test sees they came.
		var pr struct {
			Prompt []struct {
				Type     string `json:"type"`
				MimeType string `json:"mimeType"`
				Data     string `json:"data"`
			} `json:"prompt"`
		}
		_ = json.Unmarshal(m.Params, &pr)
		var seen []string
		for _, b := range pr.Prompt {
			if b.Type == "image" {
				seen = append(seen, fmt.Sprintf("%s %d", b.MimeType, len(b.Data)))
			}
		}
		if len(seen) > 0 {
			steps = append([]agenttest.Step{{Text: "images: " + strings.Join(seen, ", ")}}, steps...)
		}
		f.mu.Lock()
		f.cancelled = false
		f.mu.Unlock()
		for len(f.cancel) > 0 {
			<-f.cancel
		}
		// Played on its own goroutine: the reader must go on reading the
		// host's answers to the agent's requests.
		go f.play(m.ID, steps)
	default:
		_ = f.Conn.ReplyError(m.ID, jsonrpc.CodeMethodNotFound, "fake agent: no method "+m.Method)
	}
}

// noSession answers a load of an unknown session as the dialect's agent.
func (f *fakeAgent) noSession(id jsonrpc.ID, sid string) {
	switch f.dialect {
	case "gemini":
		_ = f.Conn.ReplyErrorData(id, jsonrpc.CodeInternalError, "Internal error", map[string]any{"details": "No previous sessions found for this project."})
	case "opencode":
		_ = f.Conn.ReplyErrorData(id, jsonrpc.CodeInternalError, "Internal error: OpenCode service failure", map[string]any{"service": "session"})
	case "copilot":
		_ = f.Conn.ReplyError(id, -32002, "Resource not found: Session "+sid+" not found")
	case "qwen_code":
		_ = f.Conn.ReplyError(id, -32002, "Resource not found: session:"+sid)
	default:
		_ = f.Conn.ReplyError(id, -32099, "cannot load "+sid)
	}
}

func (f *fakeAgent) isCancelled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

func textChunk(text string) map[string]any {
	return map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}
}

// play plays one turn's steps and answers the prompt.
func (f *fakeAgent) play(prompt jsonrpc.ID, steps []agenttest.Step) {
	result := f.usage(map[string]any{"stopReason": "end_turn"})
	defer f.ReplyAtEnd(prompt, &result)
	for _, st := range steps {
		switch {
		case st.Text != "":
			// Two chunks: a reader must coalesce them.
			half := len(st.Text) / 2
			f.update(textChunk(st.Text[:half]))
			f.update(textChunk(st.Text[half:]))
		case st.Thinking != "":
			f.update(map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": st.Thinking}})
		case st.Status != "":
			f.update(map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": st.Status, "priority": "high", "status": "pending"}}})
		case st.Tool != nil:
			id := f.NextID("call")
			tc := toolCall(id, st.Tool)
			tc["sessionUpdate"], tc["status"] = "tool_call", "in_progress"
			f.update(tc)
			f.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
				"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": cmp.Or(st.Tool.Result, "ran")}}}})
		case st.Call != nil:
			if !f.ask(st.Call) {
				result = map[string]any{"stopReason": "cancelled"}
				return
			}
		case st.WaitInterrupt:
			<-f.cancel
			result = map[string]any{"stopReason": "cancelled"}
			return
		case st.Fail != "":
			if f.dialect == "copilot" {
				// Copilot ends a failed turn end_turn, saying so in a chunk.
				f.update(textChunk("Error: " + st.Fail))
				return
			}
			result = nil
			_ = f.Conn.ReplyErrorData(prompt, jsonrpc.CodeInternalError, "Internal error", map[string]any{"details": st.Fail})
			return
		case st.Grandchild:
			f.update(textChunk(fmt.Sprintf("grandchild %d", f.Grandchild())))
		case st.BigLine > 0:
			f.update(textChunk(strings.Repeat("x", st.BigLine)))
		case st.Flood > 0:
			for i := 0; i < st.Flood; i++ {
				f.update(textChunk(fmt.Sprintf("flood %d ", i)))
			}
			agenttest.Tell(f.Script.Sent)
		case st.BigRequest > 0:
			f.bigRequest(st.BigRequest)
		case st.Stream > 0:
			f.stream(st.Stream)
		case st.AfterEnd:
			_ = f.Conn.Reply(prompt, result)
			result = nil
			f.update(textChunk("said after the end"))
			verdict := "refused"
			// Two updates after the request: a host that logged the last
			// has taken in the request.
			trail := func() {
				f.update(textChunk(" and more"))
				f.update(map[string]any{"sessionUpdate": "plan", "entries": []any{}, "_meta": map[string]any{"last": "after the end"}})
				agenttest.Tell(f.Script.Sent)
			}
			if f.permitThen(toolCall(f.NextID("call"), agenttest.Write("/after-the-end")), trail).allowed {
				verdict = "allowed"
			}
			fmt.Fprintln(os.Stderr, "fake agent: the request after the end was "+verdict)
			return
		default:
			f.PlayAlike(st)
		}
	}
}

// stream sends a text message of n bytes in chunks of 64 KiB.
func (f *fakeAgent) stream(n int) {
	const size = 64 << 10
	for sent := 0; sent < n; sent += size {
		b := []byte(strings.Repeat("y", min(size, n-sent)))
		if sent == 0 {
			copy(b, "BEGIN")
		}
		if sent+len(b) >= n {
			copy(b[max(0, len(b)-3):], "END")
		}
		f.update(textChunk(string(b)))
	}
}

// usage adds the usage of a turn as the dialect's agent reports it: 100
// input tokens (40 of them cached), 10 output tokens.
func (f *fakeAgent) usage(res map[string]any) map[string]any {
	switch f.dialect {
	case "gemini":
		res["_meta"] = map[string]any{"quota": map[string]any{"token_count": map[string]any{"input_tokens": 100, "output_tokens": 10}}}
	case "qwen_code":
		// Per model request, in an empty chunk.
		f.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": ""},
			"_meta": map[string]any{"usage": map[string]any{"inputTokens": 100, "outputTokens": 10, "cachedReadTokens": 40}}})
	case "opencode":
		res["usage"] = map[string]any{"inputTokens": 60, "outputTokens": 10, "cachedReadTokens": 40}
	default:
		res["usage"] = map[string]any{"inputTokens": 100, "outputTokens": 10, "cachedReadTokens": 40}
	}
	return res
}

// toolCall describes a script's call as an ACP tool call.
func toolCall(id string, t *agenttest.Tool) map[string]any {
	kind := map[string]string{policy.EffectExec: "execute", policy.EffectWrite: "edit", policy.EffectRead: "read", policy.EffectNetwork: "fetch"}[t.Effect]
	tc := map[string]any{"toolCallId": id, "kind": kind}
	var locs []any
	for _, p := range t.Target.Paths {
		locs = append(locs, map[string]any{"path": p})
	}
	switch {
	case t.Target.Command != "":
		tc["title"], tc["rawInput"] = t.Target.Command, map[string]any{"command": t.Target.Command}
	case t.Target.URL != "":
		tc["title"], tc["rawInput"] = t.Target.URL, map[string]any{"url": t.Target.URL}
	case len(t.Target.Paths) > 0:
		tc["title"], tc["rawInput"] = "Writing to "+filepath.Base(t.Target.Paths[0]), map[string]any{"file_path": t.Target.Paths[0], "content": "fake\n"}
		tc["locations"] = locs
		if kind == "edit" {
			tc["content"] = []any{map[string]any{"type": "diff", "path": t.Target.Paths[0], "oldText": "", "newText": "fake\n"}}
		}
	}
	return tc
}

// optionIDs are the dialect's option ids: allow_always, allow_once,
// reject_once.
func (f *fakeAgent) optionIDs() [3]string {
	switch f.dialect {
	case "gemini", "qwen_code":
		return [3]string{"proceed_always", "proceed_once", "cancel"}
	case "opencode":
		return [3]string{"always", "once", "reject"}
	}
	return [3]string{"allow_always", "allow_once", "reject_once"}
}

// answer is how the host answered a permission request.
type answer struct {
	allowed bool
	text    string
}

// permit asks for toolCall tc and returns the host's answer. Only the
// allow_once option allows; another id (another agent's, an *_always one)
// is a silent deny here, as a wrong id is on Copilot.
func (f *fakeAgent) permit(tc map[string]any) answer { return f.permitThen(tc, nil) }

// permitThen is permit, running then (when set) once the request is sent,
// before waiting for its answer.
func (f *fakeAgent) permitThen(tc map[string]any, then func()) answer {
	ids := f.optionIDs()
	params := map[string]any{"sessionId": f.sid, "toolCall": tc, "options": []any{
		map[string]any{"optionId": ids[0], "kind": "allow_always", "name": "Always"},
		map[string]any{"optionId": ids[1], "kind": "allow_once", "name": "Once"},
		map[string]any{"optionId": ids[2], "kind": "reject_once", "name": "Reject"},
	}}
	_, ch, err := f.Conn.Go("session/request_permission", params)
	if err != nil {
		return answer{text: "error " + err.Error()}
	}
	if then != nil {
		then()
	}
	var res json.RawMessage
	select {
	case m := <-ch:
		if m.Error != nil {
			return answer{text: "error " + m.Error.Error()}
		}
		res = m.Result
	case <-f.Conn.Done():
		return answer{text: "error: the host is gone"}
	}
	var out struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(res, &out)
	return answer{allowed: out.Outcome.Outcome == "selected" && out.Outcome.OptionID == ids[1],
		text: strings.TrimSpace(out.Outcome.Outcome + " " + out.Outcome.OptionID)}
}

// ask puts a call to the host and plays the answer; false when the turn
// ends there (the host cancelled the session: a park or an interrupt).
func (f *fakeAgent) ask(t *agenttest.Tool) bool {
	id := f.NextID("call")
	tc := toolCall(id, t)
	announce := func() {
		u := map[string]any{"sessionUpdate": "tool_call", "status": "pending"}
		for k, v := range tc {
			u[k] = v
		}
		f.update(u)
	}
	if f.dialect != "gemini" && t.Name != AskFirst {
		announce() // Gemini CLI sends no tool_call before its request.
	}
	if t.Name == AskTwice && len(t.Target.Paths) > 0 {
		dir := filepath.Dir(t.Target.Paths[0])
		first := f.permit(map[string]any{"toolCallId": id, "kind": "other", "title": dir,
			"locations": []any{map[string]any{"path": t.Target.Paths[0]}, map[string]any{"path": dir}},
			"rawInput":  map[string]any{"filepath": t.Target.Paths[0], "parentDir": dir}})
		if !first.allowed {
			return f.refused(id, first)
		}
	}
	a := f.permit(tc)
	if t.Name == AskFirst {
		announce()
	}
	if !a.allowed {
		return f.refused(id, a)
	}
	if t.Effect == policy.EffectWrite && len(t.Target.Paths) > 0 {
		// OpenCode's write through the client, although no fs capability
		// was advertised: answered, it writes the file itself.
		if _, err := f.Conn.Call(context.Background(), "fs/write_text_file", map[string]any{"sessionId": f.sid, "path": t.Target.Paths[0], "content": "fake\n"}); err != nil {
			f.update(textChunk("fs/write_text_file failed: " + err.Error()))
		}
		if err := os.WriteFile(t.Target.Paths[0], []byte(cmp.Or(t.Result, "ran")+"\n"), 0o644); err != nil {
			f.update(textChunk("write failed: " + err.Error()))
		}
	}
	result := cmp.Or(t.Result, "ran")
	if t.Name == Runs && t.Effect == policy.EffectExec {
		out, err := exec.Command("bash", "-c", t.Target.Command).CombinedOutput()
		result = fmt.Sprintf("ran (%v): %s", err, out)
	}
	// Qwen Code's request for its mid-turn queue: answered -32601.
	_, qerr := f.Conn.Call(context.Background(), "craft/drainMidTurnQueue", map[string]any{"sessionId": f.sid})
	f.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
		"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": result}}},
		"_meta":   map[string]any{"drain": fmt.Sprint(qerr)}})
	return true
}

// refused plays a call the host did not allow: the turn ends when the
// session was cancelled (a park), else the call fails and the turn goes on.
func (f *fakeAgent) refused(id string, a answer) bool {
	f.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed",
		"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "refused: " + a.text}}}})
	return !f.isCancelled()
}

// bigRequest asks with a request far over the host's line bound, then
// sends the requests the host must refuse, and says how each was answered.
func (f *fakeAgent) bigRequest(n int) {
	tc := map[string]any{"toolCallId": "call_big", "kind": "edit", "title": "big", "rawInput": map[string]any{"content": strings.Repeat("x", n)}}
	big := f.permit(tc)
	_, rerr := f.Conn.Call(context.Background(), "fs/read_text_file", map[string]any{"sessionId": f.sid, "path": "/etc/hostname"})
	_, uerr := f.Conn.Call(context.Background(), "craft/drainMidTurnQueue", map[string]any{"sessionId": f.sid})
	f.update(textChunk(fmt.Sprintf("big request answered: %s; read answered: %v; unknown answered: %v", big.text, rerr, uerr)))
}
