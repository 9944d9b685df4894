package cli

// What a person reads at a terminal: wire text (items, envelopes, aliases,
// error messages that quote them) is printed with its control characters
// escaped, so an item cannot write to the clipboard (OSC 52), clear the
// screen or forge a line, nor, with a bidirectional override or isolate,
// show its characters in another order than they are (an alias, a path or
// a command that reads as something else): redact.Shown and
// redact.ShownText. --json stays the same JSON (redact.ShownJSON only
// spells DEL, the C1 controls and the bidirectional ones, which
// encoding/json leaves raw, as \u escapes), and --print0 stays exact.

import (
	"log/slog"

	"github.com/blobhub/bhw-run/redact"
)

// escapeAttr is the text log handler's ReplaceAttr: on a terminal the
// records (the message and every string or error value, which may quote
// the wire) are escaped as redact.ShownText; tint quotes a value's newline itself.
func escapeAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		if s := v.String(); redact.ShownText(s) != s {
			a.Value = slog.StringValue(redact.ShownText(s))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok && redact.ShownText(err.Error()) != err.Error() {
			a.Value = slog.StringValue(redact.ShownText(err.Error()))
		}
	}
	return a
}
