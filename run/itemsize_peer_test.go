//go:build realcli

package run

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// peerTruncate is blobhub-worker's truncate_item, run by the peer's
// interpreter on items given as JSON lines; it answers one JSON line per
// item: {item, too_large}.
const peerTruncate = `
import json, sys
from blobhub_worker.thread_agent.truncate import truncate_item
for line in sys.stdin:
    req = json.loads(line)
    item, too_large = truncate_item(req["item"], local_log=req["local_log"])
    print(json.dumps({"item": item, "too_large": too_large}))
`

// TestFitAsPeer: fitItem cuts as blobhub-worker's truncate_item cuts the
// same items: the same fields, the same excerpts and markers, the same
// pointer to thread.log (the tool's input, a JSON object, is compared by
// its field list only: the worker writes it with Python's separators).
func TestFitAsPeer(t *testing.T) {
	big := strings.Repeat("é", 30_000) + strings.Repeat("x", 20_000) + "😀"
	in, _ := json.Marshal(map[string]any{"command": big})
	withText := agent.ToolCallItem("Bash", "toolu_4", in, "x")
	withText.Meta["text"] = big
	items := []agent.Item{
		agent.ToolResultItem("toolu_1", big, false),
		agent.ToolResultItem("toolu_1", strings.Repeat("abcdefghij", 9_000), true),
		agent.ThinkingItem(big),
		agent.TextItem(big),
		agent.TextItem(strings.Repeat("<&>", 30_000)),
		withText,
		agent.TextItem("small"),
	}
	var stdin bytes.Buffer
	for _, it := range items {
		b, _ := json.Marshal(map[string]any{"item": map[string]any{
			"content": []map[string]any{{"type": "text", "text": it.Brief}}, "metadata": it.Meta}, "local_log": testLogRef})
		stdin.Write(append(b, '\n'))
	}
	out, _ := agenttest.RunPeer(t, "the peer's truncate_item", &stdin, "-c", peerTruncate)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(items) {
		t.Fatalf("%d answers for %d items", len(lines), len(items))
	}
	for i, it := range items {
		var peer struct {
			Item struct {
				Content  []struct{ Text string } `json:"content"`
				Metadata map[string]any          `json:"metadata"`
			} `json:"item"`
			TooLarge bool `json:"too_large"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &peer); err != nil {
			t.Fatal(err)
		}
		got := fitItem(it, ItemBudget, testLogRef)
		var ours map[string]any
		b, _ := json.Marshal(got.Meta)
		_ = json.Unmarshal(b, &ours)
		pm := peer.Item.Metadata
		if got.Brief != peer.Item.Content[0].Text {
			t.Errorf("item %d: text block %.60q…, the peer's %.60q…", i, got.Brief, peer.Item.Content[0].Text)
		}
		for _, k := range []string{"truncated", "truncated_fields", "local_log", "text"} {
			if !equalJSON(ours[k], pm[k]) {
				t.Errorf("item %d: %s %.80v, the peer's %.80v", i, k, ours[k], pm[k])
			}
		}
		ot, _ := ours["tool"].(map[string]any)
		pt, _ := pm["tool"].(map[string]any)
		if !equalJSON(ot["output"], pt["output"]) {
			t.Errorf("item %d: tool.output %.80v, the peer's %.80v", i, ot["output"], pt["output"])
		}
		if peer.TooLarge {
			t.Errorf("item %d: the peer found it too large after cutting", i)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
