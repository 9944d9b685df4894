package run

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
)

func TestFit(t *testing.T) {
	big := strings.Repeat("é", 300_000) // 600 KB of two-byte runes
	cases := []struct {
		name string
		it   agent.Item
	}{
		{"tool output", agent.ToolResultItem("toolu_1", big, false)},
		{"thinking", agent.ThinkingItem(big)},
		{"brief", agent.TextItem(big)},
		{"many small strings", func() agent.Item {
			var parts []string
			for i := 0; i < 60_000; i++ {
				parts = append(parts, "abcdefgh")
			}
			in, _ := json.Marshal(map[string]any{"parts": parts})
			return agent.ToolCallItem("Bash", "toolu_2", in, "x")
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := itemSize(tc.it)
			got := fitItem(tc.it, ItemBudget)
			if n := itemSize(got); n > ItemBudget {
				t.Fatalf("size %d > budget", n)
			}
			if got.Meta["truncated"] != true || got.Meta["original_bytes"] != orig {
				t.Fatalf("markers: %v %v", got.Meta["truncated"], got.Meta["original_bytes"])
			}
			if got.Type() != tc.it.Type() {
				t.Fatalf("type %q", got.Type())
			}
			b, _ := json.Marshal(got.Meta)
			if !utf8.Valid(b) || !utf8.ValidString(got.Brief) {
				t.Fatal("truncation split a rune")
			}
			if !strings.Contains(string(b)+got.Brief, "…[truncated ") {
				t.Fatal("no truncation marker")
			}
		})
	}
	small := agent.TextItem("hi")
	if got := fitItem(small, ItemBudget); got.Meta["truncated"] != nil {
		t.Fatal("a small item was marked truncated")
	}
}
