package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"mvdan.cc/sh/v3/syntax"
)

// foldSpace folds every run of whitespace to one space and trims both ends.
func foldSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// MatchCommand reports whether a command pattern matches a command line
// (SPEC §8.3): `*` matches any run of characters, slashes and spaces
// included; the match is anchored at both ends; runs of whitespace are folded
// in both. No other character is special.
func MatchCommand(pattern, command string) bool {
	p, s := foldSpace(pattern), foldSpace(command)
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	// The leftmost match of each middle piece leaves the most room for the
	// rest, so a greedy scan decides the match.
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}

// MatchPath reports whether an absolute path pattern matches an absolute path:
// doublestar syntax, `*` within one segment, `**` across segments. Both are
// cleaned first so "/etc/" and "/etc" are one path. A bad pattern matches
// nothing (Validate refuses it before it gets here).
func MatchPath(pattern, path string) bool {
	if pattern == "" || path == "" {
		return false
	}
	// filepath.Clean leaves `**` and escapes alone on Unix.
	pattern, path = filepath.Clean(pattern), filepath.Clean(path)
	if !hasGlobMeta(pattern) {
		// Byte for byte: doublestar reads runes, and two different invalid
		// UTF-8 bytes would both read as U+FFFD and match.
		return pattern == path
	}
	if !utf8.ValidString(pattern) {
		return false
	}
	ok, err := doublestar.Match(pattern, path)
	return err == nil && ok
}

