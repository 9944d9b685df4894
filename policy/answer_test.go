package policy

import (
	"reflect"
	"testing"
)

func TestParseApproval(t *testing.T) {
	yes := []string{"yes", "Y", "y", "approve", "Approved.", "ALLOW", "ok", "OK!", "1", "  yes  \n", "yes!!", "ok."}
	for _, s := range yes {
		if ok, reason := ParseApproval(s); !ok || reason != "" {
			t.Errorf("%q: approved=%v reason=%q, want approved", s, ok, reason)
		}
	}
	no := map[string]string{
		"no":                        "no",
		"yes, but not on prod":      "yes, but not on prod",
		"yes please":                "yes please",
		"okay":                      "okay",
		"2":                         "2",
		"deny":                      "deny",
		"":                          "",
		"  don't touch /etc  ":      "don't touch /etc",
		"¿yes":                      "¿yes",
		"approve\nbut log it first": "approve\nbut log it first",
		"11":                        "11",
	}
	for s, wantReason := range no {
		if ok, reason := ParseApproval(s); ok || reason != wantReason {
			t.Errorf("%q: approved=%v reason=%q, want denied with %q", s, ok, reason, wantReason)
		}
	}
}

func TestParseQuestionAnswers(t *testing.T) {
	target := Question{Question: "Which target?", Options: []Option{{Label: "staging"}, {Label: "production"}}}
	numbered := Question{Question: "How many?", Options: []Option{{Label: "2"}, {Label: "1"}, {Label: "3"}}}
	langs := Question{Question: "Languages?", MultiSelect: true, Options: []Option{{Label: "Go"}, {Label: "Rust"}, {Label: "Yes, both"}}}
	open := Question{Question: "Anything else?"}

	cases := []struct {
		name string
		qs   []Question
		text string
		want []Answer
	}{
		{"number", []Question{target}, "2", []Answer{{Question: "Which target?", Labels: []string{"production"}}}},
		{"label any case", []Question{target}, "  Production ", []Answer{{Question: "Which target?", Labels: []string{"production"}}}},
		{"label with trailing punctuation", []Question{target}, "staging.", []Answer{{Question: "Which target?", Labels: []string{"staging"}}}},
		{"number out of range is free text", []Question{target}, "3", []Answer{{Question: "Which target?", Free: "3"}}},
		{"free text", []Question{target}, "neither, wait for me", []Answer{{Question: "Which target?", Free: "neither, wait for me"}}},
		{"one question takes the whole text", []Question{target}, "staging\nbut only after lunch", []Answer{{Question: "Which target?", Free: "staging\nbut only after lunch"}}},
		{"numbers win over labels", []Question{numbered}, "1", []Answer{{Question: "How many?", Labels: []string{"2"}}}},
		{"multi numbers", []Question{langs}, "1, 2", []Answer{{Question: "Languages?", Labels: []string{"Go", "Rust"}}}},
		{"multi labels and numbers mixed, deduplicated", []Question{langs}, "rust,1,Rust", []Answer{{Question: "Languages?", Labels: []string{"Rust", "Go"}}}},
		{"multi label holding a comma", []Question{langs}, "yes, both", []Answer{{Question: "Languages?", Labels: []string{"Yes, both"}}}},
		{"multi single pick", []Question{langs}, "go", []Answer{{Question: "Languages?", Labels: []string{"Go"}}}},
		{"multi with an unknown item is free text", []Question{langs}, "Go, Zig", []Answer{{Question: "Languages?", Free: "Go, Zig"}}},
		{"single select does not split commas", []Question{target}, "1,2", []Answer{{Question: "Which target?", Free: "1,2"}}},
		{"no options", []Question{open}, "1", []Answer{{Question: "Anything else?", Free: "1"}}},
		{"one line per question, blank lines ignored", []Question{target, langs, open}, "\n2\n\n  1,2  \nship it\n",
			[]Answer{{Question: "Which target?", Labels: []string{"production"}}, {Question: "Languages?", Labels: []string{"Go", "Rust"}}, {Question: "Anything else?", Free: "ship it"}}},
		{"missing lines leave answers empty", []Question{target, open}, "staging",
			[]Answer{{Question: "Which target?", Labels: []string{"staging"}}, {Question: "Anything else?"}}},
		{"extra lines join the last answer", []Question{target, open}, "1\nfirst\nsecond",
			[]Answer{{Question: "Which target?", Labels: []string{"staging"}}, {Question: "Anything else?", Free: "first\nsecond"}}},
		{"empty reply", []Question{target}, "   ", []Answer{{Question: "Which target?"}}},
		{"no questions", nil, "yes", []Answer{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ParseQuestionAnswers(c.qs, c.text)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v\nwant %#v", got, c.want)
			}
		})
	}
}

func TestFormatAnswers(t *testing.T) {
	qs := []Question{{Question: "Which target?"}, {Question: "Languages?"}, {Question: "Anything else?"}, {Question: "Skipped?"}}
	answers := []Answer{
		{Question: "Which target?", Labels: []string{"production"}},
		{Question: "Languages?", Labels: []string{"Go", "Rust"}},
		{Question: "Anything else?", Free: "ship it"},
	}
	want := `The person answered: "Which target?" = production
The person answered: "Languages?" = Go, Rust
The person answered: "Anything else?" = ship it
The person answered: "Skipped?" = (no answer)`
	if got := FormatAnswers(qs, answers); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	one := []Question{{Question: "Which target?", Options: []Option{{Label: "staging"}, {Label: "production"}}}}
	if got := FormatAnswers(one, ParseQuestionAnswers(one, "2")); got != `The person answered: "Which target?" = production` {
		t.Errorf("got %q", got)
	}
}
