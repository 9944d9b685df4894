package blobhub

import (
	"strings"
	"testing"
)

func FuzzAliasFileName(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "A"}, {"a/b", "a%2Fb"}, {".", ".."}, {".x", "%2Ex"}, {"a~b", "a%7Eb"},
		{strings.Repeat("x", 300), strings.Repeat("x", 299)}, {strings.Repeat("/", 100), strings.Repeat("%", 70)},
		{"projects/p1/items/i1/runs/3/thread", "worker"}, {"ü", "\xff"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := aliasFileName(a), aliasFileName(b)
		if a != "" && na == "" {
			t.Fatalf("empty name for %q", a)
		}
		for _, n := range []string{na, nb} {
			if len(n) > 249 || strings.ContainsAny(n, "/\\\x00") || strings.HasPrefix(n, ".") {
				t.Fatalf("unsafe name %q", n)
			}
		}
		// Injective, also on a case-insensitive file system.
		if a != b && strings.EqualFold(na, nb) {
			t.Fatalf("%q and %q both map to %q / %q", a, b, na, nb)
		}
		if got, ok := aliasFromFileName(na); ok && got != a || !ok && !strings.Contains(na, "~") {
			t.Fatalf("decode(%q) = %q, %v; want %q", na, got, ok, a)
		}
	})
}
