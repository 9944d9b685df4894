package agent

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogEscapesControls: what an agent prints reaches thread.log with the
// controls a terminal acts on escaped (ESC, CR, DEL, C1), tab and every
// other character as they were, a JSON line the same JSON value; a line
// without any is written byte for byte.
func TestLogEscapesControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text\twith a tab, ünïcode, 日本", "plain text\twith a tab, ünïcode, 日本"},
		{"\x1b]52;c;ZWNobyBwd25lZA==\x07copied", `\x1b]52;c;ZWNobyBwd25lZA==\x07copied`},
		{"\x1b[2mdim\x1b[0m over\rwritten\x7f", `\x1b[2mdim\x1b[0m over\x0dwritten\x7f`},
		{`{"text":"c1 ` + "\u009b" + `31m red"}`, `{"text":"c1 \u009b31m red"}`},
		{"\u00a0no-break space, \u00c2 and a lone \xc2", "\u00a0no-break space, \u00c2 and a lone \xc2"},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		l := NewLog(&buf)
		l.now = func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
		l.Line(StreamStderr, []byte(tc.in))
		_, stream, text, ok := ParseLogLine(strings.TrimSuffix(buf.String(), "\n"))
		if !ok || stream != StreamStderr || text != tc.want {
			t.Errorf("%q → %q %q (ok %v), want %q", tc.in, stream, text, ok, tc.want)
		}
	}
}

func BenchmarkLogLine(b *testing.B) {
	line := []byte(`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_1","command":"echo hi","aggregatedOutput":"hi\n","exitCode":0,"status":"completed"}}}`)
	l := NewLog(nopWriter{})
	for b.Loop() {
		l.Line(StreamStdout, line)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
