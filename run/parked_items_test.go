package run

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// TestParkedCallReadsAsWaiting: a call the gate holds for a person shows
// on the thread as its tool_call, the pending_prompt right after it, and a
// tool_result that says the call waits for a person and names the prompt
// item — not what the agent was told to stop it (Claude's "The user doesn't
// want to proceed … STOP"), an artefact of parking, not a result, and not
// an error. (The adapters' part, relaying the parked result, is in the
// conformance suite every adapter passes.)
func TestParkedCallReadsAsWaiting(t *testing.T) {
	h := newHarness(t, false)
	const alias = "parked/items"
	write := h.handOffWrite(alias, "write x.txt", agenttest.Step{Text: "on it"})
	want(t, h.run(alias), OutcomeParked, 0)
	wantParkedItems(t, h, alias, []string{"person", "text", "tool_call", "pending_prompt", "tool_result", "turn_end"})

	// Answered, the resumed turn runs the call; its result is a result.
	h.srv.PersonPost(alias, "yes")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}, {Text: "written"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	if got := h.items(alias)[6:]; !slices.Equal(got, []string{"person", "pending_prompt_resolved", "tool_call", "tool_result", "text", "turn_end"}) {
		t.Fatalf("the resumed turn's items %v", got)
	}
}

// TestParkedQuestionReadsAsWaiting: the agent's own question parks the same
// way: its call, the prompt right after it, then the call waiting.
func TestParkedQuestionReadsAsWaiting(t *testing.T) {
	h := newHarness(t, false)
	const alias = "parked/question"
	h.handOff(alias, "approval", "deploy it")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Ask: []policy.Question{{Question: "Which target?", Options: []policy.Option{{Label: "staging"}, {Label: "production"}}}}}}}})
	want(t, h.run(alias), OutcomeParked, 0)
	wantParkedItems(t, h, alias, []string{"person", "tool_call", "pending_prompt", "tool_result", "turn_end"})
}

// wantParkedItems checks the parked turn's items: types in order, the
// parked call's result waiting and naming its prompt, no refusal text.
func wantParkedItems(t *testing.T, h *harness, alias string, types []string) {
	t.Helper()
	items := h.srv.Items(alias)
	if got := h.items(alias); !slices.Equal(got, types) {
		t.Fatalf("items %v, want %v", got, types)
	}
	var promptID string
	for _, it := range items {
		b, _ := json.Marshal(it)
		if strings.Contains(string(b), "STOP") || strings.Contains(string(b), "doesn't want to proceed") {
			t.Fatalf("the agent's refusal reached the thread: %s", b)
		}
		var m struct {
			Type string `json:"type"`
			Tool struct {
				InvocationID string `json:"invocation_id"`
				Output       string `json:"output"`
				IsError      bool   `json:"is_error"`
			} `json:"tool"`
			PendingPrompt struct {
				ItemID     string `json:"item_id"`
				EmissionID string `json:"emission_id"`
			} `json:"pending_prompt"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		switch m.Type {
		case "pending_prompt":
			promptID = it.ID
		case "tool_result":
			if m.Tool.IsError || !strings.Contains(m.Tool.Output, "waiting for a person") || !strings.Contains(it.Content[0].Text, "waiting for a person") {
				t.Fatalf("the parked call's result %s, want a result that waits for a person, not an error", it.Metadata)
			}
			if m.PendingPrompt.ItemID != promptID || promptID == "" || m.PendingPrompt.EmissionID == "" {
				t.Fatalf("the parked call's result names prompt %+v, want the pending_prompt item %s", m.PendingPrompt, promptID)
			}
		}
	}
}
