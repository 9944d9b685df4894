//go:build realcli

package antigravity

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// TestTranslatorMatchesWorker feeds the same agy streams (every event and
// state, deltas split at odd places, an unknown event, a line that is not
// JSON, a 64 MiB line) to blobhub-worker 0.11.0's own StreamTranslator and
// to_result (the pinned peer, through its translate_message) and to
// bhw-run's decoder, and compares the thread items and the outcome. Where
// bhw-run says more than the worker, the comparison leaves it out, and
// docs/agents.md says so: a failed call's result is_error (the worker's is
// always false, with its error in the status item after it), and a text
// item past the 64 KiB a thread item keeps.
func TestTranslatorMatchesWorker(t *testing.T) {
	cases := streamCases()
	cases = append(cases, streamCase{name: "a 64 MiB line", lines: []string{initLine("c64"),
		reply(1, "DONE", strings.Repeat("z", 64<<20-200)), resultLine("SUCCESS", "z", "", nil)}})
	type in struct {
		Name      string   `json:"name"`
		Lines     []string `json:"lines"`
		Mode      string   `json:"mode"`
		GateCalls int      `json:"gate_calls"`
	}
	var req struct {
		Cases []in `json:"cases"`
	}
	for _, c := range cases {
		mode := "autonomous"
		if c.gated {
			mode = "guarded"
		}
		req.Cases = append(req.Cases, in{Name: c.name, Lines: c.lines, Mode: mode, GateCalls: c.hookCalls})
	}
	body, _ := json.Marshal(req)
	out, stderr := agenttest.RunPeer(t, "the worker's translator", bytes.NewReader(body), filepath.Join("testdata", "worker_translate.py"))
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 256<<20)
	i := 0
	for sc.Scan() {
		var w struct {
			Name  string `json:"name"`
			Items []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				Metadata map[string]any `json:"metadata"`
			} `json:"items"`
			Status    string `json:"status"`
			Error     string `json:"error"`
			HadResult bool   `json:"had_result"`
			Usage     struct {
				Input     int64 `json:"input"`
				Output    int64 `json:"output"`
				CacheRead int64 `json:"cache_read"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		c := cases[i]
		i++
		t.Run(c.name, func(t *testing.T) {
			items, res, _ := decode(c)
			var want, got []string
			for _, it := range w.Items {
				want = append(want, normal(it.Content[0].Text, it.Metadata))
			}
			for _, it := range items {
				m, _ := json.Marshal(it.Meta)
				var meta map[string]any
				_ = json.Unmarshal(m, &meta)
				got = append(got, normal(it.Brief, meta))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("items differ\nbhw-run: %q\nworker:  %q", got, want)
			}
			outcome := map[string]string{"completed": agent.TurnCompleted, "failed": agent.TurnFailed,
				"cancelled": agent.TurnInterrupted, "aborted": agent.TurnInterrupted}[w.Status]
			if res == nil {
				// No result line: the session reports AGENT_CRASHED, the
				// worker a failed turn without an error.
				if w.HadResult || outcome != agent.TurnFailed {
					t.Errorf("no result: the worker says %s (%q)", w.Status, w.Error)
				}
				return
			}
			if res.Outcome != outcome || res.ErrorText != w.Error {
				t.Errorf("outcome %s %q, the worker's %s %q", res.Outcome, res.ErrorText, w.Status, w.Error)
			}
			if u := (agent.Usage{InputTokens: w.Usage.Input + w.Usage.CacheRead, InputTokensCached: w.Usage.CacheRead, OutputTokens: w.Usage.Output}); res.Usage != u {
				t.Errorf("usage %+v, the worker's %+v", res.Usage, u)
			}
		})
	}
	if i != len(cases) {
		t.Fatalf("the worker answered %d of %d cases (%v)\n%s", i, len(cases), sc.Err(), stderr)
	}
}

// itemKeep is what a thread item keeps of a text (run's item cap).
const itemKeep = 64 << 10

// normal is an item in the terms both runners share: its type, the text
// of a text or status item (its first itemKeep bytes), status and detail,
// and a tool item's name, id, input (canonical) and output, without
// is_error.
func normal(brief string, meta map[string]any) string {
	typ, _ := meta["type"].(string)
	parts := []string{typ}
	switch typ {
	case agent.ItemText, agent.ItemStatus:
		if len(brief) > itemKeep {
			brief = brief[:itemKeep]
		}
		parts = append(parts, brief, str(meta["status"]), str(meta["detail"]))
	case agent.ItemToolCall, agent.ItemToolResult:
		tool, _ := meta["tool"].(map[string]any)
		in, _ := json.Marshal(tool["input"])
		if c, err := policy.Canonical(in); err == nil {
			in = c
		}
		parts = append(parts, str(tool["name"]), str(tool["invocation_id"]), string(in), str(tool["output"]))
	}
	return strings.Join(parts, " | ")
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
