package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/redact"
)

// TestJournalRedactsItems: an emission is redacted as it is journaled —
// the record on disk and the item the caller posts — whether the key is in
// its text or its metadata, and as JSON spells it (a key with a quote or
// <, which the encoding escapes); an item with no key in it keeps its
// metadata as it was given.
func TestJournalRedactsItems(t *testing.T) {
	keys := []string{"bhk_journal_key", `k"q<uoted`}
	j, err := openJournal(filepath.Join(t.TempDir(), "emissions.jsonl"), "n0")
	if err != nil {
		t.Fatal(err)
	}
	defer j.closeFile()
	j.secrets = redact.NewSecrets(keys...)
	for _, it := range []agent.Item{
		{Brief: "ran bhk_journal_key", Meta: map[string]any{"type": "text"}},
		{Brief: "ran it", Meta: map[string]any{"type": "tool_result", "tool": map[string]any{"output": `x k"q<uoted y`}}},
		{Brief: `k"q<uoted`, Meta: map[string]any{"type": "text"}},
	} {
		e, err := j.add("t/a", it, "")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(e.Item)
		for _, k := range keys {
			if strings.Contains(string(b), k) || strings.Contains(e.Item.Brief, k) {
				t.Errorf("the journaled item holds %s: %s", k, b)
			}
		}
	}
	plain := map[string]any{"type": "text", "n": 7}
	if e, err := j.add("t/a", agent.Item{Brief: "hi", Meta: plain}, ""); err != nil || e.Item.Meta["n"] != 7 {
		t.Fatalf("an item without keys was rebuilt: %#v (%v)", e.Item.Meta, err)
	}
	_ = j.closeFile()
	b, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		esc, _ := json.Marshal(k)
		if strings.Contains(string(b), k) || strings.Contains(string(b), string(esc[1:len(esc)-1])) {
			t.Errorf("the journal holds %s:\n%s", k, b)
		}
	}
	if n := strings.Count(string(b), redact.Redacted); n != 3 {
		t.Errorf("the journal holds %d redactions, want 3:\n%s", n, b)
	}
}
