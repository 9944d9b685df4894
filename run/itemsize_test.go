package run

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
)

const testLogRef = "job/threads/th/logs/thread.log"

// TestFit: every item is fitted under the 60 KiB budget (measured as the
// server measures, non-ASCII as its escapes); blobhub-worker's ladder
// names the fields it cut and where the whole item is, and what is left
// of a cut field is its head and tail around the pointer.
func TestFit(t *testing.T) {
	big := strings.Repeat("é", 300_000) // 600 KB of two-byte runes
	ascii := strings.Repeat("abcdefghij", 9_000)
	bigIn, _ := json.Marshal(map[string]any{"command": ascii})
	cases := []struct {
		name   string
		it     agent.Item
		fields []string
	}{
		{"tool output", agent.ToolResultItem("toolu_1", big, false), []string{"metadata.tool.output"}},
		{"90 KB of ASCII output", agent.ToolResultItem("toolu_1", ascii, false), []string{"metadata.tool.output"}},
		{"tool input", agent.ToolCallItem("Bash", "toolu_3", bigIn, "x"), []string{"metadata.tool.input"}},
		{"thinking", agent.ThinkingItem(big), []string{"metadata.text"}},
		{"brief", agent.TextItem(big), []string{"content[0].text"}},
		{"many small strings", func() agent.Item {
			var parts []string
			for i := 0; i < 60_000; i++ {
				parts = append(parts, "abcdefgh")
			}
			in, _ := json.Marshal(map[string]any{"parts": parts})
			return agent.ToolCallItem("Bash", "toolu_2", in, "x")
		}(), []string{"metadata.tool.input"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fitItem(tc.it, ItemBudget, testLogRef)
			if n := itemSize(got); n > ItemBudget || ItemBudget != 60*1024 {
				t.Fatalf("size %d, budget %d: want at most 60 KiB", n, ItemBudget)
			}
			if got.Meta["truncated"] != true || got.Meta["local_log"] != testLogRef {
				t.Fatalf("markers: truncated %v local_log %v", got.Meta["truncated"], got.Meta["local_log"])
			}
			var fields []string
			b, _ := json.Marshal(got.Meta["truncated_fields"])
			_ = json.Unmarshal(b, &fields)
			if !slices.Equal(fields, tc.fields) {
				t.Fatalf("truncated_fields %v, want %v", fields, tc.fields)
			}
			if got.Type() != tc.it.Type() {
				t.Fatalf("type %q", got.Type())
			}
			b, _ = json.Marshal(got.Meta)
			if !utf8.Valid(b) || !utf8.ValidString(got.Brief) {
				t.Fatal("truncation split a rune")
			}
			if !strings.Contains(string(b)+got.Brief, "bytes; see "+testLogRef+"]…") {
				t.Fatal("no pointer to thread.log")
			}
		})
	}
	t.Run("excerpt", func(t *testing.T) {
		out := strings.Repeat("h", 5000) + strings.Repeat("m", 80_000) + strings.Repeat("t", 3000)
		got := fitItem(agent.ToolResultItem("toolu_1", out, false), ItemBudget, testLogRef)
		want := strings.Repeat("h", 4096) + "…[truncated 88000 bytes; see " + testLogRef + "]…" + strings.Repeat("t", 2048)
		if s := got.Meta["tool"].(map[string]any)["output"]; s != want {
			t.Fatalf("output %.80q…, want head 4096, pointer, tail 2048", s)
		}
	})
	t.Run("dropped", func(t *testing.T) {
		// Four fields of 20,000 characters above U+FFFF each: excerpts
		// of all four are still over, so each becomes the dropped marker.
		huge := strings.Repeat("😀", 20_000)
		in, _ := json.Marshal(map[string]any{"command": huge})
		it := agent.ToolCallItem("Bash", "toolu_4", in, huge)
		it.Meta["text"] = huge
		it.Meta["tool"].(map[string]any)["output"] = huge
		got := fitItem(it, ItemBudget, testLogRef)
		if n := itemSize(got); n > ItemBudget {
			t.Fatalf("size %d over the budget", n)
		}
		if got.Meta["text"] != "…[dropped; see "+testLogRef+"]…" {
			t.Fatalf("text %.80q, want the dropped marker", got.Meta["text"])
		}
	})
	small := agent.TextItem("hi")
	if got := fitItem(small, ItemBudget, testLogRef); got.Meta["truncated"] != nil {
		t.Fatal("a small item was marked truncated")
	}
	if blobhub.MaxItemBytes != 64*1024 {
		t.Fatalf("cap %d, want 64 KiB", blobhub.MaxItemBytes)
	}
}
