package claudetest

import (
	"encoding/json"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// FromScript is s as the fake claude plays it, each call named and shaped
// as Claude Code asks for it: Bash, Read, Write, WebFetch.
func FromScript(s agenttest.Script) FakeScript {
	out := FakeScript{SessionID: s.SessionID, ResumeFails: s.ResumeFails, IgnoreSIGTERM: s.IgnoreSIGTERM, StartupError: s.StartupError,
		StopReading: s.StopReading, Flood: s.Flood, Deaf: s.Deaf}
	for _, steps := range s.Turns {
		var turn []FakeStep
		for _, st := range steps {
			turn = append(turn, fromStep(st))
		}
		out.Turns = append(out.Turns, turn)
	}
	return out
}

func fromStep(st agenttest.Step) FakeStep {
	f := FakeStep{Text: st.Text, Crash: st.Crash, Stderr: st.Stderr, Hang: st.Hang, WaitInterrupt: st.WaitInterrupt,
		Fail: st.Fail, Grandchild: st.Grandchild, Garbage: st.Garbage, BigLine: st.BigLine, BigRequest: st.BigRequest}
	switch {
	case st.Thinking != "":
		f.Text = st.Thinking
	case st.Tool != nil:
		f.Tool = claudeTool(st.Tool)
	case st.Call != nil:
		f.Permission = claudeTool(st.Call)
	case len(st.Ask) > 0:
		f.Ask, _ = json.Marshal(map[string]any{"questions": st.Ask})
	}
	return f
}

// claudeTool names a call of an effect as Claude Code does.
func claudeTool(t *agenttest.Tool) *FakeTool {
	if t.Name != "" {
		return &FakeTool{Name: t.Name, Input: t.Input, Result: t.Result}
	}
	path := ""
	if len(t.Target.Paths) > 0 {
		path = t.Target.Paths[0]
	}
	switch t.Effect {
	case policy.EffectExec:
		return &FakeTool{Name: "Bash", Input: map[string]any{"command": t.Target.Command}, Result: t.Result}
	case policy.EffectRead:
		return &FakeTool{Name: "Read", Input: map[string]any{"file_path": path}, Result: t.Result}
	case policy.EffectNetwork:
		return &FakeTool{Name: "WebFetch", Input: map[string]any{"url": t.Target.URL, "prompt": "read it"}, Result: t.Result}
	}
	return &FakeTool{Name: "Write", Input: map[string]any{"file_path": path, "content": "written by the fake"}, Result: t.Result}
}
