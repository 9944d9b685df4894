package blobhub

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MaxItemBytes is BlobHub's cap on a thread item: the server refuses an
// item whose stored form (its {content, metadata} wrapped with id,
// session_id, alias, created_at, user_id and parent_id) measures this many
// bytes or more, answering thread_item_too_large.
const MaxItemBytes = 64 * 1024

// EncodedSize is the length of v as the server's JSON encoder writes it:
// separators ", " and ": ", every character outside ASCII escaped as \uXXXX
// (two of them above U+FFFF). That is what BlobHub measures against
// MaxItemBytes, and it is never less than Go's compact UTF-8 encoding, so a
// budget met here is met there. -1 when v cannot be encoded.
func EncodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return encodedLen(b)
}

// encodedLen converts the length of Go's compact encoding b to the
// server's: a byte more per separator outside strings, six bytes per
// escaped character (twelve above U+FFFF), one for the three characters
// Go escapes for HTML (<, >, &) and the server writes as they are.
func encodedLen(b []byte) int {
	n, inString := 0, false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case !inString:
			if c == ',' || c == ':' {
				n++
			}
			if c == '"' {
				inString = true
			}
			n++
			i++
		case c == '"':
			inString = false
			n++
			i++
		case c == '\\':
			if bytes.HasPrefix(b[i:], []byte(`\u003c`)) || bytes.HasPrefix(b[i:], []byte(`\u003e`)) || bytes.HasPrefix(b[i:], []byte(`\u0026`)) {
				n++
				i += 6
				continue
			}
			if i+1 < len(b) && b[i+1] == 'u' {
				n += 6
				i += 6
				continue
			}
			n += 2
			i += 2
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r > 0xFFFF {
				n += 12
			} else {
				n += 6
			}
			i += size
		}
	}
	return n
}
