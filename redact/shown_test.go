package redact

import "testing"

// TestShown: a field has every control escaped, newline and tab included;
// text keeps its newlines and tabs; C1 and the bidirectional controls are
// \u escapes, a byte that is not UTF-8 a \x one; clean text is returned as
// it is.
func TestShown(t *testing.T) {
	for _, tc := range []struct{ in, field, text string }{
		{"plain text é", "plain text é", "plain text é"},
		{"a\nb\tc", `a\x0ab\x09c`, "a\nb\tc"},
		{"\x1b]52;c;x\x07", `\x1b]52;c;x\x07`, `\x1b]52;c;x\x07`},
		{"del\x7f c1\u009b", `del\x7f c1\u009b`, `del\x7f c1\u009b`},
		{"\u202etxt.exe\u2066", `\u202etxt.exe\u2066`, `\u202etxt.exe\u2066`},
		{"bad\xff", `bad\xff`, `bad\xff`},
	} {
		if got := Shown(tc.in); got != tc.field {
			t.Errorf("Shown(%q) = %q, want %q", tc.in, got, tc.field)
		}
		if got := ShownText(tc.in); got != tc.text {
			t.Errorf("ShownText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// TestShownJSON: DEL, C1 and the bidirectional controls become \u escapes;
// JSON without them is returned as it is.
func TestShownJSON(t *testing.T) {
	if got := string(ShownJSON([]byte("{\"a\":\"x\x7f\u0085\u2067\"}"))); got != `{"a":"x\u007f\u0085\u2067"}` {
		t.Errorf("ShownJSON = %s", got)
	}
	if in := []byte(`{"a":"é\n"}`); string(ShownJSON(in)) != string(in) {
		t.Errorf("clean JSON changed: %s", ShownJSON(in))
	}
}
