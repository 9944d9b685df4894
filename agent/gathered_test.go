package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestGatheredBounded: text gathered far past MaxGathered, in small pieces
// or one huge one, never holds much more than the bound; it keeps head and
// tail, on rune boundaries, and says what was cut.
func TestGatheredBounded(t *testing.T) {
	for _, piece := range []int{1 << 10, 3<<10 + 1, 64 << 10, 8 << 20} {
		var g Gathered
		const total = 64 << 20
		p := strings.Repeat("é", piece/2) // two bytes a rune: cuts fall inside runes
		for n := 0; n < total; n += len(p) {
			g.WriteString(p)
			if held := cap(g.head) + cap(g.tail); held > 4*MaxGathered {
				t.Fatalf("pieces of %d: %d bytes held after %d written, over %d", piece, held, n, 4*MaxGathered)
			}
		}
		s := g.String()
		if !g.Cut() || g.Len() < total || len(s) > MaxGathered+200 || !utf8.ValidString(s) || !strings.Contains(s, "bytes cut") {
			t.Fatalf("pieces of %d: cut %v, len %d, text of %d bytes, valid %v", piece, g.Cut(), g.Len(), len(s), utf8.ValidString(s))
		}
		if it := g.Mark(TextItem(s)); it.Meta["truncated"] != true || it.Meta["original_bytes"] != g.Len() {
			t.Fatalf("marked %v", it.Meta)
		}
		g.Reset()
		g.WriteString("short")
		if g.Cut() || g.String() != "short" || g.Mark(TextItem("short")).Meta["truncated"] != nil {
			t.Fatalf("after Reset: %q cut %v", g.String(), g.Cut())
		}
	}
}
