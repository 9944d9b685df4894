package redact

// What a person reads at a terminal: wire text (items, envelopes, aliases,
// error messages that quote them) is shown with its control characters
// escaped, so it cannot write to the clipboard (OSC 52), clear the screen
// or forge a line, nor, with a bidirectional override or isolate, show its
// characters in another order than they are. JSON stays the same JSON
// value (ShownJSON).

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ShownJSON is encoded JSON with DEL, the C1 controls and the
// bidirectional ones written as \u escapes: the same JSON value, and
// nothing a terminal acts on (encoding/json already escapes the C0
// controls). They can only stand inside strings. It is what bhw-run writes
// where a person may read JSON in a terminal: --json, the JSON log
// records, section.log.
func ShownJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, jsonRaw) {
		return b
	}
	var out strings.Builder
	for _, r := range string(b) {
		if jsonRaw(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}

// jsonRaw reports a character a terminal acts on that encoding/json
// leaves as it is.
func jsonRaw(r rune) bool { return r == 0x7f || (r >= 0x80 && r < 0xa0) || BidiControl(r) }

// BidiControl reports the explicit bidirectional formatting characters:
// the embeddings and overrides (U+202A–U+202E) and the isolates
// (U+2066–U+2069), which reorder the text after them on a terminal that
// lays out bidirectional text (a path or a command then reads as
// something else). Right-to-left text itself needs none of them.
func BidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Shown is one field of a human line: every control character escaped, a
// newline and a tab included.
func Shown(s string) string { return escapeControls(s, false) }

// ShownText is text of several lines: newlines and tabs kept, every other
// control character escaped.
func ShownText(s string) string { return escapeControls(s, true) }

// escapeControls writes the C0 controls (ESC among them), DEL, the C1
// controls and the bidirectional ones as \xNN or \uNNNN, and a byte that
// is not UTF-8 as \xNN; keep leaves \n and \t as they are.
func escapeControls(s string, keep bool) string {
	clean := true
	for i := 0; i < len(s) && clean; {
		r, n := utf8.DecodeRuneInString(s[i:])
		clean = !control(r, n, keep)
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case control(r, n, keep) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case control(r, n, keep):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func control(r rune, n int, keep bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case keep && (r == '\n' || r == '\t'):
		return false
	}
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || BidiControl(r)
}
