package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMatchCommand(t *testing.T) {
	cases := []struct {
		pattern, command string
		want             bool
	}{
		{"rm -rf *", "rm -rf build", true},
		{"rm -rf *", "rm -rf /", true},
		{"rm -rf *", "rm -rf", false},
		{"rm -rf *", " rm   -rf\t/tmp/a b ", true},
		{"rm -rf *", "sudo rm -rf /", false},
		{"*rm -rf*", "sudo rm -rf /", true},
		{"git push * --force", "git push origin main --force", true},
		{"git push * --force", "git push origin main --force-with-lease", false},
		{"*", "", true},
		{"*", "anything at all / really", true},
		{"**", "x", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"ls", "ls", true},
		{"ls", "ls -la", false},
		{"ls", "lsof", false},
		// ?, [...] and [!...] are glob characters, as the worker's fnmatchcase.
		{"echo ?", "echo x", true},
		{"echo ?", "echo xy", false},
		{"echo ?", "echo é", true},
		{"cat /etc/[ab]", "cat /etc/a", true},
		{"cat /etc/[ab]", "cat /etc/c", false},
		{"cat /etc/[!ab]", "cat /etc/c", true},
		{"cat /etc/[!ab]", "cat /etc/a", false},
		{"rm -[a-z]f *", "rm -rf x", true},
		{"x[]]", "x]", true},
		{"x[!]]", "x]", false},
		{"a[", "a[", true},
		{`a\*`, `ab`, false}, // a backslash escapes nothing
		{`a\*`, `a\b`, true},
		{`a\*`, `a\*`, true},
		{"[z-a]", "q", false},
		{"* *", "a\nb", true}, // whitespace folded
		{"", "", true},
		{"", "x", false},
	}
	for _, c := range cases {
		if got := MatchCommand(c.pattern, c.command); got != c.want {
			t.Errorf("MatchCommand(%q, %q) = %v, want %v", c.pattern, c.command, got, c.want)
		}
	}
}

func TestCommandParts(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{"ls -la", []string{"ls -la"}},
		{"a && b || c; d | e", []string{"a", "b", "c", "d", "e"}},
		{"! ls -la &", []string{"ls -la"}},
		{"(cd x; make) && echo ok", []string{"cd x", "make", "echo ok"}},
		{"echo $(rm -rf x) `whoami`", []string{"echo $(rm -rf x) `whoami`", "rm -rf x", "whoami"}},
		{"echo hi   >  /etc/x", []string{"echo hi > /etc/x"}},
		{">out", []string{">out"}},
		{"X=$(id) cmd", []string{"X=$(id) cmd", "id"}},
		{"if rm a; then b; else c; fi", []string{"rm a", "b", "c"}},
		{"while read l; do echo $l; done < f", []string{"read l", "echo $l"}},
		{"diff <(ls a) <(ls b)", []string{"diff <(ls a) <(ls b)", "ls a", "ls b"}},
		{"bash -lc 'rm -rf / && echo ok'", []string{"bash -lc 'rm -rf / && echo ok'", "rm -rf /", "echo ok"}},
		{`sh -c "make test"`, []string{`sh -c "make test"`, "make test"}},
		{"bash -c \"$CMD\"", []string{"bash -c \"$CMD\""}},
		{"# only a comment", nil},
	}
	for _, c := range cases {
		got, ok := commandParts(c.line)
		if !ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("commandParts(%q) = %q, %v; want %q", c.line, got, ok, c.want)
		}
	}
	for _, bad := range []string{"echo 'open", "a &&", "((", "if then fi"} {
		if _, ok := commandParts(bad); ok {
			t.Errorf("commandParts(%q) parsed", bad)
		}
	}
}

func TestCodexExecCommand(t *testing.T) {
	cases := map[string]string{
		"/bin/bash -lc 'touch x.txt && echo made'": "touch x.txt && echo made",
		"bash -lc 'npm test'":                      "npm test",
		`sh -c "echo hi"`:                          "echo hi",
		"/usr/bin/zsh -c 'ls'":                     "ls",
		"bash -l -c 'ls -la'":                      "ls -la",
		"ls -la":                                   "ls -la",
		"bash script.sh":                           "bash script.sh",
		"bash -lc 'x' > out":                       "bash -lc 'x' > out",
		"bash -lc 'a' && rm b":                     "bash -lc 'a' && rm b",
		"bash -lc":                                 "bash -lc",
		"bash -lc 'unterminated":                   "bash -lc 'unterminated",
		"bash --norc -o pipefail -c 'npm test'":    "npm test",
		"bash -c ls 'rm -rf x'":                    "ls",
	}
	for in, want := range cases {
		if got := CodexExecCommand(in); got != want {
			t.Errorf("CodexExecCommand(%q) = %q, want %q", in, got, want)
		}
	}
	argv := map[string][]string{
		"touch x && echo y": {"/bin/bash", "-lc", "touch x && echo y"},
		"echo hi":           {"sh", "-c", "echo hi"},
		"git status":        {"git", "status"},
		"python -c print()": {"python", "-c", "print()"},
		"make":              {"bash", "-c", "-e", "make"},
		"":                  nil,
	}
	for want, in := range argv {
		if got := CodexExecArgv(in); got != want {
			t.Errorf("CodexExecArgv(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResolvePath(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		path, base, want string
		ok               bool
	}{
		{filepath.Join(f.work, "a", "b"), "", filepath.Join(f.work, "a", "b"), true},
		{filepath.Join(f.work, "to-out", "x"), "", filepath.Join(f.out, "x"), true},
		{filepath.Join(f.work, "dangling"), "", filepath.Join(f.out, "new.txt"), true},
		{filepath.Join(f.work, "rel-out"), "", f.out, true},
		{filepath.Join(f.workLink, "src", "..", "x"), "", filepath.Join(f.work, "x"), true},
		{"x/y", f.work, filepath.Join(f.work, "x", "y"), true},
		{"x/y", "", "", false},
		{filepath.Join(f.work, "loop-a", "x"), "", "", false},
		{"/nonexistent-bhw-run/a/b", "", "/nonexistent-bhw-run/a/b", true},
		{"", f.work, "", false},
	}
	for _, c := range cases {
		got, ok := resolvePath(c.path, c.base)
		if got != c.want || ok != c.ok {
			t.Errorf("resolvePath(%q, %q) = %q, %v; want %q, %v", c.path, c.base, got, ok, c.want, c.ok)
		}
	}
	// A file used as a folder: the longest existing prefix is the file.
	file := filepath.Join(f.work, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := resolvePath(filepath.Join(file, "below"), ""); !ok || got != filepath.Join(file, "below") {
		t.Errorf("below a file: %q %v", got, ok)
	}
	if !Within(f.work, filepath.Join(f.work, "a")) || Within(f.work, f.work+"x") || !Within("/", "/anything") {
		t.Error("within")
	}
	if strings.Contains(f.work, "..") {
		t.Fatal("fixture path not clean")
	}
}

// commandParts is the sources of a line's parts, and whether the line split
// in full (it parses and is within the limits).
func commandParts(line string) ([]string, bool) {
	sp := splitLine(line)
	var out []string
	for _, p := range sp.parts {
		if !p.raw {
			out = append(out, p.source)
		}
	}
	return out, !sp.unparsed && sp.over == ""
}
