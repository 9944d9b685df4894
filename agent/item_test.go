package agent

import (
	"strings"
	"testing"
	"time"
)

// A ULID's first ten characters are its milliseconds in Crockford's base
// 32, so ids made later sort later.
func TestULIDTime(t *testing.T) {
	at := time.UnixMilli(1_790_000_000_123)
	id := newULID(at)
	if len(id) != 26 {
		t.Fatalf("ulid %q has %d characters, want 26", id, len(id))
	}
	var ms int64
	for _, c := range id[:10] {
		ms = ms<<5 | int64(strings.IndexRune(crockford, c))
	}
	if ms != at.UnixMilli() {
		t.Fatalf("ulid %q carries %d ms, want %d", id, ms, at.UnixMilli())
	}
	if later := newULID(at.Add(time.Millisecond)); later <= id {
		t.Fatalf("ulid %q made a millisecond later does not sort after %q", later, id)
	}
	if !strings.HasPrefix(NewPostID(), "pst_") || !strings.HasPrefix(NewPromptID(), "prm_") {
		t.Fatalf("ids %q %q lack their prefixes", NewPostID(), NewPromptID())
	}
}

// A status item is flat, as blobhub-worker posts it: the token is
// metadata.status, the text metadata.detail; extra fields never replace them.
func TestStatusItemShape(t *testing.T) {
	it := StatusItem("api_retry", "retry 1 of 3", map[string]any{"attempt": 1, "status": "x", "type": "y"})
	if it.Meta["type"] != ItemStatus || it.Meta["status"] != "api_retry" || it.Meta["detail"] != "retry 1 of 3" || it.Meta["attempt"] != 1 {
		t.Fatalf("status item metadata %v", it.Meta)
	}
}

func TestTurnEndItemShape(t *testing.T) {
	r := TurnResult{Usage: Usage{InputTokens: 10, InputTokensCached: 4, OutputTokens: 3}, DurationMS: 7, ErrorText: "boom"}
	it := TurnEndItem("stalled", r, ToolCounts{})
	stats, _ := it.Meta["stats"].(map[string]any)
	if it.Meta["status"] != "failed" || it.Meta["outcome"] != "stalled" || it.Meta["error"] != "boom" ||
		stats["input_tokens"] != int64(10) || stats["input_tokens_cached"] != int64(4) || stats["output_tokens"] != int64(3) || stats["duration_ms"] != int64(7) {
		t.Fatalf("turn_end metadata %v", it.Meta)
	}
	if _, ok := it.Meta["usage"]; ok {
		t.Fatalf("turn_end still carries usage: %v", it.Meta)
	}
}
