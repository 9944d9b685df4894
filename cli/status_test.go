package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/run"
)

// TestTerminalLine draws the status line by hand (no goroutine, no TTY):
// nothing before the agent starts, the stage and the open call while it
// works, erased before a log record and redrawn after, -v items printed
// one line each above it, cut to the width, and erased at the end.
func TestTerminalLine(t *testing.T) {
	var out bytes.Buffer
	tm := &terminal{out: &out, width: func() int { return 60 }, verbose: true, alias: "demo/t1", start: time.Now().Add(-75 * time.Second)}
	flush := func() string {
		t.Helper()
		out.Reset()
		tm.mu.Lock()
		tm.flushLocked(true)
		tm.mu.Unlock()
		return out.String()
	}
	if got := flush(); got != "" {
		t.Fatalf("before the agent starts: %q, want nothing", got)
	}
	tm.Progress(run.Progress{Stage: run.StageModel})
	if got := flush(); got != "⋯ demo/t1 1:15 · waiting on the model · 0 items posted" {
		t.Fatalf("model: %q", got)
	}
	if got := flush(); got != "" {
		t.Fatalf("an unchanged line is drawn again: %q", got)
	}
	meta, _ := json.Marshal(map[string]any{"type": "tool_call"})
	tm.Posted("demo/t1", blobhub.Item{ID: "itm_1", CreatedAt: "2026-05-04T09:12:03Z", Content: []blobhub.Block{{Type: "text", Text: "Bash → sleep 5\nsecond line"}}, Metadata: meta})
	tm.Progress(run.Progress{Stage: run.StageTool, Tool: "Bash → sleep 5\necho hi", ItemsPosted: 1})
	got := flush()
	want := clearLine + "[tool_call] Bash → sleep 5 …\n" + "⋯ demo/t1 1:15 · waiting on a tool: Bash → sleep 5 echo hi · …"
	if i := strings.Index(got, "[tool_call]"); i < 0 || !strings.HasPrefix(got, clearLine) || !strings.HasSuffix(got, "…") {
		t.Fatalf("-v item and tool line: %q\nwant like %q", got, want)
	}
	line := got[strings.LastIndex(got, "\n")+1:]
	if n := len([]rune(line)); n != 59 {
		t.Errorf("the line is %d runes wide, want 59 (the width less one): %q", n, line)
	}
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "⋯ demo/t1 1:15 · waiting on a tool: Bash → sleep 5 echo hi") {
		t.Errorf("tool line %q", line)
	}

	out.Reset()
	if _, err := tm.Write([]byte("11:30AM INF a log record\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != clearLine+"11:30AM INF a log record\n" {
		t.Errorf("a log record: %q, want the line erased first", got)
	}
	if got := flush(); !strings.HasPrefix(got, "⋯ demo/t1") {
		t.Errorf("after a log record the line is not drawn again: %q", got)
	}

	// Stop with the loop never started: erase what is drawn.
	tm.running, tm.stop, tm.stopped = true, make(chan struct{}), make(chan struct{})
	close(tm.stopped)
	out.Reset()
	tm.Stop()
	if got := out.String(); got != clearLine {
		t.Errorf("stop: %q, want the line erased", got)
	}
}

// TestTerminalOnlyOnATerminal: a pipe, a file or a buffer gets no status
// line (cron, systemd, CI), and a run whose stderr is a file writes none
// of it, -v or not.
func TestTerminalOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]any{"file": f, "pipe": w, "buffer": &bytes.Buffer{}} {
		w := out.(io.Writer)
		if tm := newTerminal(w, w, true); tm != nil {
			t.Errorf("%s: a status line on what is no terminal", name)
		}
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00", 59 * time.Second: "0:59", 61 * time.Second: "1:01", 3725 * time.Second: "1:02:05"} {
		if got := elapsed(d); got != want {
			t.Errorf("elapsed(%v) = %q, want %q", d, got, want)
		}
	}
}
