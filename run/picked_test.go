package run

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/policy"
)

// personPicks posts a person's answer as Mission Control does: the text
// typed and, in metadata.answers, the options picked.
func personPicks(h *harness, alias, text, answers string) {
	h.t.Helper()
	h.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{
		Content:  []blobhub.Block{{Type: "text", Text: text}},
		Metadata: json.RawMessage(`{"answers":` + answers + `}`)})
}

// lastResolution is the thread's last pending_prompt_resolved.
func lastResolution(t *testing.T, h *harness, alias string) (decision string, answers []policy.PickedAnswer) {
	t.Helper()
	for _, it := range h.srv.Items(alias) {
		var m struct {
			Type     string `json:"type"`
			Decision string `json:"decision"`
			Prompt   struct {
				Answers []policy.PickedAnswer `json:"answers"`
			} `json:"prompt"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Type == "pending_prompt_resolved" {
			decision, answers = m.Decision, m.Prompt.Answers
		}
	}
	return decision, answers
}

// TestPickedAnswersWin: an answer's metadata.answers (the options a
// person picked in Mission Control) win over its text, as in
// blobhub-worker: "Looks good, go ahead" with the pick "approve" approves
// the call that waited, which then runs; a pick of "Deny" under the text
// "yes" denies; a set with the wrong number of entries is not used, and
// the text decides; a question's picks are the answers, as picked.
func TestPickedAnswersWin(t *testing.T) {
	for _, tc := range []struct {
		name, text, answers, decision string
	}{
		{"approve picked, prose text", "Looks good, go ahead", `[{"question":"Approve?","answer":["approve"]}]`, "approved"},
		{"deny picked, yes typed", "yes", `[{"question":"Approve?","answer":["Deny"]}]`, "denied"},
		{"two entries for one question: the text decides", "yes", `[{"answer":["Deny"]},{"answer":["Deny"]}]`, "approved"},
		{"an answer that is no list: the text decides", "no", `[{"answer":"approve"}]`, "denied"},
		{"approve with words around it is no approval", "ok", `[{"answer":["approve it"]}]`, "denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "picked/approval"
			write := &agenttest.Tool{Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{filepath.Join(h.work, "x.txt")}}}
			h.handOff(alias, "approval", "write x.txt")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}}}})
			want(t, h.run(alias), OutcomeParked, 0)
			personPicks(h, alias, tc.text, tc.answers)
			// The resumed turn makes the call again: approved, it runs;
			// denied, it waits for a person again.
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}, {Text: "done"}}}})
			outcome := OutcomeParked
			if tc.decision == "approved" {
				outcome = OutcomeTurnCompleted
			}
			want(t, h.run(alias), outcome, 0)
			if d, _ := lastResolution(t, h, alias); d != tc.decision {
				t.Fatalf("decision %q, want %q", d, tc.decision)
			}
		})
	}
	t.Run("question", func(t *testing.T) {
		h := newHarness(t, false)
		const alias = "picked/question"
		h.handOff(alias, "approval", "deploy it")
		qs := []policy.Question{
			{Question: "Which target?", Options: []policy.Option{{Label: "staging"}, {Label: "production"}}},
			{Question: "Languages?", MultiSelect: true, Options: []policy.Option{{Label: "Go"}, {Label: "Rust"}}},
		}
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Ask: qs}}}})
		want(t, h.run(alias), OutcomeParked, 0)
		// The text alone would answer both questions with "1".
		personPicks(h, alias, "1", `[{"question":"Which target?","answer":["production"]},{"question":"Languages?","answer":["Go","Rust"]}]`)
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "deploying"}}}})
		want(t, h.run(alias), OutcomeTurnCompleted, 0)
		_, got := lastResolution(t, h, alias)
		if len(got) != 2 || len(got[0].Answer) != 1 || got[0].Answer[0] != "production" || len(got[1].Answer) != 2 {
			t.Fatalf("answers %+v, want production and Go, Rust as picked", got)
		}
	})
}
