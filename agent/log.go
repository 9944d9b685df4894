package agent

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Streams of a thread.log line.
const (
	StreamStdin   = "stdin"   // a line bhw-run wrote to the agent
	StreamStdout  = "stdout"  // a line the agent printed
	StreamStderr  = "stderr"  // a line of the agent's stderr
	StreamAdapter = "adapter" // the adapter's note: the command started, its exit, a line it skipped
	StreamRun     = "run"     // bhw-run's own record: items emitted, gate decisions, parking, artifacts
)

// Log is a thread's thread.log. Every agent and run itself write it in one
// line format:
//
//	<time> <stream> <text>
//
// time is RFC 3339 in UTC with nanoseconds, stream one of the Stream*
// names, text the line as it crossed the pipe (or the note), without its
// newline, with the control characters a terminal acts on escaped (see
// escapeControls): a person reads thread.log with tail or cat, and a
// command's output in an agent's stderr must not write the clipboard or
// the screen there. One Write per line, under one lock, so lines from
// several goroutines never interleave. A nil *Log discards.
type Log struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewLog writes thread.log lines to w (nil: nowhere).
func NewLog(w io.Writer) *Log { return &Log{w: w, now: time.Now} }

// Line writes one line of stream.
func (l *Log) Line(stream string, text []byte) {
	if l == nil || l.w == nil {
		return
	}
	text = escapeControls(text)
	ts := l.now().UTC().Format(time.RFC3339Nano)
	buf := make([]byte, 0, len(ts)+len(stream)+len(text)+3)
	buf = append(append(append(append(append(buf, ts...), ' '), stream...), ' '), text...)
	buf = append(buf, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(buf)
}

// Printf writes one formatted line of stream.
func (l *Log) Printf(stream, format string, args ...any) {
	if l == nil || l.w == nil {
		return
	}
	l.Line(stream, []byte(fmt.Sprintf(format, args...)))
}

// ParseLogLine splits a thread.log line into its time, stream and text; ok
// is false for a line not in the format.
func ParseLogLine(line string) (at time.Time, stream, text string, ok bool) {
	ts, rest, ok1 := strings.Cut(line, " ")
	stream, text, ok2 := strings.Cut(rest, " ")
	if !ok1 {
		return time.Time{}, "", "", false
	}
	if !ok2 {
		stream, text = rest, ""
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || stream == "" {
		return time.Time{}, "", "", false
	}
	return at, stream, text, true
}

// escapeControls spells the C0 controls but tab (ESC, CR among them) and DEL
// as \xNN, and the C1 controls as \u00NN; text without any is returned as
// it is. A JSON line keeps its value: C0 cannot stand raw in valid JSON,
// and C1, which JSON allows raw, only inside a string, where \u00NN is the
// same character.
func escapeControls(text []byte) []byte {
	i := 0
	for i < len(text) && controlAt(text, i) == 0 {
		i++
	}
	if i == len(text) {
		return text
	}
	const hex = "0123456789abcdef"
	out := make([]byte, i, len(text)+16)
	copy(out, text[:i])
	for i < len(text) {
		switch controlAt(text, i) {
		case 1:
			c := text[i]
			out = append(out, '\\', 'x', hex[c>>4], hex[c&0xf])
			i++
		case 2:
			c := text[i+1]
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i += 2
		default:
			out = append(out, text[i])
			i++
		}
	}
	return out
}

// controlAt is the length of the control character at text[i]: 1 for C0
// but tab and for DEL, 2 for C1 (U+0080–U+009F, 0xC2 0x80–0x9F in UTF-8),
// 0 for anything else.
func controlAt(text []byte, i int) int {
	switch c := text[i]; {
	case (c < 0x20 && c != '\t') || c == 0x7f:
		return 1
	case c == 0xc2 && i+1 < len(text) && text[i+1] >= 0x80 && text[i+1] < 0xa0:
		return 2
	}
	return 0
}
