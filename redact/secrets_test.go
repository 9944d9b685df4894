package redact

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestSecretWriterAcrossWrites: a key cut by a buffered writer's chunks, or
// written a byte at a time, is redacted all the same; what is held back is
// written by Flush, and text that only starts like a key is not lost.
func TestSecretWriterAcrossWrites(t *testing.T) {
	const key = "bhk_split_key_0042"
	s := NewSecrets(key)
	text := strings.Repeat("x", 4090) + key + " tail b" // "b" starts the key: held, then flushed
	for _, chunk := range []int{1, 3, 7, 4096} {
		var out bytes.Buffer
		sw := s.Writer(&out)
		bw := bufio.NewWriterSize(sw, chunk+16) // bufio's minimum is 16
		for i := 0; i < len(text); i += chunk {
			if _, err := bw.WriteString(text[i:min(i+chunk, len(text))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("x", 4090) + Redacted + " tail b"; out.String() != want {
			t.Errorf("chunks of %d: %q", chunk, out.String()[4080:])
		}
	}
	// A key that another key extends is not cut short.
	s = NewSecrets("bhk_short", "bhk_short_and_longer")
	var out bytes.Buffer
	sw := s.Writer(&out)
	_, _ = sw.Write([]byte("a bhk_short"))
	_, _ = sw.Write([]byte("_and_longer b bhk_short."))
	_ = sw.Flush()
	if out.String() != "a "+Redacted+" b "+Redacted+"." {
		t.Errorf("%q", out.String())
	}
}

// TestSecretWriterUnderSlog: the slog handlers on stderr write through the
// writer, and a key added after the logger was made (Resolve reads the
// credentials after main built it) is redacted too; a write error reaches
// the caller.
func TestSecretWriterUnderSlog(t *testing.T) {
	s := NewSecrets()
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(s.Writer(&out), nil))
	s.Add("bhk_late_key_77")
	log.Error("BlobHub answered an error", "error", errors.New("status 422: key bhk_late_key_77 unknown"))
	if strings.Contains(out.String(), "bhk_late_key_77") || !strings.Contains(out.String(), Redacted) || !json.Valid(bytes.TrimSpace(out.Bytes())) {
		t.Fatalf("%s", out.String())
	}
	if _, err := s.Writer(failingWriter{}).Write([]byte("bhk_late_key_77\n")); err == nil {
		t.Fatal("a failed write reported no error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestSecretsMeta: an item's text and every string of its metadata, keys
// included, are redacted; a key spelled like a JSON number does not break
// the metadata; metadata without secrets keeps its values as they were.
func TestSecretsMeta(t *testing.T) {
	s := NewSecrets("bhk_meta_key", "123456", `k"quoted`)
	brief, meta := s.String("uses bhk_meta_key"), s.Meta(map[string]any{
		"type": "tool_result", "n": 123456, "tool": map[string]any{"output": []any{"x bhk_meta_key y", `a k"quoted b`}},
		"bhk_meta_key": true,
	})
	b, _ := json.Marshal(meta)
	if strings.Contains(brief+string(b), "bhk_meta_key") || strings.Contains(string(b), `k\"quoted`) {
		t.Fatalf("%s %s", brief, b)
	}
	if n, _ := meta["n"].(json.Number); n != "123456" {
		t.Fatalf("a number equal to a key changed: %s", b)
	}
	plain := map[string]any{"type": "text", "n": 7}
	if got := s.Meta(plain); got["n"] != 7 {
		t.Fatalf("metadata without secrets was rebuilt: %#v", got)
	}
	// The quoted key as JSON writes it is redacted in encoded text too.
	if got := string(s.Redact([]byte(`{"m":"a k\"quoted b"}`))); got != `{"m":"a `+Redacted+` b"}` {
		t.Fatalf("%s", got)
	}
	var nilSecrets *Secrets
	if nilSecrets.String("bhk_meta_key") != "bhk_meta_key" {
		t.Fatal("a nil Secrets redacted")
	}
}
