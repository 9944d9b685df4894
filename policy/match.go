package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/syntax"
)

// foldSpace folds every run of whitespace to one space and trims both ends.
func foldSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// MatchCommand reports whether a command pattern matches a command line as
// bhw-run reads it: the worker's glob (fnmatch.go: `*`, `?`, `[…]`,
// `[!…]`), anchored at both ends, with runs of whitespace folded in both. A
// pattern the worker cannot read matches (Validate refuses it first).
func MatchCommand(pattern, command string) bool {
	ok, err := Fnmatch(foldSpace(pattern), foldSpace(command))
	return ok || err != nil
}

// Limits on the work one command line may cost the gate. Parsing is
// recursive (a nesting level costs the parser up to ~6 KiB of stack) and each
// nested statement's text holds the text of those inside it, so a line of
// 25,000 nested $( ) once took gigabytes. A line past a limit is over-limit:
// the parts found before the limit are judged as usual, the line is judged as
// one string too (so a rule that matches it as written still decides), and
// the call is at best ask. Every realistic command line stays far inside them.
const (
	// Linux refuses a single argument this long (MAX_ARG_STRLEN), so a line
	// past it cannot run as `bash -c <line>`, which is how agents run one.
	maxLineBytes = 128 << 10
	// Bytes that can open a nesting level in the parser: ( { [ ` ! ?. Their
	// count bounds the parser's depth before it runs; 4096 bounds its stack
	// to some 25 MiB. About one byte in thirty of code is one of them, so a
	// here-document of code reaches it only near the length limit.
	maxOpeners = 4096
	// Statements nested in one another (subshells, substitutions, blocks,
	// bodies of if/while/for, functions).
	maxStmtDepth = 64
	// Scripts run through `bash -c`, `eval` or a wrapper, inside each other.
	maxScriptDepth = 4
	// Simple commands in one line, and the bytes of all their readings.
	maxParts     = 1024
	maxFormBytes = 1 << 20
	// Steps of the walk that matches a rule against a reading with unknown
	// words (mayMatch), for one call.
	maxMatchCells = 1 << 24
)

// part is one simple command of a line as rules read it.
type part struct {
	source string // the statement as written, folded: what every rule reads
	// words is the words the shell runs (quotes removed; assignments and
	// redirections set aside), nil when the statement has none (a
	// declaration, a test, redirections alone) or they read exactly as the
	// source does.
	words *form
	// strict are the readings only deny and ask rules see.
	strict []form
	// raw: the text could not be split (it does not parse, or it is past a
	// limit) and is judged as one string; it is at best ask. why says so.
	raw bool
	why string
	// assigns: the statement starts with NAME=value assignments, which an
	// allow rule never reads past.
	assigns bool
}

// split is a command line split into parts.
type split struct {
	parts []part
	// over names the limit the line is past, "" when none.
	over string
	// unparsed: the line does not parse (a script inside it that does not
	// is a raw part of its own).
	unparsed bool
	bytes    int
}

// splitLine splits a command line into its simple commands with a real shell
// parser: pipelines, lists, subshells, blocks, control structures, command
// and process substitutions, and the scripts of `bash -c '…'` and `eval`
// (also past a wrapper such as sudo). Each part keeps its redirections in its
// source ("echo hi > /etc/x"), so a rule for the command sees where it
// writes. A line that does not parse gives the statements before the error
// (bash runs those before it stops) and the line as one raw part.
func splitLine(line string) split {
	var sp split
	sp.script(line, 0)
	return sp
}

func (sp *split) script(line string, depth int) {
	if depth > maxScriptDepth {
		sp.overLimit(line, fmt.Sprintf("scripts run by scripts more than %d deep", maxScriptDepth))
		return
	}
	// Past the cut, the line is not parsed at all: the statements that end
	// before it are judged, the rest only as part of the line as one string.
	cut, why := cutPoint(line)
	stmts, err := parseStmts(line[:cut])
	for _, st := range stmts {
		if cut < len(line) && int(st.End().Offset()) >= cut {
			break // it may go on past the cut
		}
		if sp.over != "" {
			return
		}
		sp.walk(line, st, depth)
	}
	switch {
	case cut < len(line):
		sp.overLimit(line, why)
	case err != nil && sp.over == "":
		why := "the line does not parse as shell"
		if depth == 0 {
			sp.unparsed = true
		} else {
			why = fmt.Sprintf("the script %q does not parse as shell", foldSpace(line))
		}
		sp.parts = append(sp.parts, part{source: foldSpace(line), raw: true, why: why})
	}
}

// parseStmts parses a script's statements one by one, so those before a
// syntax error are kept. A panic in the parser on hostile input is an error
// (the line is then judged as one string), not the end of the run.
func parseStmts(script string) (stmts []*syntax.Stmt, err error) {
	defer func() {
		if r := recover(); r != nil {
			stmts, err = nil, fmt.Errorf("the shell parser failed: %v", r)
		}
	}()
	// The loop never stops the iterator early: mvdan.cc/sh v3.14.1's
	// StmtsSeq panics when asked to ("range function continued iteration").
	for st, e := range syntax.NewParser(syntax.Variant(syntax.LangBash)).StmtsSeq(strings.NewReader(script)) {
		if e != nil {
			err = e
			continue
		}
		stmts = append(stmts, st)
	}
	return stmts, err
}

