package envelope

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestThreadParkLegacyPrompt: a thread.yaml an earlier bhw-run wrote keeps
// its open prompt under prompt; it is read, and written back at
// agent.park, the worker's place, with the approval's subject, and no
// longer under prompt.
func TestThreadParkLegacyPrompt(t *testing.T) {
	old := "alias: a\nprompt:\n  kind: approval\n  prompt_id: prm_1\n  item_id: itm-1\n  emission_id: e-1\n  created_at: \"2026-05-27T12:35:01.123456Z\"\n  call:\n    tool: Bash\n    effect: exec\n    fingerprint: sha256:1\n"
	var th Thread
	if err := DecodeYAML([]byte(old), &th, false); err != nil {
		t.Fatal(err)
	}
	if th.Prompt == nil || th.Prompt.PromptID != "prm_1" || th.Prompt.ItemID != "itm-1" {
		t.Fatalf("the older prompt read as %+v", th.Prompt)
	}
	b, err := yaml.Marshal(&th)
	if err != nil {
		t.Fatal(err)
	}
	var disk map[string]any
	if err := yaml.Unmarshal(b, &disk); err != nil {
		t.Fatal(err)
	}
	park, _ := disk["agent"].(map[string]any)["park"].(map[string]any)
	if _, ok := disk["prompt"]; ok || park["prompt_id"] != "prm_1" || park["subject"] != "Bash" || park["kind"] != "approval" {
		t.Errorf("written as:\n%s", b)
	}
	var again Thread
	if err := DecodeYAML(b, &again, false); err != nil || again.Prompt == nil || again.Prompt.EmissionID != "e-1" || again.Agent.Park != nil {
		t.Errorf("read back %+v, %v", again.Prompt, err)
	}
	if strings.Contains(string(b), "\nprompt:") {
		t.Errorf("still under prompt:\n%s", b)
	}
}

// TestThreadUnknownKeysKept: keys this version does not know, at the top
// and inside session, workspace, agent, items and the park, survive a read
// and a write.
func TestThreadUnknownKeysKept(t *testing.T) {
	in := "alias: a\nlast_event: x\nsession:\n  session_id: s\n  revision_id: r\n  future: 1\nworkspace:\n  agent_type: claude_code\n  work_folder: /w\n  future: 2\nagent:\n  state: active\n  usage_total:\n    input_tokens: 5\n  future: 3\n  park:\n    prompt_id: prm_2\n    kind: approval\n    subject: Bash\n    future: 4\nitems:\n  future: 5\n"
	var th Thread
	if err := DecodeYAML([]byte(in), &th, false); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(&th)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"last_event: x", "future: 1", "future: 2", "future: 3", "future: 4", "future: 5", "input_tokens: 5"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%q lost:\n%s", want, b)
		}
	}
}
