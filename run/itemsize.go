package run

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
)

// ItemBudget is the most an item's serialized {content, metadata} may take:
// BlobHub refuses larger items.
const ItemBudget = 350 * 1024

// itemSize is the serialized size of the item as posted: {content: one
// text block, metadata}.
func itemSize(it agent.Item) int {
	b, _ := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": it.Brief}}, "metadata": it.Meta})
	return len(b)
}

// fitItem returns the item shrunk to the budget: the largest strings keep their
// head and tail around a "…[truncated N bytes]…" marker; when strings alone do
// not get there, the largest subtree becomes a truncated JSON string. A
// shrunk item carries metadata.truncated and metadata.original_bytes.
func fitItem(it agent.Item, budget int) agent.Item {
	orig := itemSize(it)
	if orig <= budget {
		return it
	}
	// Work on a generic copy so json.RawMessage values become walkable.
	var meta map[string]any
	b, _ := json.Marshal(it.Meta)
	_ = json.Unmarshal(b, &meta)
	root := map[string]any{"brief": it.Brief, "meta": meta}
	for i := 0; i < 64; i++ {
		cur := sizeOf(root)
		if cur <= budget-256 {
			break
		}
		over := cur - (budget - 512)
		ref, s, ok := largestString(root)
		if !ok || len(s) < 1024 {
			// Strings alone cannot get there: flatten the largest subtree.
			sref, sub := largestSubtree(root)
			if sref == nil {
				break
			}
			js, _ := json.Marshal(sub)
			sref(shrinkString(string(js), len(js)-over))
			continue
		}
		ref(shrinkString(s, len(s)-over))
	}
	out := agent.Item{Brief: root["brief"].(string), Meta: root["meta"].(map[string]any)}
	if out.Meta == nil {
		out.Meta = map[string]any{}
	}
	out.Meta["truncated"] = true
	out.Meta["original_bytes"] = orig
	return out
}

// stubItem is what is posted when the server still refuses a fitted item.
func stubItem(it agent.Item, originalBytes int) agent.Item {
	m := map[string]any{"type": it.Type(), "truncated": true, "original_bytes": originalBytes}
	for _, k := range []string{"emission_id", "post_id"} {
		if id, ok := it.Meta[k]; ok {
			m[k] = id
		}
	}
	return agent.Item{Brief: shrinkString(it.Brief, 1024), Meta: m}
}

func sizeOf(v any) int { b, _ := json.Marshal(v); return len(b) }

// shrinkString keeps head and tail of s so the result is about keep bytes
// plus the marker, cutting on UTF-8 boundaries.
func shrinkString(s string, keep int) string {
	return cutMiddle(s, keep, func(n int) string { return fmt.Sprintf("…[truncated %d bytes]…", n) })
}

// cutMiddle keeps head and tail of s, about keep bytes in all, around
// marker(bytes left out), cutting on UTF-8 boundaries.
func cutMiddle(s string, keep int, marker func(int) string) string {
	if keep < 64 {
		keep = 64
	}
	if len(s) <= keep {
		return s
	}
	head, tail := keep/2, keep-keep/2
	h := s[:head]
	for len(h) > 0 && !utf8.ValidString(h) {
		h = h[:len(h)-1]
	}
	t := s[len(s)-tail:]
	for len(t) > 0 && !utf8.ValidString(t) {
		t = t[1:]
	}
	return h + marker(len(s)-len(h)-len(t)) + t
}

// largestString finds the longest string value and a setter for it.
func largestString(v any) (set func(string), s string, ok bool) {
	var walk func(v any, set func(any))
	walk = func(v any, setter func(any)) {
		switch x := v.(type) {
		case string:
			if !ok || len(x) > len(s) {
				s, ok = x, true
				set = func(n string) { setter(n) }
			}
		case map[string]any:
			for k, c := range x {
				walk(c, func(n any) { x[k] = n })
			}
		case []any:
			for i, c := range x {
				walk(c, func(n any) { x[i] = n })
			}
		}
	}
	walk(v, func(any) {})
	return set, s, ok
}

// largestSubtree finds the biggest map or slice below the root.
func largestSubtree(root map[string]any) (set func(string), sub any) {
	best := -1
	var walk func(v any, setter func(any), depth int)
	walk = func(v any, setter func(any), depth int) {
		switch x := v.(type) {
		case map[string]any:
			if depth > 1 {
				if n := sizeOf(x); n > best {
					best, sub, set = n, x, func(s string) { setter(s) }
				}
			}
			for k, c := range x {
				walk(c, func(n any) { x[k] = n }, depth+1)
			}
		case []any:
			if n := sizeOf(x); depth > 1 && n > best {
				best, sub, set = n, x, func(s string) { setter(s) }
			}
			for i, c := range x {
				walk(c, func(n any) { x[i] = n }, depth+1)
			}
		}
	}
	walk(root, func(any) {}, 0)
	return set, sub
}
