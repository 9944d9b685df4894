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
// newline. One Write per line, under one lock, so lines from several
// goroutines never interleave. A nil *Log discards.
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
