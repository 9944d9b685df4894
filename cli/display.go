package cli

// What a person reads at a terminal: wire text (items, envelopes, aliases,
// error messages that quote them) is printed with its control characters
// escaped, so an item cannot write to the clipboard (OSC 52), clear the
// screen or forge a line, nor, with a bidirectional override or isolate,
// show its characters in another order than they are (an alias, a path or
// a command that reads as something else). --json stays the same JSON
// (run.ShownJSON only spells DEL, the C1 controls and the bidirectional
// ones, which encoding/json leaves raw, as \u escapes), and --print0 stays
// exact.

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/run"
)

// shown is one field of a human line: every control character escaped, a
// newline and a tab included.
func shown(s string) string { return escapeControls(s, false) }

// shownText is text of several lines: newlines and tabs kept, every other
// control character escaped.
func shownText(s string) string { return escapeControls(s, true) }

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
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || run.BidiControl(r)
}

// escapeAttr is the text log handler's ReplaceAttr: on a terminal the
// records (the message and every string or error value, which may quote
// the wire) are escaped as shownText; tint quotes a value's newline itself.
func escapeAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		if s := v.String(); shownText(s) != s {
			a.Value = slog.StringValue(shownText(s))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && shownText(err.Error()) != err.Error() {
			a.Value = slog.StringValue(shownText(err.Error()))
		}
	}
	return a
}
