package policy

import (
	"strings"
	"testing"
	"unicode/utf8"
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
	g := Gate{Posture: PostureGuarded, Thread: Policy{Default: DecisionAsk, Rules: []Rule{{Effect: EffectExec, Command: []string{"rm *"}, Action: DecisionDeny}}}}
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

// FuzzGlob: compiling and matching a command glob never panic; a pattern
// with no glob character matches exactly itself; `*` matches everything.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"git push*", "git push"}, {"[a-c]?", "b!"}, {"[!]]x", "]x"}, {"[z-a]", "q"}, {"[", "["}, {"[!-a]", "-"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got, err := Fnmatch(pattern, name)
		if err != nil || hasCommandMeta(pattern) || !utf8.ValidString(pattern+name) {
			return
		}
		if want := pattern == name; got != want {
			t.Fatalf("Fnmatch(%q, %q) = %v, want %v", pattern, name, got, want)
		}
		if ok, _ := Fnmatch("*", name); !ok {
			t.Fatalf("* does not match %q", name)
		}
	})
}

// owner's deny into anything else.
func FuzzRespelling(f *testing.F) {
	for _, s := range []string{"rm -rf /", "rm -rf build out", "ls -la", "go test ./...", "rm -rf", "rm  -rf  x", "rmdir -rf x", "git push --force origin"} {
		f.Add(s)
	}
	g := Gate{Posture: PostureGuarded,
		Worker: []Rule{exR("rm -rf *", DecisionDeny), exR("git push --force*", DecisionDeny)},
		Thread: thread(DecisionAsk, exR("go test *", DecisionAllow), exR("ls *", DecisionAllow), exR("rm *", DecisionAllow))}
	reserved := map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
		"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true, "function": true,
		"select": true, "time": true, "coproc": true}
	plain := func(w string) bool {
		for _, r := range w {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./,:+@%-", r)) {
				return false
			}
		}
		return true
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		words := strings.Fields(cmd)
		if len(words) == 0 || len(cmd) > 300 || reserved[words[0]] {
			return
		}
		for _, w := range words {
			if !plain(w) {
				return
			}
		}
		cmd = strings.Join(words, " ")
		each := func(spell func(string) string) string {
			out := make([]string, len(words))
			for i, w := range words {
				out[i] = spell(w)
			}
			return strings.Join(out, " ")
		}
		base := g.Decide(bash(cmd))
		for _, v := range []string{
			each(func(w string) string { return "'" + w + "'" }),
			each(func(w string) string { return `"` + w + `"` }),
			each(func(w string) string { return `\` + w }),
			each(func(w string) string { return w[:1] + "''" + w[1:] }),
			each(func(w string) string { return "$'" + w + "'" }),
		} {
			// A respelling is never looser (an allow rule reads the
			// command as written, as the worker does, so it may be stricter).
			if d := g.Decide(bash(v)); strictness(d.Decision) < strictness(base.Decision) {
				t.Fatalf("%q = %s (%s) but %q = %s (%s)", cmd, base.Decision, base.Reason, v, d.Decision, d.Reason)
			}
		}
		if base.Decision != DecisionDeny {
			return
		}
		for _, prefix := range []string{"X=1 ", "A=1 B=2 ", "env ", "env -i ", "/usr/bin/env X=1 ", "sudo ", "sudo -u root ",
			"command ", "builtin ", "exec ", "nice -n 5 ", "nohup ", "timeout 5 ", "busybox ", "> /dev/null ", "sudo env "} {
			v := prefix + cmd
			if d := g.Decide(bash(v)); d.Decision != DecisionDeny {
				t.Fatalf("%q is denied (%s) but %q = %s (%s)", cmd, base.Reason, v, d.Decision, d.Reason)
			}
		}
		if !strings.Contains(words[0], "/") {
			if v := "/bin/" + cmd; g.Decide(bash(v)).Decision != DecisionDeny {
				t.Fatalf("%q is denied but %q is not", cmd, v)
			}
		}
	})
}
