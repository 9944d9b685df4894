package blobhub_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestEncodedSize: sizes are counted as the server's encoder writes them
// (Python's json.dumps with its defaults gives these lengths).
func TestEncodedSize(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int
	}{
		{map[string]any{"a": []any{"é<>&\n\"x", "😀", 1, map[string]any{"b": nil}}, "c": "\u2028"}, 72},
		{[]string{"abc", "d"}, 12},
		{strings.Repeat("é", 1000), 6002},
	} {
		if got := blobhub.EncodedSize(tc.v); got != tc.want {
			t.Errorf("EncodedSize(%v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// TestItemCapAsServer: bhtest and the file:// store refuse what BlobHub
// refuses: an item of 64 KiB or more as stored, non-ASCII text counted as
// its escapes; an item well under the cap is taken.
func TestItemCapAsServer(t *testing.T) {
	srv := bhtest.New(t)
	srv.Thread("a")
	c := srv.Client(bhtest.RunnerKey)
	for _, tc := range []struct {
		name string
		text string
		ok   bool
	}{
		{"60 KiB of ASCII", strings.Repeat("x", 60<<10), true},
		{"a byte under the cap before wrapping", strings.Repeat("x", blobhub.MaxItemBytes-40), false},
		{"100 KB", strings.Repeat("x", 100_000), false},
		{"12,000 two-byte runes (24 KB, 72 KB escaped)", strings.Repeat("é", 12_000), false},
	} {
		_, err := c.Post(t.Context(), "a", text(tc.text))
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, blobhub.ErrItemTooLarge) {
			t.Errorf("%s: err %v, want ErrItemTooLarge", tc.name, err)
		}
	}
}
