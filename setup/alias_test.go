package setup

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidateAlias: an alias that passes never reaches outside threads/
// and never names a reserved file.
func FuzzValidateAlias(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "a//b", "a/thread.yaml", "-x", "/abs", "a\x00b", "a/./b", "a/..", "é/ü", "a/emissions.jsonl/b", strings.Repeat("x", 256), ".../a", "a\\..\\b"} {
		f.Add(s)
	}
	root := filepath.Join(string(filepath.Separator), "state", "jobs", "j")
	threads := filepath.Join(root, "threads")
	f.Fuzz(func(t *testing.T, alias string) {
		if ValidateAlias(alias) != nil {
			return
		}
		dir := ThreadDir(root, alias)
		rel, err := filepath.Rel(threads, dir)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			t.Fatalf("alias %q lands at %s, outside %s", alias, dir, threads)
		}
		if filepath.Clean(dir) != dir {
			t.Fatalf("alias %q gives an unclean path %s", alias, dir)
		}
		if rel != alias {
			t.Fatalf("alias %q maps to %q, not one folder per segment", alias, rel)
		}
		for _, seg := range strings.Split(rel, "/") {
			if reserved[seg] || seg == "." || seg == ".." || seg == "" {
				t.Fatalf("alias %q has segment %q", alias, seg)
			}
		}
		if strings.HasPrefix(alias, "-") || len(alias) > 512 {
			t.Fatalf("alias %q accepted", alias)
		}
	})
}
