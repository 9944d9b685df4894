package run

import (
	"strings"

	"github.com/blobhub/bhw-run/policy"
)

// pickedAnswers is the answers block of a prompt answered by picks
// (metadata.answers), as they came.
func pickedAnswers(picked []policy.PickedAnswer) []map[string]any {
	out := make([]map[string]any, 0, len(picked))
	for _, p := range picked {
		out = append(out, map[string]any{"question": p.Question, "answer": p.Answer})
	}
	return out
}

// bareNegatives are denials that say nothing more than no: no reason is
// passed on for them.
var bareNegatives = map[string]bool{"deny": true, "denied": true, "no": true, "n": true, "nope": true, "reject": true, "rejected": true, "0": true}

// denialReason is the person's words as the reason for a denial, "" when
// they only said no.
func denialReason(text string) string {
	t := strings.TrimSpace(text)
	if bareNegatives[strings.ToLower(t)] {
		return ""
	}
	return t
}
