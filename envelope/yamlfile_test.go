package envelope

import (
	"strings"
	"testing"
	"time"
)

// TestDecodeYAML: a file of the wrong shape is told apart from one that
// is not YAML, and the message names the line, the key, what it holds and
// what it should hold, in the file's terms.
func TestDecodeYAML(t *testing.T) {
	type shape struct {
		Name       string `yaml:"name"`
		Attachment struct {
			Status string      `yaml:"status"`
			Error  ErrorRecord `yaml:"error"`
		} `yaml:"attachment"`
		Events struct {
			LastProcessedAt *string `yaml:"last_processed_at"`
		} `yaml:"events"`
		Count int `yaml:"count"`
	}
	cases := []struct {
		body  string
		known bool
		want  string // "" = no error
	}{
		{"events: {last_processed_at: 2026-05-27T12:40:00Z}\n", false, ""},
		{"", false, ""},
		{"# only a comment\n", false, ""},
		{"other: ignored\n", false, ""},
		{"events:\n  - a\n", false, "does not have the expected shape: line 2: events is a list; it should be a mapping"},
		{"attachment: yes\n", false, `line 1: attachment is "yes"; it should be a mapping`},
		{"attachment:\n  status: [1]\n", false, "line 2: attachment.status is a list; it should be text"},
		{"count: many\nname: [x]\n", false, `line 1: count is "many"; it should be a whole number; line 2: name is a list; it should be text`},
		{"attachment: {status: [\n", false, "is not valid YAML: "},
		{"name: x\nnope: 1\n", true, "line 2: unknown key nope"},
		{"attachment:\n  nope: 1\n", true, "line 2: attachment has no key nope"},
	}
	for _, tc := range cases {
		var v shape
		err := DecodeYAML([]byte(tc.body), &v, tc.known)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "struct {"):
			t.Errorf("%q: %v names Go types", tc.body, err)
		}
	}
}

func TestStamp(t *testing.T) {
	at := time.Date(2026, 5, 27, 14, 35, 1, 999999999, time.FixedZone("CEST", 2*3600))
	if got := Stamp(at); got != "2026-05-27T12:35:01Z" {
		t.Fatalf("Stamp = %q", got)
	}
}

// TestDecodeYAMLManyProblems: a file of 12,000 wrong values is described
// by its first problems and a count of the rest, at once: each described
// problem walks the whole document.
func TestDecodeYAMLManyProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("workspace:\n  roots:\n")
	for range 12000 {
		b.WriteString("  - [1]\n")
	}
	var v struct {
		Workspace struct {
			Roots []string `yaml:"roots"`
		} `yaml:"workspace"`
	}
	t0 := time.Now()
	err := DecodeYAML([]byte(b.String()), &v, true)
	d := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "line 4: workspace.roots.[1] is a list; it should be text") ||
		!strings.Contains(err.Error(), "and 11980 more problems") {
		t.Fatalf("error %v", err)
	}
	if strings.Count(err.Error(), "; it should be") != maxShapeProblems {
		t.Errorf("%d problems described, want %d", strings.Count(err.Error(), "; it should be"), maxShapeProblems)
	}
	if d > 2*time.Second {
		t.Errorf("decoding took %s", d)
	}
}
