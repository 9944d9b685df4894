package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestThirdAdapterRunsAWholeThread: an agent run/ has never heard of, the
// scripted test agent, is added the way a new agent is (one entry in
// main.go's adapters, plus its folder) and runs a whole thread through the
// CLI: hand-off and activation, a call parked on a person, the approval,
// the approved call run once under its grant, and a later turn that resumes
// the same session.
func TestThirdAdapterRunsAWholeThread(t *testing.T) {
	saved := adapters
	adapters = append(append([]agent.Adapter(nil), adapters...), agenttest.Agent{}.Adapter())
	t.Cleanup(func() { adapters = saved })

	root := t.TempDir()
	home, state, work := filepath.Join(root, "home"), filepath.Join(root, "state"), filepath.Join(root, "work")
	for _, d := range []string{home, state, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "script.json")
	config := filepath.Join(state, "config.yaml")
	if err := os.WriteFile(config, []byte("agents:\n  test_agent:\n    executable: "+self+"\n    env: {"+agenttest.ScriptEnv+": "+script+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global := []string{"bhw-run", "--api-url", "file://" + filepath.Join(root, "store"), "--state-dir", state, "--config", config,
		"--revision", "rev_local", "--session", "ses_local", "--log-format", "json"}
	cli := func(wantExit int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(append(append([]string(nil), global...), args...), &out, &errOut, "", adapters); code != wantExit {
			t.Fatalf("%v: exit %d, want %d\nstdout %s\nstderr %s", args, code, wantExit, out.String(), errOut.String())
		}
		return out.String()
	}
	const alias = "third/t1"
	target := filepath.Join(work, "x.txt")
	cli(0, "thread", "new", "--agent", agenttest.Type, "--work-folder", work, "--message", "write x.txt", alias)

	agenttest.Play(t, script, agenttest.Turn(agenttest.Step{Text: "let me write"}, agenttest.Step{Call: agenttest.Write(target)}))
	if out := cli(0, alias); !strings.Contains(out, "parked") {
		t.Fatalf("first run: %s", out)
	}
	cli(0, "thread", "post", alias, "yes")
	agenttest.Play(t, script, agenttest.Turn(agenttest.Step{Call: agenttest.Write(target)}, agenttest.Step{Text: "written"}))
	if out := cli(0, alias); !strings.Contains(out, "turn_completed") {
		t.Fatalf("approved run: %s", out)
	}
	cli(0, "thread", "post", alias, "thanks")
	agenttest.Play(t, script, agenttest.Turn(agenttest.Step{Text: "you are welcome"}))
	if out := cli(0, alias); !strings.Contains(out, "turn_completed") {
		t.Fatalf("resumed run: %s", out)
	}

	var types []string
	decisions := map[string]int{}
	for _, line := range strings.Split(cli(0, "thread", "show", "--json", alias), "\n") {
		var it struct {
			Metadata struct {
				Type     string `json:"type"`
				Decision string `json:"decision"`
				Tool     struct {
					IsError bool `json:"is_error"`
				} `json:"tool"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(line), &it) != nil {
			continue
		}
		m := it.Metadata
		if m.Type == "" {
			m.Type = "person"
		}
		types = append(types, m.Type)
		if m.Decision != "" {
			decisions[m.Decision]++
		}
	}
	want := []string{"person", "text", "tool_call", "pending_prompt", "tool_result", "turn_end",
		"person", "pending_prompt_resolved", "tool_call", "tool_result", "text", "turn_end",
		"person", "text", "turn_end"}
	if !slices.Equal(types, want) {
		t.Fatalf("items %v\nwant  %v", types, want)
	}
	if decisions["approved"] != 1 {
		t.Fatalf("decisions %v", decisions)
	}
	// The agent was asked once per process and resumed its session after
	// the first: three initialize requests, the last two resuming one id.
	log, err := os.ReadFile(filepath.Join(state, "jobs", "session_agent_harness-ses_local", "threads", "third", "t1", "logs", "thread.log"))
	if err != nil {
		t.Fatal(err)
	}
	var inits []map[string]any
	var gates []string
	for _, line := range strings.Split(string(log), "\n") {
		_, stream, text, ok := agent.ParseLogLine(line)
		switch {
		case ok && stream == agent.StreamStdin && strings.Contains(text, `"method":"initialize"`):
			var m struct {
				Params map[string]any `json:"params"`
			}
			_ = json.Unmarshal([]byte(text), &m)
			inits = append(inits, m.Params)
		case ok && stream == agent.StreamRun && strings.HasPrefix(text, "gate "):
			gates = append(gates, text)
		}
	}
	if len(inits) != 3 || inits[0]["resume"] != false || inits[1]["resume"] != true || inits[2]["resume"] != true ||
		inits[1]["session_id"] != inits[2]["session_id"] || inits[1]["session_id"] == "" {
		t.Fatalf("initialize requests %v", inits)
	}
	if len(gates) != 2 || !strings.HasPrefix(gates[0], "gate ask write_file") || !strings.Contains(gates[1], "one-shot grant") {
		t.Fatalf("gate decisions %q", gates)
	}
}
