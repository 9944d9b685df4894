package policy

import (
	"encoding/json"
	"testing"
)

// TestPicked: metadata.answers is read as blobhub-worker reads it: a
// non-empty list of objects each with an answer list, else nothing; an
// approval is its first label, trimmed, in any case, exactly one of the
// approval replies.
func TestPicked(t *testing.T) {
	for raw, wantOK := range map[string]bool{
		`[{"question":"q","answer":["approve"]}]`: true,
		`[{"answer":[]}]`:                         true,
		`[]`:                                      false,
		`null`:                                    false,
		`{"answer":["approve"]}`:                  false,
		`[{"answer":"approve"}]`:                  false,
		`[{"question":"q"}]`:                      false,
		`["approve"]`:                             false,
		`[{"answer":[1]}]`:                        true,
	} {
		if _, ok := ParsePicked(json.RawMessage(raw)); ok != wantOK {
			t.Errorf("ParsePicked(%s) ok = %v, want %v", raw, ok, wantOK)
		}
	}
	for label, want := range map[string]bool{
		"approve": true, " Approve ": true, "APPROVED": true, "yes": true, "1": true, "allow": true,
		"Approve & remember": false, "approve.": false, "Deny": false, "": false, "go ahead": false,
	} {
		if got := PicksApprove([]PickedAnswer{{Answer: []string{label}}}); got != want {
			t.Errorf("PicksApprove(%q) = %v, want %v", label, got, want)
		}
	}
	if PicksApprove(nil) || PicksApprove([]PickedAnswer{{}}) {
		t.Error("no pick approved")
	}
	// A pick that is no string approves nothing (the text is not read).
	if p, ok := ParsePicked(json.RawMessage(`[{"answer":[1]}]`)); !ok || PicksApprove(p) {
		t.Errorf("a numeric pick: %v %v", p, ok)
	}
	qs := []Question{{Question: "Which?", Options: []Option{{Label: "Staging"}, {Label: "Production"}}}}
	got := PickedToAnswers(qs, []PickedAnswer{{Answer: []string{"production", "my own words"}}})
	if len(got) != 1 || len(got[0].Labels) != 2 || got[0].Labels[0] != "Production" || got[0].Labels[1] != "my own words" {
		t.Errorf("PickedToAnswers = %+v", got)
	}
}
