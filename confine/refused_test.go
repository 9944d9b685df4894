package confine

import (
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRefused: a tool's output saying a path was refused names a
// confinement refusal only where the rule set refuses that path and the
// user could otherwise have done it; the tools' own ways of saying so are
// read, and permission errors the user's own rights explain are not the
// confinement's.
func TestRefused(t *testing.T) {
	root := tree(t, "work/src/main.go", "work/locked", "tmp/", "home/.bashrc", "home/.blobhub/credentials.yaml",
		"state/threads/other/thread.yaml", "elsewhere/file")
	p := func(n string) string { return filepath.Join(root, n) }
	// access(2) as a user (not root, who passes every check) would answer:
	// the test's tree is the user's, but work/locked (mode 000), and
	// nothing outside it may be written or, in /root, read.
	access := func(path string, mode uint32) error {
		switch {
		case path == p("work/locked"):
			return unix.EACCES
		case within(root, path):
			return nil
		case mode == unix.R_OK && !within("/root", path):
			return nil
		}
		return unix.EACCES
	}
	rules, err := Build(Spec{WorkFolder: p("work"), Temp: p("tmp"), Deny: []string{p("home/.blobhub/credentials.yaml"), p("state")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, output string
		want         []Refusal
	}{
		{"cat of a denied file", "cat: " + p("home/.blobhub/credentials.yaml") + ": Permission denied\n",
			[]Refusal{{Path: p("home/.blobhub/credentials.yaml"), Denied: true}}},
		{"another thread's record, among other lines", "ok\ncat: " + p("state/threads/other/thread.yaml") + ": Permission denied\ndone",
			[]Refusal{{Path: p("state/threads/other/thread.yaml"), Denied: true}}},
		{"a shell's redirection outside the folders", "bash: line 1: " + p("home/.bashrc") + ": Permission denied",
			[]Refusal{{Path: p("home/.bashrc")}}},
		{"a new file outside, quoted", "touch: cannot touch '" + p("elsewhere/new.txt") + "': Permission denied",
			[]Refusal{{Path: p("elsewhere/new.txt")}}},
		{"typographic quotes", "mkdir: cannot create directory ‘" + p("elsewhere/d") + "’: Permission denied",
			[]Refusal{{Path: p("elsewhere/d")}}},
		{"Node.js", "Error: EACCES: permission denied, open '" + p("home/.blobhub/credentials.yaml") + "'",
			[]Refusal{{Path: p("home/.blobhub/credentials.yaml"), Denied: true}}},
		{"Python", "PermissionError: [Errno 13] Permission denied: '" + p("elsewhere/file") + "'",
			[]Refusal{{Path: p("elsewhere/file")}}},
		{"Operation not permitted", "rm: cannot remove '" + p("elsewhere/file") + "': Operation not permitted",
			[]Refusal{{Path: p("elsewhere/file")}}},
		{"the script's own path is not what was refused", p("work/run.sh") + ": line 3: " + p("elsewhere/file") + ": Permission denied",
			[]Refusal{{Path: p("elsewhere/file")}}},
		{"each path once", "cat: " + p("home/.bashrc") + ": Permission denied\n" + "bash: " + p("home/.bashrc") + ": Permission denied",
			[]Refusal{{Path: p("home/.bashrc")}}},
		{"inside the work folder the user's rights explain it", "cat: " + p("work/locked") + ": Permission denied", nil},
		{"a system file the user may not write", "bash: /etc/passwd: Permission denied", nil},
		{"a path read fine", "cat " + p("home/.bashrc") + "\nhello", nil},
		{"no path", "sudo: a password is required; Permission denied", nil},
		{"a folder on the way to a denied path cannot be listed", "ls: cannot open directory '" + p("home") + "': Permission denied",
			[]Refusal{{Path: p("home"), Denied: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := rules.refused(c.output, access); !slices.Equal(got, c.want) {
				t.Fatalf("Refused = %+v, want %+v", got, c.want)
			}
		})
	}
}
