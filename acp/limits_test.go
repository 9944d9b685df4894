package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
)

// refusedTurns are the failed turns of the recorded probes (errors.jsonl,
// limits.jsonl), by the prompt that started them, and what each is.
var refusedTurns = map[string]string{
	"with a refused key":      agent.FailureAuth,      // 401
	"with a forbidden key":    agent.FailureAuth,      // 403
	"rate limited every time": agent.FailureRateLimit, // 429 on every request, a 1 s reset
}

// longReset is the prompt of Gemini CLI's recorded 429 with a 2 h reset,
// beyond its longest retry: the turn fails at once, naming the reset.
const longReset = "rate limited for two hours"

// transcriptTurn is one prompt of a recorded transcript and how its turn
// failed: the answer's JSON-RPC error, or the "Error: " notice of an
// end_turn.
type transcriptTurn struct {
	text   string
	err    *jsonrpc.Error
	notice string
}

func readTurns(t *testing.T, path string) []transcriptTurn {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; record it with: go test -tags realcli ./acp/acptest -run 'TestProbe(Limits)?$' -args -record", err)
	}
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Prompt []struct {
				Text string `json:"text"`
			} `json:"prompt"`
			Update struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
		Error *jsonrpc.Error `json:"error"`
	}
	var out []transcriptTurn
	open := map[string]int{} // prompt id → index in out
	cur := -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var l struct {
			Dir string `json:"dir"`
			Msg msg    `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		m := l.Msg
		switch {
		case l.Dir == "send" && m.Method == "session/prompt" && len(m.Params.Prompt) > 0:
			out = append(out, transcriptTurn{text: m.Params.Prompt[0].Text})
			cur = len(out) - 1
			open[string(m.ID)] = cur
		case l.Dir == "recv" && m.Method == "session/update" && cur >= 0 && m.Params.Update.Kind == "agent_message_chunk" &&
			strings.HasPrefix(m.Params.Update.Content.Text, "Error: "):
			out[cur].notice = strings.TrimPrefix(m.Params.Update.Content.Text, "Error: ")
		case l.Dir == "recv" && m.Method == "" && m.Error != nil:
			if i, ok := open[string(m.ID)]; ok {
				out[i].err = m.Error
			}
		}
	}
	return out
}

// TestRefusalRecorded: every failed turn the agents were recorded ending
// with a 429, a 401 or a 403 reads as the limit or the refused key, and
// no other recorded failure (a 500, an unknown session) does.
func TestRefusalRecorded(t *testing.T) {
	root := filepath.Join(agenttest.ModuleRoot(t), "testdata", "acp")
	for _, typ := range []string{TypeGemini, TypeQwen, TypeOpenCode, TypeCopilot} {
		t.Run(typ, func(t *testing.T) {
			seen := map[string]bool{}
			for _, name := range []string{"errors", "limits", "model-down"} {
				for _, tt := range readTurns(t, filepath.Join(root, typ, name+".jsonl")) {
					var got string
					var reset time.Time
					now := time.Now()
					switch {
					case tt.err != nil:
						got, reset = refusal(errorText(tt.err), tt.err.Code, now)
					case tt.notice != "":
						got, reset = refusal(tt.notice, 0, now)
					default:
						continue
					}
					want, wantReset := refusedTurns[tt.text], time.Time{}
					if tt.text == longReset {
						want, wantReset = agent.FailureRateLimit, now.Add(2*time.Hour).Truncate(time.Second)
					}
					seen[tt.text] = true
					if got != want || !reset.Equal(wantReset) {
						t.Errorf("%s %q: %q reset %v, want %q reset %v (%v%s)", name, tt.text, got, reset, want, wantReset, tt.err, tt.notice)
					}
				}
			}
			if typ == TypeGemini && !seen[longReset] {
				t.Errorf("no recorded failed turn %q", longReset)
			}
			for text := range refusedTurns {
				if !seen[text] {
					t.Errorf("no recorded failed turn %q", text)
				}
			}
		})
	}
}

// TestResetHint: a reset the text names is taken when it is a window's
// (a minute or more); a retry's few seconds are not.
func TestResetHint(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		text string
		want time.Duration // 0: none
	}{
		{"fake: you exceeded your current quota, please retry in 1s\nSuggested retry after 1s.", 0},
		{"Resource exhausted. Suggested retry after 3600s.", time.Hour},
		{"429 rate limit reached for requests. Please try again in 20m0s.", 20 * time.Minute},
		{"rate limit reached. Please try again in 90s.", 90 * time.Second},
		{`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7200s"}`, 2 * time.Hour},
		{"Rate limit exceeded. Try again later.", 0},
	} {
		f, got := refusal(c.text, 429, now)
		if f != agent.FailureRateLimit {
			t.Errorf("%q: %q, want a rate limit", c.text, f)
		}
		want := time.Time{}
		if c.want > 0 {
			want = now.Add(c.want)
		}
		if !got.Equal(want) {
			t.Errorf("%q: reset %v, want %v", c.text, got, want)
		}
	}
}

// TestFakeRefusedTurn: a failed turn whose error names a 429 or a refused
// key says so (Failure), through the JSON-RPC error of the prompt and
// through Copilot's "Error: " notice; another failure does not.
func TestFakeRefusedTurn(t *testing.T) {
	for _, typ := range []string{TypeQwen, TypeCopilot} {
		for _, c := range []struct{ fail, want string }{
			{"429 Rate limit exceeded. Suggested retry after 600s.", agent.FailureRateLimit},
			{"Authentication failed with provider at http://127.0.0.1/v1 (HTTP 401).", agent.FailureAuth},
			{"500 the model answered 500", ""},
		} {
			t.Run(typ+"/"+c.fail[:3], func(t *testing.T) {
				r := startFake(t, typ, agenttest.Turn(agenttest.Step{Fail: c.fail}), nil)
				t0 := time.Now()
				res := runTurn(t, r.s, "go", &agenttest.Recorder{})
				if res.Outcome != agent.TurnFailed || res.Failure != c.want {
					t.Fatalf("Turn %+v, want failed %q", res, c.want)
				}
				if c.want == agent.FailureRateLimit && (res.ResetAt.Before(t0.Add(599*time.Second)) || res.ResetAt.After(time.Now().Add(600*time.Second))) {
					t.Errorf("reset %v, want 600 s from now", res.ResetAt)
				}
			})
		}
	}
}

// TestFakeProgress: Qwen Code's per-request usage is reported as the
// turn's Progress (run meters the budget with it); the agents that tell
// their usage only with the prompt's answer report none.
func TestFakeProgress(t *testing.T) {
	for _, typ := range []string{TypeQwen, TypeGemini, TypeCopilot} {
		t.Run(typ, func(t *testing.T) {
			r := startFake(t, typ, agenttest.Turn(agenttest.Step{Text: "hi"}), nil)
			h := &agenttest.Recorder{}
			res := runTurn(t, r.s, "go", h)
			var want []agent.Progress
			if typ == TypeQwen {
				want = []agent.Progress{{Usage: agent.Usage{InputTokens: 100, InputTokensCached: 40, OutputTokens: 10}, Turns: 1}}
			}
			if got := h.Reports(); !slices.Equal(got, want) || res.NumTurns != 1 {
				t.Fatalf("progress %+v, %d agent turns; want %+v, 1", got, res.NumTurns, want)
			}
		})
	}
}
