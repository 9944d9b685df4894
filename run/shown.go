package run

import (
	"bytes"
	"fmt"
	"strings"
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
