package agenttest

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// LogBuffer is a thread.log in memory, safe for the adapter's goroutines:
// pass Log() as Launch.Log and read the lines back by stream.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// OnLine, when set before the first line, is called with each line's
	// stream and text as it is written.
	OnLine func(stream, text string)
}

// Log is the *agent.Log that writes here.
func (l *LogBuffer) Log() *agent.Log { return agent.NewLog(l) }

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	f := l.OnLine
	l.mu.Unlock()
	if f != nil {
		if _, stream, text, ok := agent.ParseLogLine(strings.TrimSuffix(string(p), "\n")); ok {
			f(stream, text)
		}
	}
	return len(p), nil
}

// FailureLog is a LogBuffer that t logs as its thread.log when it fails.
func FailureLog(t testing.TB) *LogBuffer {
	log := &LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("thread.log:\n%s", log.String())
		}
	})
	return log
}

// String is the whole log.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines are the texts of the lines of stream, in order.
func (l *LogBuffer) Lines(stream string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if _, s, text, ok := agent.ParseLogLine(line); ok && s == stream {
			out = append(out, text)
		}
	}
	return out
}

// Signal returns a channel closed the first time a line of stream is
// written (set before the adapter starts writing).
func (l *LogBuffer) Signal(stream string) <-chan struct{} {
	hit := make(chan struct{})
	var once sync.Once
	prev := l.OnLine
	l.OnLine = func(s, text string) {
		if prev != nil {
			prev(s, text)
		}
		if s == stream {
			once.Do(func() { close(hit) })
		}
	}
	return hit
}
