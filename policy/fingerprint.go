package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
)

// Fingerprint is "sha256:<hex>" of the canonical JSON of v (docs/gate.md,
// one-shot grants): keys
// sorted, no insignificant whitespace, numbers as written. The Codex adapter
// passes {command, cwd} for a command and the recorded changes for a file
// change. It returns "" when v cannot be encoded; an empty fingerprint never
// matches a grant.
func Fingerprint(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	c, err := Canonical(raw)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Canonical re-encodes a JSON document with sorted object keys, no
// insignificant whitespace and numbers exactly as written. Strings are
// re-escaped the same way whatever escapes the input used, so two spellings of
// one value give one encoding.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	writeCanonical(&buf, v)
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		writeList(buf, '{', '}', len(keys), func(i int) {
			writeString(buf, keys[i])
			buf.WriteByte(':')
			writeCanonical(buf, x[keys[i]])
		})
	case []any:
		writeList(buf, '[', ']', len(x), func(i int) { writeCanonical(buf, x[i]) })
	case string:
		writeString(buf, x)
	case json.Number:
		buf.WriteString(x.String())
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	default: // nil
		buf.WriteString("null")
	}
}

// writeList writes n elements, each by elem, comma-separated between open
// and end: an object's members or an array's values.
func writeList(buf *bytes.Buffer, open, end byte, n int, elem func(i int)) {
	buf.WriteByte(open)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		elem(i)
	}
	buf.WriteByte(end)
}

func writeString(buf *bytes.Buffer, s string) {
	// An Encoder without HTML escaping keeps <, > and & readable; its trailing
	// newline is dropped.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
