package cli

// What `thread post` tells the person about the text they post: how the
// next run will read it when it answers a waiting question (the run's own
// reading, policy's ParseApproval and ParseQuestionAnswers), and that a
// completed or failed thread reads nothing until something else is done.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/redact"
)

// answerReading is how a run reads a post that answers the thread's open
// pending_prompt.
type answerReading struct {
	Kind     string          `json:"kind"`               // approval, ask_user_question
	Decision string          `json:"decision,omitempty"` // approve, deny (an approval)
	Reason   string          `json:"reason,omitempty"`   // a denial's reason
	Answers  []policy.Answer `json:"answers,omitempty"`  // an agent's questions
	Line     string          `json:"-"`                  // for a person
}

// promptMeta is what a pending_prompt item carries that reading its
// answer needs.
type promptMeta struct {
	Type   string `json:"type"`
	Prompt struct {
		Kind      string            `json:"kind"`
		Questions []policy.Question `json:"questions"`
	} `json:"prompt"`
}

// postContext is what a post will meet: the thread's wire state and the
// question its text answers (nil when none waits, or a person's earlier
// post already answers it).
func postContext(ctx context.Context, c blobhub.Client, alias string) (state string, open *promptMeta) {
	obj, err := c.Download(ctx, alias)
	if errors.Is(err, blobhub.ErrNotFound) || err != nil {
		return "", nil // threadPost says so
	}
	if env, _ := envelope.Parse(obj.Value); env != nil {
		state = env.State
	}
	_, _, _ = blobhub.TailEach(ctx, c, alias, blobhub.Cursor{}, showLimits, func(it blobhub.Item) bool {
		var m promptMeta
		_ = json.Unmarshal(it.Metadata, &m)
		switch m.Type {
		case agent.ItemPendingPrompt:
			open = &m
		case agent.ItemPendingPromptResolved:
			open = nil
		case "":
			// A person's item: the first after the prompt is its answer,
			// as the run reads it.
			open = nil
		}
		return true
	})
	return state, open
}

// readAnswer reads text as the run will read it as the answer to p.
func readAnswer(p *promptMeta, text string) *answerReading {
	if p.Prompt.Kind == policy.KindAskUserQuestion {
		answers := policy.ParseQuestionAnswers(p.Prompt.Questions, text)
		return &answerReading{Kind: p.Prompt.Kind, Answers: answers,
			Line: "read as: " + strings.ReplaceAll(strings.ReplaceAll(policy.FormatAnswers(p.Prompt.Questions, answers), "The person answered: ", ""), "\n", "; ")}
	}
	r := &answerReading{Kind: "approval"}
	if ok, reason := policy.ParseApproval(text); ok {
		r.Decision, r.Line = "approve", "read as: approve; the next run runs the call once"
	} else {
		r.Decision, r.Reason = "deny", reason
		r.Line = fmt.Sprintf("read as: deny, with the reason %q; only %s approve (post one of them to approve)",
			reason, strings.Join(policy.ApprovalReplies, ", "))
	}
	return r
}

// postWarning is what a person should know before a post to a thread in
// state reaches nobody; "" when a run will read it.
func postWarning(alias, state string) string {
	switch state {
	case envelope.StateCompleted:
		return fmt.Sprintf("thread %s is completed (stopped): no run reads this message; hand the work off again with `bhw-run thread new`", redact.Shown(alias))
	case envelope.StateFailed:
		return fmt.Sprintf("thread %s is failed: no run reads this message until `bhw-run thread retry %s`", redact.Shown(alias), shellQuote(alias))
	}
	return ""
}