func hasGlobMeta(pattern string) bool {
	return strings.ContainsAny(pattern, `*?[]{}\`)
}

// commandParts splits a command line into its simple commands with a real
// shell parser (SPEC §8.3): pipelines, lists, subshells, blocks, control
// structures, command and process substitutions, and `bash -c '…'` scripts.
// Each part keeps its redirections ("echo hi > /etc/x"), so a rule for the
// command sees where it writes. ok is false when the line does not parse; the
// caller then decides the line as one string.
func commandParts(line string) (parts []string, ok bool) {
	return commandPartsDepth(line, 0)
}

const maxScriptDepth = 4

func commandPartsDepth(line string, depth int) ([]string, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, false
	}
	var parts []string
	syntax.Walk(f, func(n syntax.Node) bool {
		st, isStmt := n.(*syntax.Stmt)
		if !isStmt || !simpleCommand(st.Cmd) {
			return true
		}
		if part, ok := stmtSource(line, st); ok {
			parts = append(parts, part)
		}
		if depth < maxScriptDepth {
			if script, isShell := shellScript(st.Cmd); isShell {
				if inner, ok := commandPartsDepth(script, depth+1); ok {
					parts = append(parts, inner...)
				} else {
					parts = append(parts, foldSpace(script))
				}
			}
		}
		return true
	})
	return parts, true
}

// stmtSource is the text of a simple statement as written, with its
// redirections but without `!` or a trailing `&` or `;`: the person who
// wrote "echo * > /etc/*" thinks in the command's own spelling, not in a
// printer's.
func stmtSource(line string, st *syntax.Stmt) (string, bool) {
	var start, end syntax.Pos
	if st.Cmd != nil {
		start, end = st.Cmd.Pos(), st.Cmd.End()
	}
	for _, r := range st.Redirs {
		if !start.IsValid() || r.Pos().Offset() < start.Offset() {
			start = r.Pos()
		}
		e := r.End()
		if r.Hdoc != nil && r.Hdoc.End().Offset() > e.Offset() {
			e = r.Hdoc.End()
		}
		if !end.IsValid() || e.Offset() > end.Offset() {
			end = e
		}
	}
	if !start.IsValid() || !end.IsValid() {
		return "", false
	}
	a, b := int(start.Offset()), int(end.Offset())
	if a < 0 || b > len(line) || a > b {
		return "", false
	}
	return foldSpace(line[a:b]), true
}

// simpleCommand reports whether a statement's command is a leaf the rules
// judge, rather than a structure holding other statements. A statement of
// redirections alone (`> file`) is a leaf too.
func simpleCommand(c syntax.Command) bool {
	switch c.(type) {
	case nil, *syntax.CallExpr, *syntax.DeclClause, *syntax.LetClause, *syntax.TestClause,
		*syntax.ArithmCmd, *syntax.TestDecl:
		return true
	}
	return false
}

// shellScript returns the script of `sh -c '<script>'` and its kin when every
// word is a literal, so "bash -c 'rm -rf /'" is judged as "rm -rf /" too.
func shellScript(c syntax.Command) (string, bool) {
	call, ok := c.(*syntax.CallExpr)
	if !ok || len(call.Args) < 3 {
		return "", false
	}
	words := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		s, ok := literalWord(w)
		if !ok {
			return "", false
		}
		words = append(words, s)
	}
	script, ok := unwrapShell(words)
	return script, ok
}

// literalWord is the value of a word made only of literals and quotes.
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(x.Value)
		case *syntax.SglQuoted:
			if x.Dollar {
				return "", false
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// shells are the interpreters whose -c script is judged as a command line.
var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true}

// unwrapShell returns the script of argv shaped like `[/bin/]bash -lc <script>`
// (or -c, or separate -l -c) when it is one.
func unwrapShell(argv []string) (string, bool) {
	if len(argv) < 3 || !shells[filepath.Base(argv[0])] {
		return "", false
	}
	sawC := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if sawC {
			return a, true
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return "", false
		}
		// Single-letter flag bundles only: -c, -lc, -ec, -l -c …
		if strings.HasPrefix(a, "--") {
			return "", false
		}
		if strings.ContainsRune(a[1:], 'c') {
			sawC = true
		}
	}
	return "", false
}

// CodexExecCommand is the exec target of a Codex command approval (SPEC §8.2):
// the script inside `bash -lc '…'`, `/bin/bash -lc '…'` or `sh -c '…'`, or the
// command line itself when it is not wrapped. Codex sends command as one
// string ("/bin/bash -lc 'touch x.txt && echo made'"); CodexExecArgv takes the
// argv form.
func CodexExecCommand(command string) string {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 || len(f.Stmts[0].Redirs) > 0 || f.Stmts[0].Background || f.Stmts[0].Negated {
		return command
	}
	if script, ok := shellScript(f.Stmts[0].Cmd); ok {
		return script
	}
	return command
}

// CodexExecArgv is CodexExecCommand for a command given as argv. An argv that
// is not a shell wrapper is joined with spaces.
func CodexExecArgv(argv []string) string {
	if script, ok := unwrapShell(argv); ok {
		return script
	}
	return strings.Join(argv, " ")
}

// maxLinks bounds symlink hops while resolving one path, like the kernel's
// MAXSYMLINKS, so a loop ends.
const maxLinks = 40

// resolvePath makes a path absolute against base (the call's cwd or the work
// folder), cleans it and resolves symlinks on its longest existing prefix.
// A dangling symlink is followed to where it points, because writing through
// it creates its target there. ok is false when the path cannot be resolved:
// relative with no base, a symlink loop, an unreadable folder.
func resolvePath(p, base string) (string, bool) {
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		if base == "" || !filepath.IsAbs(base) {
			return "", false
		}
		p = filepath.Join(base, p)
	}
	return resolveAbs(filepath.Clean(p), 0)
}

func resolveAbs(p string, hops int) (string, bool) {
	if hops > maxLinks {
		return "", false
	}
	prefix, rest := p, ""
	for {
		_, err := os.Lstat(prefix)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", false
		}
		parent := filepath.Dir(prefix)
		if parent == prefix {
			return "", false
		}
		rest = filepath.Join(filepath.Base(prefix), rest)
		prefix = parent
	}
	real, err := filepath.EvalSymlinks(prefix)
	if err == nil {
		return filepath.Join(real, rest), true
	}
	// prefix exists as an entry, so only its last element can be at fault:
	// a dangling link (follow it by hand) or a loop (the hop count ends it).
	fi, err := os.Lstat(prefix)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return "", false
	}
	target, err := os.Readlink(prefix)
	if err != nil {
		return "", false
	}
	if !filepath.IsAbs(target) {
		dir, err := filepath.EvalSymlinks(filepath.Dir(prefix))
		if err != nil {
			return "", false
		}
		target = filepath.Join(dir, target)
	}
	return resolveAbs(filepath.Join(target, rest), hops+1)
}

// resolveWalk resolves a path the way the kernel opens it: component by
// component from the root, a symlink replaced by its target before a later
// ".." applies, so "link/../x" is x beside the link's target. resolvePath
// cleans first, which is how a tool that normalises a path before opening it
// reads it; the gate judges both readings. Components that do not exist are
// taken as written. ok is false for a relative path with no base, a loop or
// an unreadable folder.
func resolveWalk(p, base string) (string, bool) {
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		if base == "" || !filepath.IsAbs(base) {
			return "", false
		}
		p = base + string(filepath.Separator) + p // not Join: it cleans ".." away
	}
	todo := strings.Split(p, string(filepath.Separator))
	cur, hops := string(filepath.Separator), 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // cur holds no link, so this is the kernel's ".."
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			cur = next
		case err != nil:
			return "", false
		case fi.Mode()&fs.ModeSymlink != 0:
			if hops++; hops > maxLinks {
				return "", false
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", false
			}
			if filepath.IsAbs(target) {
				cur = string(filepath.Separator)
			}
			todo = append(strings.Split(target, string(filepath.Separator)), todo...)
		default:
			cur = next
		}
	}
	return cur, true
}

// within reports whether resolved path p lies in folder dir (or is dir).
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}
