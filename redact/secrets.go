// Package redact is what a person may see of what bhw-run writes: the
// secrets it never shows (Secrets, the one place keys are redacted) and
// the escaping of the characters a terminal would act on, for text (Shown,
// ShownText) and for JSON (ShownJSON). It is a leaf: every sink imports
// it, it imports nothing of bhw-run's.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
)

// Redacted is what a secret is replaced with wherever bhw-run writes.
const Redacted = "[REDACTED]"

// minSecretLen: a shorter value would redact ordinary text.
const minSecretLen = 4

// Secrets are the values bhw-run never shows: every API key it read — the
// flag, the environment, every profile of ~/.blobhub/credentials.yaml (not
// only the one in use: an agent can cat the file) and the key of the v1
// file ~/.blobhub-worker/credentials.yaml. It is the one place redaction
// happens: items are redacted as they are journaled (Meta and String, so
// the journal and the post hold the same text), and every other sink — thread.log,
// section.log, main's stdout and stderr, where the slog handler writes —
// writes through Writer. Keys are added while the setup is resolved, so a
// Writer made before redacts what is added later. A nil *Secrets redacts
// nothing. Safe for concurrent use.
type Secrets struct {
	mu   sync.RWMutex
	vals []string // longest first, so a key that extends another is replaced whole
}

// NewSecrets holds vals (those shorter than minSecretLen are ignored).
func NewSecrets(vals ...string) *Secrets {
	s := &Secrets{}
	s.Add(vals...)
	return s
}

// Add adds vals, and the spelling each has inside a JSON string when that
// differs (a key holding a quote, a backslash, <, > or &).
func (s *Secrets) Add(vals ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vals {
		if len(v) < minSecretLen {
			continue
		}
		b, _ := json.Marshal(v)
		for _, form := range []string{v, string(b[1 : len(b)-1])} {
			if !slices.Contains(s.vals, form) {
				s.vals = append(s.vals, form)
			}
		}
	}
	slices.SortStableFunc(s.vals, func(a, b string) int { return len(b) - len(a) })
}

func (s *Secrets) list() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vals
}

// Redact returns b with every secret replaced by Redacted (b itself when
// it holds none).
func (s *Secrets) Redact(b []byte) []byte {
	for _, v := range s.list() {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Redacted))
		}
	}
	return b
}

// In reports whether b holds a secret.
func (s *Secrets) In(b []byte) bool {
	for _, v := range s.list() {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return false
}

// String is Redact for a string.
func (s *Secrets) String(str string) string {
	for _, v := range s.list() {
		str = strings.ReplaceAll(str, v, Redacted)
	}
	return str
}

// Meta returns an item's metadata with every secret replaced in every
// string (and key) of it. It is rebuilt only when it held one, so metadata
// without secrets keeps its values as they are.
func (s *Secrets) Meta(meta map[string]any) map[string]any {
	if len(s.list()) == 0 || meta == nil {
		return meta
	}
	b, err := json.Marshal(meta)
	if err != nil || bytes.Equal(s.Redact(b), b) {
		return meta
	}
	// Replaced value by value, not in the encoded bytes: a key that is also
	// a JSON number or word would otherwise break the encoding.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return meta
	}
	return s.value(m).(map[string]any)
}

// value redacts every string of a decoded JSON value.
func (s *Secrets) value(v any) any {
	switch x := v.(type) {
	case string:
		return s.String(x)
	case []any:
		for i := range x {
			x[i] = s.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.String(k)] = s.value(e)
		}
		return out
	}
	return v
}

// Writer writes to w with every secret replaced. A write that ends inside
// what may be the start of a secret holds that tail back until the next
// write shows whether it is one, so a key split across two writes (a
// buffered writer's chunks) is redacted too; Flush writes what is held.
func (s *Secrets) Writer(w io.Writer) *Writer { return &Writer{s: s, w: w} }

// Writer is the writer Secrets.Writer returns.
type Writer struct {
	s    *Secrets
	w    io.Writer
	mu   sync.Mutex
	held []byte
}

func (sw *Writer) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	vals := sw.s.list()
	if len(vals) == 0 && len(sw.held) == 0 {
		_, err := sw.w.Write(p)
		return len(p), err
	}
	buf := p
	if len(sw.held) > 0 {
		buf = append(sw.held, p...)
	}
	keep := heldTail(buf, vals)
	out := sw.s.Redact(buf[:len(buf)-keep])
	sw.held = append([]byte(nil), buf[len(buf)-keep:]...)
	if len(out) == 0 {
		return len(p), nil
	}
	_, err := sw.w.Write(out)
	return len(p), err
}

// Flush writes the held tail. A nil *Writer has none.
func (sw *Writer) Flush() error {
	if sw == nil {
		return nil
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.held) == 0 {
		return nil
	}
	out := sw.s.Redact(sw.held)
	sw.held = nil
	_, err := sw.w.Write(out)
	return err
}

// heldTail is the length of the longest tail of b that is the start of a
// secret, but not a whole one that no longer secret extends.
func heldTail(b []byte, vals []string) int {
	longest := 0
	for _, v := range vals {
		n := min(len(v), len(b))
		for k := n; k > longest; k-- {
			if bytes.HasSuffix(b, []byte(v[:k])) && (k < len(v) || extended(v, vals)) {
				longest = k
				break
			}
		}
	}
	return longest
}

// extended reports whether a longer secret starts with v.
func extended(v string, vals []string) bool {
	for _, o := range vals {
		if len(o) > len(v) && strings.HasPrefix(o, v) {
			return true
		}
	}
	return false
}
