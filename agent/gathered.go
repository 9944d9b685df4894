package agent

import (
	"fmt"
	"unicode/utf8"
)

// MaxGathered bounds the text an adapter gathers into one item from the
// pieces an agent streams (an ACP agent's message chunks): about what an
// item can carry once posted (run posts at most 350 KiB an item). The
// head and the tail are kept, the middle only counted; thread.log has
// every piece as the agent sent it.
const MaxGathered = 320 << 10

// Gathered is text gathered piece by piece, never holding much more than
// MaxGathered: a model that streams a message of gigabytes costs no more
// memory than one of a few hundred kilobytes. The zero value is empty.
type Gathered struct {
	head  []byte // the first MaxGathered/2 bytes
	tail  []byte // at least the last MaxGathered/2 bytes past head, at most three times that
	total int    // bytes written since the last Reset
}

// WriteString adds s.
func (g *Gathered) WriteString(s string) {
	const half = MaxGathered / 2
	g.total += len(s)
	if room := half - len(g.head); room > 0 {
		n := min(room, len(s))
		g.head = append(g.head, s[:n]...)
		s = s[n:]
	}
	switch {
	case s == "":
	case len(s) >= half:
		g.tail = append(g.tail[:0], s[len(s)-half:]...)
	default:
		g.tail = append(g.tail, s...)
		if len(g.tail) > 2*half {
			g.tail = append(g.tail[:0], g.tail[len(g.tail)-half:]...)
		}
	}
}

// Len is how many bytes were written since the last Reset, cut or not.
func (g *Gathered) Len() int { return g.total }

// Cut reports whether some of the text was not kept.
func (g *Gathered) Cut() bool { return g.total > len(g.head)+len(g.tail) }

// String is the text; when it was cut, its head and tail around a line
// that says how much is missing and where the whole is.
func (g *Gathered) String() string {
	if !g.Cut() {
		return string(g.head) + string(g.tail)
	}
	const half = MaxGathered / 2
	head, tail := g.head, g.tail[max(0, len(g.tail)-half):]
	// Cut on rune boundaries.
	if i := lastRuneStart(head); i < len(head) && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	missing := g.total - len(head) - len(tail)
	return fmt.Sprintf("%s\n…[%d bytes cut: the message was longer than an item carries; thread.log has it whole]…\n%s", head, missing, tail)
}

func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// Mark notes on it, an item made of g's text, that the text was cut and
// how long it was whole; it is returned unchanged when nothing was cut.
func (g *Gathered) Mark(it Item) Item {
	if g.Cut() {
		it.Meta["truncated"] = true
		it.Meta["original_bytes"] = g.total
	}
	return it
}

// Reset empties g, keeping its memory for the next text.
func (g *Gathered) Reset() {
	g.head, g.tail, g.total = g.head[:0], g.tail[:0], 0
}
