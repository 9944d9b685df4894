package cli

// The live status line of a run at a terminal: one line on stderr,
// redrawn in place while the agent works, cleared before every log record
// and at the end. It is the run.Observer of `bhw-run <alias>` when stderr
// is a terminal; under cron, systemd or CI (stderr not a terminal) none is
// made and nothing of it is written.

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
)

// statusRedraw is how often the line is redrawn at most: often enough for
// the elapsed seconds, rarely enough to cost the relay nothing.
const statusRedraw = 250 * time.Millisecond

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// terminal is stderr at a terminal: the log records go through Write, the
// run's progress comes in through the run.Observer methods, and a goroutine
// draws the line from both. The observer methods only store: they are
// called on the relay's goroutines.
type terminal struct {
	out     io.Writer
	width   func() int // the terminal's columns
	verbose bool       // -v: print each item as it is posted

	mu      sync.Mutex
	alias   string
	start   time.Time
	p       run.Progress
	items   []blobhub.Item // posted, not yet printed (-v)
	waiting string         // what the run waits for before the agent (BlobHub retries)
	running bool           // between Start and Stop
	drawn   string         // the line on screen, "" when none
	stop    chan struct{}
	stopped chan struct{}
}

// newTerminal is the status line written to out (stderr, through the
// redaction of secrets) when raw, the real stderr, is a terminal; nil when
// it is not.
func newTerminal(out, raw io.Writer, verbose bool) *terminal {
	file, ok := raw.(*os.File)
	if !ok || !isTerminal(file) {
		return nil
	}
	width := func() int {
		if w, _, err := term.GetSize(int(file.Fd())); err == nil && w > 0 {
			return w
		}
		return 80
	}
	return &terminal{out: out, width: width, verbose: verbose}
}

// Write writes a log record above the status line: the line is erased
// first and drawn again at the next redraw.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.eraseLocked()
	return t.out.Write(p)
}

// Start begins the line for a run of alias; it is drawn once the run
// starts an agent.
func (t *terminal) Start(alias string) {
	t.mu.Lock()
	t.alias, t.start, t.running = alias, time.Now(), true
	t.stop, t.stopped = make(chan struct{}), make(chan struct{})
	t.mu.Unlock()
	go t.loop()
}

// Stop prints what is left (-v) and erases the line for good.
func (t *terminal) Stop() {
	t.mu.Lock()
	if !t.running {
		t.mu.Unlock()
		return
	}
	t.running = false
	close(t.stop)
	t.mu.Unlock()
	<-t.stopped
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
}

// Progress is run.Observer's: keep it for the next redraw.
func (t *terminal) Progress(p run.Progress) {
	t.mu.Lock()
	t.p, t.waiting = p, ""
	t.mu.Unlock()
}

// Retrying is the BlobHub client's OnRetry: the line says what the run
// waits for, so a BlobHub out of reach does not look like a hang.
func (t *terminal) Retrying(r blobhub.Retry) {
	t.mu.Lock()
	t.waiting = fmt.Sprintf("BlobHub unreachable: %s; retry %d, gives up in %s", r.Reason, r.Attempt, elapsed(r.Left+r.Wait))
	t.mu.Unlock()
}

// Posted is run.Observer's: with -v the item is printed at the next
// redraw, above the line.
func (t *terminal) Posted(_ string, it blobhub.Item) {
	if !t.verbose {
		return
	}
	t.mu.Lock()
	t.items = append(t.items, it)
	t.mu.Unlock()
}

func (t *terminal) loop() {
	defer close(t.stopped)
	tick := time.NewTicker(statusRedraw)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.mu.Lock()
			t.flushLocked(true)
			t.mu.Unlock()
		}
	}
}

// flushLocked prints the items waiting (-v) and, when draw is set, the
// status line, in one write: the line changes only here, a few times a
// second at most.
func (t *terminal) flushLocked(draw bool) {
	line := ""
	if draw && (t.p.Stage != "" || t.waiting != "") {
		line = t.lineLocked()
	}
	if len(t.items) == 0 && line == t.drawn {
		return
	}
	var b strings.Builder
	if t.drawn != "" {
		b.WriteString(clearLine)
	}
	for _, it := range t.items {
		// One line an item: the first of what `thread show` prints.
		first, rest, more := strings.Cut(renderItem(it), "\n")
		b.WriteString(first)
		if more && strings.TrimSpace(rest) != "" {
			b.WriteString(" …")
		}
		b.WriteByte('\n')
	}
	t.items = t.items[:0]
	b.WriteString(line)
	t.drawn = line
	_, _ = io.WriteString(t.out, b.String())
}

func (t *terminal) eraseLocked() {
	if t.drawn != "" {
		_, _ = io.WriteString(t.out, clearLine)
		t.drawn = ""
	}
}

// lineLocked is the status line: the alias, the time since the run
// started, what it waits on and the items posted, cut to the terminal's
// width (a line that wraps could not be erased in place).
func (t *terminal) lineLocked() string {
	what := string(t.p.Stage)
	if t.p.Tool != "" {
		what += ": " + t.p.Tool
	}
	if t.waiting != "" {
		what = t.waiting
	}
	items := "items"
	if t.p.ItemsPosted == 1 {
		items = "item"
	}
	s := fmt.Sprintf("⋯ %s %s · %s · %d %s posted", t.alias, elapsed(time.Since(t.start)), what, t.p.ItemsPosted, items)
	// A call's brief is the agent's text: one line, its controls escaped.
	s = redact.Shown(strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s))
	if w := t.width() - 1; utf8.RuneCountInString(s) > w {
		s = string([]rune(s)[:max(w-1, 0)]) + "…"
	}
	return s
}

// elapsed is d as m:ss, or h:mm:ss from an hour on.
func elapsed(d time.Duration) string {
	s := int(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// itemLog is the observer of a run with -v whose stderr is no terminal:
// each item posted is one debug record, in the format of the other logs.
type itemLog struct{ log *slog.Logger }

func (itemLog) Progress(run.Progress) {}

func (l itemLog) Posted(target string, it blobhub.Item) {
	var meta struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(it.Metadata, &meta)
	brief := ""
	if len(it.Content) > 0 {
		brief = agent.Shorten(it.Content[0].Text, 200)
	}
	l.log.Debug("item posted", "thread", target, "item_id", it.ID, "type", meta.Type, "brief", brief)
}
