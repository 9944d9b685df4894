package policy

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCommandPattern: matching never panics; a pattern without `*` matches
// exactly its whitespace-folded self; replacing each `*` with a letter gives
// a command the pattern matches; the gate splits any line without panicking.
func FuzzCommandPattern(f *testing.F) {
	seeds := [][2]string{
		{"rm -rf *", "rm -rf build"},
		{"git push * --force", "git push origin main --force"},
		{"*", ""},
		{"a*a", "a"},
		{"  ls\t-la ", "ls -la"},
		{"curl * | sh", "curl -s https://x | sh"},
		{"echo ?", "echo $(rm -rf /)"},
		{"**", "bash -lc 'a && b'"},
		{"x", "echo 'unterminated"},
		{"\u00a0*\u2003", "f() { rm -rf /; }; f"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	g := Gate{Posture: PostureGuarded, Thread: Policy{Rules: []Rule{{Effect: EffectExec, Command: "rm *", Decision: DecisionDeny}}}}
	f.Fuzz(func(t *testing.T, pattern, command string) {
		got := MatchCommand(pattern, command)
		if !strings.Contains(pattern, "*") {
			if want := foldSpace(pattern) == foldSpace(command); got != want {
				t.Fatalf("MatchCommand(%q, %q) = %v, want %v", pattern, command, got, want)
			}
		}
		if !MatchCommand(pattern, pattern) && !strings.Contains(pattern, "*") {
			t.Fatalf("%q does not match itself", pattern)
		}
		if filled := strings.ReplaceAll(pattern, "*", "x"); !MatchCommand(pattern, filled) {
			t.Fatalf("%q does not match %q", pattern, filled)
		}
		d := g.Decide(Call{Effect: EffectExec, Target: Target{Command: command}})
		if d.Decision != DecisionDeny && d.Decision != DecisionAsk {
			t.Fatalf("decision %q for %q", d.Decision, command)
		}
		if _, ok := commandParts(command); ok {
			_ = CodexExecCommand(command)
		}
	})
}

// FuzzPathPattern: matching and validation never panic; a pattern with no
// glob syntax matches exactly its cleaned self.
func FuzzPathPattern(f *testing.F) {
	seeds := [][2]string{
		{"/etc/**", "/etc/passwd"},
		{"/etc/passwd", "/etc/passwd"},
		{"/etc/passwd", "/etc//passwd/"},
		{"/home/*/.ssh/{id_*,config}", "/home/me/.ssh/config"},
		{"/etc/[abc", "/etc/a"},
		{"/a/../b", "/b"},
		{"/", "/"},
		{`/x\*`, "/x*"},
		{"relative/**", "/relative/x"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		r := Rule{Effect: EffectWrite, Path: pattern, Decision: DecisionDeny}
		valid := r.Validate() == nil
		got := MatchPath(pattern, path)
		if !valid || strings.ContainsAny(pattern, `*?[]{}\`) || pattern == "" || path == "" {
			return
		}
		if want := filepath.Clean(pattern) == filepath.Clean(path); got != want {
			t.Fatalf("MatchPath(%q, %q) = %v, want %v", pattern, path, got, want)
		}
	})
}
