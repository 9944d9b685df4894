package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// ApprovalReplies are the only replies that approve a call (in any case,
// trailing punctuation ignored); any other denies it, and is its reason.
// The approval prompt lists them.
var ApprovalReplies = []string{"yes", "y", "ok", "approve", "approved", "allow", "1"}

var approvals = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range ApprovalReplies {
		m[r] = true
	}
	return m
}()

// trimReply drops surrounding whitespace and trailing punctuation.
func trimReply(s string) string {
	return strings.TrimRightFunc(strings.TrimSpace(s), func(r rune) bool {
		return unicode.IsPunct(r) || unicode.IsSpace(r)
	})
}

// ParseApproval reads a person's reply to an approval prompt. Only a clear
// yes approves (yes, y, approve, approved, allow, ok, 1; any case, trailing
// punctuation ignored); anything else denies, and its text (trimmed) is the
// reason. A denial's reason may be empty.
func ParseApproval(text string) (approved bool, reason string) {
	if approvals[strings.ToLower(trimReply(text))] {
		return true, ""
	}
	return false, strings.TrimSpace(text)
}

// Answer is a person's answer to one question: the labels of the options
// picked, or free text when the reply picked none.
type Answer struct {
	Question string   `json:"question" yaml:"question"`
	Labels   []string `json:"labels,omitempty" yaml:"labels,omitempty"`
	Free     string   `json:"free,omitempty" yaml:"free,omitempty"`
}

// ParseQuestionAnswers reads a reply to an ask_user_question prompt: one line
// per question in order, blank lines ignored (with one question, the whole
// text is its line). A number picks that option and wins over a label that
// reads the same; an option's label picks it, case-insensitively; a
// multi-select takes comma-separated numbers or labels; anything else is free
// text. Lines beyond the last question join the last answer; a question with
// no line gets an empty answer. The result has one Answer per question.
func ParseQuestionAnswers(qs []Question, text string) []Answer {
	var lines []string
	if len(qs) == 1 {
		if t := strings.TrimSpace(text); t != "" {
			lines = []string{t}
		}
	} else {
		for _, l := range strings.Split(text, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		if len(qs) > 0 && len(lines) > len(qs) {
			last := strings.Join(lines[len(qs)-1:], "\n")
			lines = append(lines[:len(qs)-1], last)
		}
	}
	answers := make([]Answer, len(qs))
	for i, q := range qs {
		answers[i].Question = q.Question
		if i < len(lines) {
			answers[i].Labels, answers[i].Free = pick(q, lines[i])
		}
	}
	return answers
}

// pick matches one answer line against a question's options.
func pick(q Question, line string) ([]string, string) {
	if l, ok := pickOne(q, line); ok {
		return []string{l}, ""
	}
	if q.MultiSelect && strings.Contains(line, ",") {
		var labels []string
		for _, item := range strings.Split(line, ",") {
			if strings.TrimSpace(item) == "" {
				continue
			}
			l, ok := pickOne(q, item)
			if !ok {
				return nil, line
			}
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		if len(labels) > 0 {
			return labels, ""
		}
	}
	return nil, line
}

// pickOne matches a number (1-based) first, then a label.
func pickOne(q Question, s string) (string, bool) {
	s = trimReply(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 1 && n <= len(q.Options) {
			return q.Options[n-1].Label, true
		}
	}
	for _, o := range q.Options {
		if l := trimReply(o.Label); l != "" && strings.EqualFold(l, s) {
			return o.Label, true
		}
	}
	return "", false
}

// FormatAnswers is the resume message for answered questions, one line per
// question: The person answered: "Which target?" = production. Several picks
// are joined with ", "; a question left unanswered says so.
func FormatAnswers(qs []Question, answers []Answer) string {
	var b strings.Builder
	for i, q := range qs {
		var a Answer
		if i < len(answers) {
			a = answers[i]
		}
		var value string
		switch {
		case len(a.Labels) > 0:
			value = strings.Join(a.Labels, ", ")
		case a.Free != "":
			value = a.Free
		default:
			value = "(no answer)"
		}
		fmt.Fprintf(&b, "The person answered: %q = %s\n", q.Question, value)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// PickedAnswer is one question's answer as a surface that showed the
// prompt relays it in an item's metadata.answers (Mission Control's option
// picks): the question and the labels picked, or the person's own words.
type PickedAnswer struct {
	Question string   `json:"question" yaml:"question"`
	Answer   []string `json:"answer" yaml:"answer"`
}

// ParsePicked reads metadata.answers as blobhub-worker reads it: a
// non-empty list, else none. ok is false when the list is there but not
// every entry is an object whose answer is a list; such a set is never
// used (the reply's text is read instead). An answer's element that is
// not a string reads as "", which picks nothing and approves nothing.
func ParsePicked(raw json.RawMessage) (picked []PickedAnswer, ok bool) {
	var entries []json.RawMessage
	if json.Unmarshal(raw, &entries) != nil || len(entries) == 0 {
		return nil, false
	}
	for _, e := range entries {
		var m map[string]json.RawMessage
		if json.Unmarshal(e, &m) != nil || m == nil {
			return nil, false
		}
		var p PickedAnswer
		_ = json.Unmarshal(m["question"], &p.Question)
		var elems []json.RawMessage
		if json.Unmarshal(m["answer"], &elems) != nil || elems == nil {
			return nil, false
		}
		p.Answer = make([]string, len(elems))
		for i, el := range elems {
			_ = json.Unmarshal(el, &p.Answer[i])
		}
		picked = append(picked, p)
	}
	return picked, true
}

// UsablePicks says whether picked answers a prompt of n questions as it
// stands: exactly one entry per question. A partial set is not padded;
// the reply's text is read instead, as blobhub-worker does.
func UsablePicks(picked []PickedAnswer, n int) bool {
	return len(picked) > 0 && len(picked) == n
}

// PicksApprove says whether picked answers approve a call: the first
// label of the first answer, without surrounding whitespace and in any
// case, is exactly one of ApprovalReplies. Nothing else approves ("Approve
// it" does not), as in blobhub-worker.
func PicksApprove(picked []PickedAnswer) bool {
	if len(picked) == 0 || len(picked[0].Answer) == 0 {
		return false
	}
	return approvals[strings.ToLower(strings.TrimSpace(picked[0].Answer[0]))]
}

// PickedToAnswers turns picks for qs into Answers: each pick that is one
// of the question's option labels (any case) is that label, any other is
// kept as the person's own words, in the order picked.
func PickedToAnswers(qs []Question, picked []PickedAnswer) []Answer {
	out := make([]Answer, len(qs))
	for i, q := range qs {
		out[i].Question = q.Question
		if i >= len(picked) {
			continue
		}
		for _, s := range picked[i].Answer {
			if l, ok := optionLabel(q, s); ok {
				s = l
			}
			if strings.TrimSpace(s) != "" {
				out[i].Labels = append(out[i].Labels, s)
			}
		}
	}
	return out
}

// optionLabel is the option of q labelled s, in any case.
func optionLabel(q Question, s string) (string, bool) {
	for _, o := range q.Options {
		if strings.EqualFold(strings.TrimSpace(o.Label), strings.TrimSpace(s)) {
			return o.Label, true
		}
	}
	return "", false
}
