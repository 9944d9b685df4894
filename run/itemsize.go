package run

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
)

// ItemBudget is the most an item's {content, metadata} may measure
// (blobhub.EncodedSize) when it is posted: BlobHub's cap less 4 KiB for
// what the server wraps around it (id, session, alias, stamp, author), as
// blobhub-worker budgets.
const ItemBudget = blobhub.MaxItemBytes - 4*1024

// The excerpt of a field cut to fit: its first excerptHead and last
// excerptTail characters around a pointer to the full text in thread.log.
const (
	excerptHead = 4096
	excerptTail = 2048
)

// itemSize is the size of the item as posted, {content: one text block,
// metadata}, measured as the server measures it.
func itemSize(it agent.Item) int {
	return blobhub.EncodedSize(map[string]any{"content": contentOf(it), "metadata": it.Meta})
}

// fitItem returns the item fitted to budget the way blobhub-worker fits
// it: while it is over, the tool's output, the tool's input, metadata.text
// and the text block, in that order, become an excerpt (head and tail
// around "…[truncated N bytes; see <localLog>]…"), and the item says which
// in truncated_fields, with truncated and local_log (thread.log, which
// holds the whole item). Still over, the excerpted fields become
// "…[dropped; see <localLog>]…". Where blobhub-worker would then fail the
// thread, bhw-run goes on cutting the largest strings (and, failing that,
// subtrees) and adds original_bytes, so the item is posted and the full
// one stays in thread.log (docs/wire.md).
func fitItem(it agent.Item, budget int, localLog string) agent.Item {
	orig := itemSize(it)
	if orig <= budget {
		return it
	}
	// Work on a generic copy so json.RawMessage values become walkable.
	var meta map[string]any
	b, _ := json.Marshal(it.Meta)
	_ = json.Unmarshal(b, &meta)
	if meta == nil {
		meta = map[string]any{}
	}
	root := map[string]any{"brief": it.Brief, "meta": meta}
	size := func() int {
		return itemSize(agent.Item{Brief: root["brief"].(string), Meta: meta, Files: it.Files})
	}
	tool, _ := meta["tool"].(map[string]any)
	type field struct {
		name string
		m    map[string]any // the map holding it
		key  string
	}
	var ladder []field
	if tool != nil {
		ladder = append(ladder, field{"metadata.tool.output", tool, "output"}, field{"metadata.tool.input", tool, "input"})
	}
	ladder = append(ladder, field{"metadata.text", meta, "text"}, field{"content[0].text", root, "brief"})
	var cut []field
	for _, f := range ladder {
		if size() <= budget {
			break
		}
		v, ok := f.m[f.key]
		if !ok || envelope.EmptyValue(v) { // blobhub-worker excerpts no empty value
			continue
		}
		s, isString := v.(string)
		if !isString {
			js, _ := json.Marshal(v)
			s = string(js)
		}
		f.m[f.key] = excerpt(s, localLog)
		cut = append(cut, f)
	}
	if len(cut) > 0 {
		names := make([]string, len(cut))
		for i, f := range cut {
			names[i] = f.name
		}
		meta["truncated"], meta["truncated_fields"], meta["local_log"] = true, names, localLog
	}
	if size() > budget {
		for _, f := range cut {
			f.m[f.key] = fmt.Sprintf("…[dropped; see %s]…", localLog)
		}
	}
	if size() > budget {
		shrinkRest(root, size, budget)
		meta["truncated"], meta["original_bytes"] = true, orig
		if _, ok := meta["local_log"]; !ok {
			meta["local_log"] = localLog
		}
	}
	return agent.Item{Brief: root["brief"].(string), Meta: meta, Files: it.Files}
}

// excerpt is s as blobhub-worker excerpts it: its first excerptHead and
// last excerptTail characters around the count of its bytes and where the
// whole of it is.
func excerpt(s, localLog string) string {
	r := []rune(s)
	head, tail := r, r
	if len(r) > excerptHead {
		head = r[:excerptHead]
	}
	if len(r) > excerptTail {
		tail = r[len(r)-excerptTail:]
	}
	return fmt.Sprintf("%s…[truncated %d bytes; see %s]…%s", string(head), len(s), localLog, string(tail))
}

// shrinkRest cuts root until size() is within budget: the largest strings
// keep their head and tail around a "…[truncated N bytes]…" marker; when
// strings alone do not get there, the largest subtree becomes a truncated
// JSON string.
func shrinkRest(root map[string]any, size func() int, budget int) {
	for i := 0; i < 64; i++ {
		cur := size()
		if cur <= budget-256 {
			return
		}
		over := cur - (budget - 512)
		ref, s, ok := largestString(root)
		if !ok || blobhub.EncodedSize(s) < 1024 {
			// Strings alone cannot get there: flatten the largest subtree.
			sref, sub := largestSubtree(root)
			if sref == nil {
				return
			}
			js, _ := json.Marshal(sub)
			sref(shrinkString(string(js), len(js)-over))
			continue
		}
		// Cut by the encoded excess, which may be up to six times the
		// bytes of the string's text.
		ref(shrinkString(s, len(s)-len(s)*over/blobhub.EncodedSize(s)-1))
	}
}

// stubItem is what is posted when the server still refuses a fitted item.
func stubItem(it agent.Item, originalBytes int, localLog string) agent.Item {
	m := map[string]any{"type": it.Type(), "truncated": true, "original_bytes": originalBytes, "local_log": localLog}
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
