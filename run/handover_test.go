package run

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGrantCovers: a grant covers its own call, and the re-attempt of a
// command after a cd into a folder inside the work folder, as the worker's
// does; nothing else: another command, a second clause, a folder outside
// or spelled with a shell expansion, another tool.
func TestGrantCovers(t *testing.T) {
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	const stored = "Bash:make test"
	for _, c := range []struct {
		requested string
		want      bool
	}{
		{"Bash:make test", true},
		{"Bash:cd sub && make test", true},
		{"Bash:cd " + work + " && make test", true},
		{`Bash:cd "sub" && make test`, true},
		{"Bash:cd sub && make test; rm -rf /", false},
		{"Bash:cd sub && make install", false},
		{"Bash:cd .. && make test", false},
		{"Bash:cd " + outside + " && make test", false},
		{"Bash:cd out && make test", false}, // a link leading outside
		{"Bash:cd ~ && make test", false},
		{"Bash:cd $HOME && make test", false},
		{"Bash:cd - && make test", false},
		{"Bash:cd missing && make test", false},
		{"Bash:echo x && cd sub && make test", false},
		{"Write:cd sub && make test", false},
	} {
		if got := grantCovers(stored, c.requested, work); got != c.want {
			t.Errorf("grantCovers(%q, %q) = %v, want %v", stored, c.requested, got, c.want)
		}
	}
	if grantCovers(stored, "Bash:cd sub && make test", "") {
		t.Error("a cd is covered with no work folder to check it against")
	}
}