// cutPoint is how much of a line the parser is given: all of it, or the
// bytes before the limit it passes, and which limit that is.
func cutPoint(line string) (int, string) {
	n := 0
	for i := 0; i < len(line); i++ {
		if i == maxLineBytes {
			return i, fmt.Sprintf("longer than %d KiB", maxLineBytes>>10)
		}
		switch line[i] {
		case '(', '{', '[', '`', '!', '?':
			if n++; n > maxOpeners {
				return i, fmt.Sprintf("more than %d of ( { [ ` ! ?", maxOpeners)
			}
		}
	}
	return len(line), ""
}

// overLimit stops the split: what follows is judged as one raw string.
func (sp *split) overLimit(text, why string) {
	if sp.over == "" {
		sp.over = why
		sp.parts = append(sp.parts, part{source: foldSpace(text), raw: true, why: "the line is over the gate's limits (" + why + ")"})
	}
}

func (sp *split) walk(line string, root *syntax.Stmt, depth int) {
	// For each node Walk is inside: the node, and whether it counts as a
	// level of nesting. The operands of `&&`, `||` and `|` are statements
	// beside each other, not inside each other.
	type open struct {
		node  syntax.Node
		level bool
	}
	var stack []open
	nest := 0
	syntax.Walk(root, func(n syntax.Node) bool {
		if n == nil {
			if stack[len(stack)-1].level {
				nest--
			}
			stack = stack[:len(stack)-1]
			return true
		}
		if sp.over != "" {
			return false
		}
		st, isStmt := n.(*syntax.Stmt)
		level := false
		if isStmt {
			inList := false
			if len(stack) > 0 {
				_, inList = stack[len(stack)-1].node.(*syntax.BinaryCmd)
			}
			if level = !inList; level && nest == maxStmtDepth {
				sp.overLimit(line, fmt.Sprintf("statements nested more than %d deep", maxStmtDepth))
				return false
			}
			if simpleCommand(st.Cmd) {
				sp.add(line, st, depth)
			}
		}
		if level {
			nest++
		}
		stack = append(stack, open{n, level})
		return true
	})
}

// add reads one simple statement into a part, then splits the scripts it
// runs.
func (sp *split) add(line string, st *syntax.Stmt, depth int) {
	src, ok := stmtSource(line, st)
	if !ok {
		return
	}
	pt := part{source: src}
	budget := maxFormBytes - sp.bytes - len(src)
	var scripts []string
	if call, ok := st.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
		pt.assigns = len(call.Assigns) > 0
		scripts = readCall(&pt, line, st, call, &budget)
	} else {
		scripts = clauseScripts(st.Cmd) // shells.go: subscripts in declare, let, [[ -v ]]
	}
	sp.bytes = maxFormBytes - budget
	if budget < 0 || len(sp.parts) >= maxParts {
		why := fmt.Sprintf("more than %d simple commands", maxParts)
		if budget < 0 {
			why = fmt.Sprintf("its commands read more than %d KiB", maxFormBytes>>10)
		}
		sp.overLimit(line, why)
		return
	}
	sp.parts = append(sp.parts, pt)
	for _, s := range scripts {
		sp.script(s, depth+1)
	}
}

// readCall fills in a call's readings (see words.go) and returns the scripts
// it runs. Each step's cost is taken from *budget; it stops when that runs
// out.
func readCall(pt *part, line string, st *syntax.Stmt, call *syntax.CallExpr, budget *int) []string {
	ws := readWords(line, call.Args, budget)
	if *budget < 0 {
		return nil
	}
	if *budget -= wordsCost(ws); *budget < 0 {
		return nil
	}
	if w := joinWords(ws, "the words the shell runs"); w.wild() || w.text() != pt.source {
		pt.words = &w
	}
	tails := commandTails(ws, budget)
	if *budget < 0 {
		return nil
	}
	pt.strict = strictForms(ws, redirWords(line, st.Redirs), tails, budget)
	if *budget < 0 {
		return nil
	}
	scripts, unknown := wrappedScripts(ws, tails)
	in, inUnknown := shellScripts(line, ws, tails, st.Redirs, budget)
	scripts, unknown = append(scripts, in...), append(unknown, inUnknown...)
	for _, u := range unknown {
		pt.strict = append(pt.strict, form{segs: []seg{{text: u, wild: anyText}}, display: u, note: "a command only known when the shell runs"})
		*budget -= len(u)
	}
	return scripts
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
// word is known, so "bash -c 'rm -rf /'" is judged as "rm -rf /" too.
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

// literalWord is the value of a word the shell reads as one known word.
func literalWord(w *syntax.Word) (string, bool) {
	ws := readWord("", w)
	if len(ws) != 1 {
		return "", false
	}
	return ws[0].value()
}

// CodexExecCommand is the exec target of a Codex command approval:
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
	if unanchored(p, base) {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return resolveAbs(filepath.Clean(p), 0)
}

// unanchored reports a path that cannot be resolved: empty, or relative
// with no absolute base to resolve it against.
func unanchored(p, base string) bool {
	return p == "" || !filepath.IsAbs(p) && !filepath.IsAbs(base)
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
	if unanchored(p, base) {
		return "", false
	}
	if !filepath.IsAbs(p) {
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

// Within reports whether path p is folder dir or lies below it. Both are
// taken as they are, lexically: resolve their symlinks first where a link
// could lead out.
func Within(dir, p string) bool {
	dir, p = filepath.Clean(dir), filepath.Clean(p)
	if dir == "/" {
		return filepath.IsAbs(p)
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}
