package policy

import (
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// How the gate reads a shell's own arguments, to find the scripts it runs.
//
// A shell runs the command string of -c, or the script file named by its
// first operand, or what it reads from its input (no operand, or -s). Which
// word is which depends on each shell's option grammar: `bash --rcfile f -o
// errexit -c -- 'rm -rf x'` runs "rm -rf x", and `bash -c ls 'rm -rf x'` runs
// ls with $0 set to "rm -rf x". The grammars below were checked against bash
// 5.2, dash 0.5.12, zsh 5.9 and ksh 93u+m; where the shells that may answer
// to a name disagree (sh is bash, dash, zsh or ksh depending on the machine),
// every reading under which the shell runs something is followed, so a
// script is never missed for want of the right one.
//
// A script file that names a file descriptor (/dev/stdin, /dev/fd/N,
// /proc/self/fd/N) is read from that descriptor's here-document or
// here-string like a shell reading its input, and `. file` and `source file`
// likewise; a process substitution as the script (`bash <(…)`) is a script
// only known when the shell runs, like `curl … | sh`.

// shellSyntax is how one shell reads its options.
type shellSyntax struct {
	// arg are the short options that take an argument (-o errexit), maybe
	// those that take one in only some of the shells of this name: both
	// readings are followed.
	arg, maybe string
	// rest says where such an option finds its argument: the next word
	// (bash, dash: `-oc errexit 'cmd'`), or the rest of its cluster when
	// there is one (zsh, ksh: -oerrexit); restBoth follows both.
	rest argPlace
	// end are the short options that end the options (zsh -b); they are
	// read as plain options too.
	end string
	// longs are the long options (--name, bash also -name) and whether
	// each takes the next word as its argument; anyLong: every --name is
	// an option without one (zsh and ksh name their set options so).
	longs   map[string]bool
	anyLong bool
	// singleDash: a long option may be written -name before any short
	// option (bash -norc); after one it is a cluster. Both are read.
	singleDash bool
	// nameRuns: a script file name without a slash that is not a file is
	// run as the command `name "$@"` (ksh 93).
	nameRuns bool
}

type argPlace uint8

const (
	nextWord argPlace = iota
	restOfCluster
	restBoth
)

var bashLongs = map[string]bool{
	"rcfile": true, "init-file": true,
	"debugger": false, "dump-po-strings": false, "dump-strings": false, "help": false, "login": false,
	"noediting": false, "noprofile": false, "norc": false, "posix": false, "pretty-print": false,
	"protected": false, "restricted": false, "verbose": false, "version": false, "wordexp": false,
}

var (
	bashSyntax = shellSyntax{arg: "oO", longs: bashLongs, singleDash: true}
	dashSyntax = shellSyntax{arg: "o"}
	zshSyntax  = shellSyntax{arg: "o", rest: restOfCluster, end: "b", longs: map[string]bool{"emulate": true}, anyLong: true}
	// ksh 93 builds differ on -R file (a cross-reference database), mksh
	// takes -T tty.
	kshSyntax = shellSyntax{arg: "o", maybe: "RT", rest: restOfCluster, anyLong: true, nameRuns: true}
	// sh is whichever of them the machine links there; ksh's habit of
	// running a missing script's name is left out, for `sh install.sh`
	// would read as a command.
	shSyntax = shellSyntax{arg: "o", maybe: "ORT", rest: restBoth, end: "b",
		longs: mergeLongs(bashLongs, map[string]bool{"emulate": true}), anyLong: true, singleDash: true}
)

func mergeLongs(a, b map[string]bool) map[string]bool {
	m := make(map[string]bool, len(a)+len(b))
	for _, x := range []map[string]bool{a, b} {
		for k, v := range x {
			m[k] = v
		}
	}
	return m
}

// shells are the interpreters whose scripts are judged as command lines.
var shells = map[string]shellSyntax{
	"sh": shSyntax, "bash": bashSyntax, "rbash": bashSyntax, "dash": dashSyntax, "ash": dashSyntax,
	"zsh": zshSyntax, "ksh": kshSyntax, "ksh93": kshSyntax, "mksh": kshSyntax,
}

// input says whether a shell reads its commands from its standard input.
type input uint8

const (
	noInput input = iota
	// mayInput: only for some value of an unknown word (`bash "$X"` with
	// X=-s): a here-document or here-string it is given is judged as its
	// script, an input it inherits is not.
	mayInput
	readsInput
)

// shellRun is what a shell's arguments say it runs.
type shellRun struct {
	scripts []string // command strings the gate knows
	unknown []string // command strings only known when the shell runs, as written
	input   input
	files   []word // the words that may name its script file
}

// shellState is one reading of a shell's arguments: the word it is at, and
// what the options before it said.
type shellState struct {
	i            int
	cmd, stdin   bool // -c, -s seen
	assumed      bool // an unknown word was read as an option
	letter, need int  // within a cluster: the letter at, the words its options take
}

// readShell reads the arguments of a shell, ws[0] being its name. Every
// reading the grammar allows is followed; each step costs *budget a little.
func readShell(syn shellSyntax, ws []word, budget *int) shellRun {
	var r shellRun
	seen := map[shellState]bool{}
	var todo []shellState
	push := func(s shellState) {
		if s.i <= len(ws) && !seen[s] {
			seen[s] = true
			todo = append(todo, s)
		}
	}
	next := func(s shellState, n int) shellState {
		return shellState{i: s.i + n, cmd: s.cmd, stdin: s.stdin, assumed: s.assumed}
	}
	push(shellState{i: 1})
	for len(todo) > 0 {
		if *budget -= 16; *budget < 0 {
			return r
		}
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if s.i == len(ws) {
			r.operand(syn, ws, s, s.i)
			continue
		}
		v, ok := ws[s.i].value()
		switch {
		case s.letter > 0:
			r.letter(syn, ws, v, s, push)
		case !ok:
			r.unknownWord(syn, ws, s, push)
		case v == "--" || v == "-":
			r.operand(syn, ws, s, s.i+1)
		case strings.HasPrefix(v, "--"):
			// A long option the shell does not know stops it: nothing runs,
			// so reading it as an option misses nothing.
			name, _, valued := strings.Cut(v[2:], "=")
			if syn.longs[name] && !valued {
				push(next(s, 2))
			} else {
				push(next(s, 1))
			}
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			if takes, ok := syn.longs[v[1:]]; ok && v[0] == '-' && syn.singleDash {
				if takes {
					push(next(s, 2))
				} else {
					push(next(s, 1))
				}
			}
			s.letter = 1
			push(s)
		default:
			r.operand(syn, ws, s, s.i)
		}
	}
	return r
}

// letter reads the option letter s.letter of the cluster v.
func (r *shellRun) letter(syn shellSyntax, ws []word, v string, s shellState, push func(shellState)) {
	if s.letter == len(v) {
		push(shellState{i: s.i + 1 + s.need, cmd: s.cmd, stdin: s.stdin, assumed: s.assumed})
		return
	}
	c := v[s.letter]
	s.letter++
	switch c {
	case 'c': // +c too, in every shell
		s.cmd = true
	case 's':
		s.stdin = true
	}
	if strings.IndexByte(syn.end, c) >= 0 {
		r.operand(syn, ws, s, s.i+1+s.need)
	}
	takes := strings.IndexByte(syn.arg, c) >= 0
	if strings.IndexByte(syn.maybe, c) >= 0 {
		push(s) // a plain option
		takes = true
	}
	if !takes {
		push(s)
		return
	}
	if s.letter < len(v) && syn.rest != nextWord {
		// The rest of the cluster is the argument.
		push(shellState{i: s.i + 1 + s.need, cmd: s.cmd, stdin: s.stdin, assumed: s.assumed})
	}
	if s.letter == len(v) || syn.rest != restOfCluster {
		s.need++
		push(s)
	}
}

// unknownWord reads a word the gate cannot know where an option may stand.
// A word with a slash, a dot or a space the gate knows names a script file
// (`bash "$DIR/x.sh"`, `bash $HOME/x.sh`). Else, unquoted, it may be any
// words: options, -c and a script among them. Quoted, it is one word: an
// operand, or options that may take the words after it (then one of those
// may be the command string).
func (r *shellRun) unknownWord(syn shellSyntax, ws []word, s shellState, push func(shellState)) {
	w := ws[s.i]
	r.operand(syn, ws, s, s.i)
	for _, g := range w {
		if g.wild == known && strings.ContainsAny(g.text, "/. \t\n") {
			return
		}
	}
	if splits(w) {
		r.unknown = appendNew(r.unknown, "what "+joinWords(ws, "").display+" runs")
	}
	for _, cmd := range []bool{s.cmd, true} {
		for n := 1; n <= 3; n++ {
			push(shellState{i: s.i + n, cmd: cmd, stdin: s.stdin, assumed: true})
		}
	}
}

// operand reads the shell's first operand, ws[k] (none when k is past the
// end), once its options are read.
func (r *shellRun) operand(syn shellSyntax, ws []word, s shellState, k int) {
	switch {
	case s.cmd && k < len(ws):
		if v, ok := ws[k].value(); ok {
			r.scripts = appendNew(r.scripts, v)
		} else {
			r.unknown = appendNew(r.unknown, ws[k].String())
		}
	case s.cmd:
		// -c without its command string: the shell refuses to start.
	case s.stdin || k >= len(ws):
		in := readsInput
		if s.assumed {
			in = mayInput
		}
		r.input = max(r.input, in)
	default:
		r.files = append(r.files, ws[k])
		if !syn.nameRuns {
			return
		}
		v, ok := ws[k].value()
		switch {
		case ok && !strings.Contains(v, "/"):
			script := v
			if k+1 < len(ws) {
				script += ` "$@"`
			}
			r.scripts = appendNew(r.scripts, script)
		case !ok && !strings.Contains(ws[k].String(), "/"):
			r.unknown = appendNew(r.unknown, "what "+joinWords(ws, "").display+" runs")
		}
	}
}

// splits reports whether a word holds an unquoted stretch the gate cannot
// know: it may be any words, or none.
func splits(w word) bool {
	for _, g := range w {
		if g.wild == anyText {
			return true
		}
	}
	return false
}

func appendNew(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

// sourceRun reads `. file` and `source file`: the file is a script of the
// running shell.
func sourceRun(ws []word) shellRun {
	for i := 1; i < len(ws); i++ {
		switch v, _ := ws[i].value(); v {
		case "--":
		case "-p": // bash 5.3: the path to search
			i++
		default:
			return shellRun{files: []word{ws[i]}}
		}
	}
	return shellRun{}
}

// shellScripts are the scripts the shells of a call read other than from
// -c (wrappedScripts): from their input (`bash`, `sh -s`, `cat x | sh`), from
// a script file that is a file descriptor (`bash /dev/stdin <<< …`,
// `. /dev/fd/3 3<<EOF`) or a process substitution (`source <(…)`), also
// behind a wrapper. A here-document or here-string is the script when the
// gate knows its text; unknown holds the rest, as written, for such a shell
// may run any command.
func shellScripts(line string, ws []word, tails []tail, redirs []*syntax.Redirect, budget *int) (scripts, unknown []string) {
	allWords := ws
	for _, t := range tails {
		ws := ws[t.start:]
		name, ok := commandName(ws)
		var r shellRun
		if syn, isShell := shells[name]; ok && isShell {
			r = readShell(syn, ws, budget)
		} else if ok && (name == "." || name == "source") {
			r = sourceRun(ws)
		} else {
			continue
		}
		scripts, unknown = append(scripts, r.scripts...), append(unknown, r.unknown...)
		unknown = append(unknown, placeholderScripts(allWords[:t.start], ws, r)...)
		what := "what " + joinWords(ws, "").display + " reads"
		if r.input != noInput {
			s, u := fdScripts(line, redirs, 0, r.input == readsInput, what)
			scripts, unknown = append(scripts, s...), append(unknown, u...)
		}
		for _, f := range r.files {
			v, known := f.value()
			fd, isFd := scriptFd(v)
			switch {
			case known && isFd && fd >= 0:
				s, u := fdScripts(line, redirs, fd, true, what)
				scripts, unknown = append(scripts, s...), append(unknown, u...)
			case known && isFd:
				unknown = append(unknown, what+" from "+v)
			case known:
				// A script file: judged as the line says it (`bash x.sh`).
			case len(f) > 0 && f[0].wild == anyText && strings.HasPrefix(f[0].text, "<("):
				unknown = append(unknown, what+" from "+f.String())
			default:
				// It may name any descriptor: each here-document is its
				// script too.
				for _, rd := range redirs {
					if isHere(rd) {
						s, u := hereScript(line, rd, what)
						scripts, unknown = append(scripts, s...), append(unknown, u...)
					}
				}
			}
		}
	}
	return scripts, unknown
}

// scriptFd is the file descriptor a script file name opens, when it names
// one: /dev/stdin (0), /dev/fd/3, /proc/self/fd/3, and the same read from
// another folder (stdin, fd/3). fd is -1 for another name under /proc (a
// descriptor of some process, or a name the gate does not follow).
func scriptFd(name string) (fd int, ok bool) {
	if name == "" {
		return 0, false
	}
	p := path.Clean(name)
	switch path.Base(p) {
	case "stdin":
		return 0, true
	case "stdout":
		return 1, true
	case "stderr":
		return 2, true
	}
	if path.Base(path.Dir(p)) == "fd" {
		if n, err := strconv.Atoi(path.Base(p)); err == nil && n >= 0 {
			return n, true
		}
		return -1, true
	}
	if strings.HasPrefix(p, "/proc/") {
		return -1, true
	}
	return 0, false
}

func isHere(r *syntax.Redirect) bool {
	return r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc || r.Op == syntax.WordHdoc
}

// fdScripts is what a shell reads as its script from descriptor fd: the text
// of the here-document or here-string the statement gives it when the gate
// knows it. Anything else it reads (a file, a pipe, what it inherits) is only
// known when it runs, and counts when sure: for a shell that certainly reads
// it, not one that might for some value of an unknown word.
func fdScripts(line string, redirs []*syntax.Redirect, fd int, sure bool, what string) (scripts, unknown []string) {
	var last *syntax.Redirect
	for _, r := range redirs {
		n := 0
		switch {
		case r.N != nil:
			n, _ = strconv.Atoi(r.N.Value)
		case isHere(r), r.Op == syntax.RdrIn, r.Op == syntax.RdrInOut, r.Op == syntax.DplIn:
		default:
			n = 1
		}
		if n == fd {
			last = r
		}
	}
	switch {
	case last != nil && isHere(last):
		return hereScript(line, last, what)
	case sure:
		return nil, []string{what}
	}
	return nil, nil
}

// hereScript is the text of a here-document or here-string when the gate
// knows it; else it is unknown, as written.
func hereScript(line string, r *syntax.Redirect, what string) (scripts, unknown []string) {
	if r.Op == syntax.WordHdoc {
		if w := readWord(line, r.Word); len(w) == 1 {
			if v, ok := w[0].value(); ok {
				return []string{v}, nil
			}
		}
		return nil, []string{nodeSource(line, r.Word)}
	}
	if r.Hdoc == nil {
		return nil, []string{what}
	}
	if body, ok := hdocText(r.Hdoc); ok {
		return []string{body}, nil
	}
	return nil, []string{nodeSource(line, r.Hdoc)}
}

// laterScripts are the strings a shell keeps to run later, judged as
// scripts: a trap's action, an alias's text (run with the words that follow
// its name, so `alias x=rm` reads "rm …"), and the file `hash -p file name`
// (zsh: `hash name=file`) makes a name run. unknown holds those only known
// when the shell runs.
func laterScripts(ws []word) (scripts, unknown []string) {
	name, ok := commandName(ws)
	if !ok {
		return nil, nil
	}
	args := ws[1:]
	const withArgs = ` "$@"`
	switch name {
	case "trap":
		i := 0
		for ; i < len(args); i++ {
			v, ok := args[i].value()
			if !ok || v == "-" || !strings.HasPrefix(v, "-") {
				break
			}
			if v == "--" {
				i++
				break
			}
			if strings.ContainsAny(v, "lpP") {
				return nil, nil // it lists signals or traps
			}
		}
		ops := args[i:]
		if len(ops) == 0 {
			return nil, nil
		}
		v, ok := ops[0].value()
		switch {
		case !ok:
			if len(ops) > 1 || splits(ops[0]) {
				unknown = append(unknown, ops[0].String())
			}
		case len(ops) == 1, v == "", v == "-", isUnsigned(v):
			// A lone condition, or the action "" (ignore), "-" or a
			// number (reset): nothing to run.
		default:
			scripts = append(scripts, v)
		}
	case "alias":
		for _, w := range args {
			v, ok := w.value()
			switch {
			case !ok:
				unknown = append(unknown, "the alias "+w.String())
			case strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+"):
			default:
				if _, text, ok := strings.Cut(v, "="); ok {
					scripts = append(scripts, text+withArgs)
				}
			}
		}
	case "declare", "typeset", "local", "let", "read", "unset", "printf", "test", "[", "mapfile", "readarray":
		return subscriptScripts(name, args)
	case "hash":
		dirs := false
		for i := 0; i < len(args); i++ {
			v, ok := args[i].value()
			if !ok {
				// It may be -p and a file.
				return scripts, append(unknown, "what hash "+args[i].String()+" makes a name run")
			}
			switch {
			case v == "--":
			case strings.HasPrefix(v, "-") && len(v) > 1:
				dirs = dirs || strings.ContainsRune(v, 'd') // zsh: named folders
				j := strings.IndexByte(v, 'p')
				switch {
				case j < 0:
				case j+1 < len(v):
					scripts = append(scripts, shellQuote(v[j+1:])+withArgs)
				case i+1 < len(args):
					i++
					f, ok := args[i].value()
					if !ok {
						return scripts, append(unknown, args[i].String())
					}
					scripts = append(scripts, shellQuote(f)+withArgs)
				}
			case !dirs:
				if _, file, ok := strings.Cut(v, "="); ok {
					scripts = append(scripts, shellQuote(file)+withArgs)
				}
			}
		}
	}
	return scripts, unknown
}

// subscriptScripts are the commands bash runs while it evaluates an array
// subscript in a literal string: a builtin that takes a variable's name
// (declare, typeset, local, read, unset, `printf -v`, `test -v`) or an
// arithmetic expression (let) expands `a[$(…)]` when it runs, though the
// quotes kept it from the line's own expansions; and mapfile's (readarray's)
// -C callback is a command string it runs for each line. Each subscript
// holding a command substitution is judged as `: <subscript>`, the
// callback as a script; unknown holds a callback only known when the
// shell runs. (Checked in bash 5.2: export and readonly refuse such a
// name without running it.)
func subscriptScripts(name string, args []word) (scripts, unknown []string) {
	names := args
	switch name {
	case "printf", "test", "[":
		// Only the argument of -v is a name.
		names = nil
		for i := 0; i+1 < len(args); i++ {
			if v, ok := args[i].value(); ok && v == "-v" {
				names = append(names, args[i+1])
			}
		}
	case "mapfile", "readarray":
		names = nil
		for i := 0; i < len(args); i++ {
			v, ok := args[i].value()
			if !ok || !strings.HasPrefix(v, "-") || v == "-" || v == "--" {
				continue
			}
			j := strings.IndexByte(v, 'C')
			if j < 0 || strings.ContainsAny(v[1:j], "dnOsuc") {
				continue // no callback, or C is another option's argument
			}
			cb := v[j+1:]
			if cb == "" && i+1 < len(args) {
				i++
				var ok bool
				if cb, ok = args[i].value(); !ok {
					unknown = append(unknown, "the callback "+args[i].String())
					continue
				}
			}
			if cb != "" {
				scripts = append(scripts, cb+` "$@"`)
			}
		}
	}
	for _, w := range names {
		v, ok := w.value()
		if !ok {
			continue
		}
		for _, sub := range subscripts(v) {
			if strings.Contains(sub, "$(") || strings.Contains(sub, "`") {
				scripts = append(scripts, ": "+sub)
			}
		}
	}
	return scripts, unknown
}

// clauseScripts are subscriptScripts for the builtins the parser reads as
// clauses of their own rather than as calls: declare, typeset and local
// (not export or readonly, which refuse such a name), let, and [[ -v ]].
func clauseScripts(c syntax.Command) (scripts []string) {
	var words []*syntax.Word
	switch c := c.(type) {
	case *syntax.DeclClause:
		if v := c.Variant.Value; v != "declare" && v != "typeset" && v != "local" {
			return nil
		}
		for _, a := range c.Args {
			if a.Naked && a.Value != nil {
				words = append(words, a.Value)
			}
		}
	case *syntax.LetClause:
		for _, e := range c.Exprs {
			if w, ok := e.(*syntax.Word); ok {
				words = append(words, w)
			}
		}
	case *syntax.TestClause:
		syntax.Walk(c, func(n syntax.Node) bool {
			if u, ok := n.(*syntax.UnaryTest); ok && (u.Op == syntax.TsVarSet || u.Op == syntax.TsRefVar) {
				if w, ok := u.X.(*syntax.Word); ok {
					words = append(words, w)
				}
			}
			return true
		})
	}
	for _, w := range words {
		v, ok := literalWord(w)
		if !ok {
			continue
		}
		for _, sub := range subscripts(v) {
			if strings.Contains(sub, "$(") || strings.Contains(sub, "`") {
				scripts = append(scripts, ": "+sub)
			}
		}
	}
	return scripts
}

// subscripts are the texts between each outermost [ and its ] in v.
func subscripts(v string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '[':
			if depth == 0 {
				start = i + 1
			}
			depth++
		case ']':
			if depth > 0 {
				if depth--; depth == 0 {
					out = append(out, v[start:i])
				}
			}
		}
	}
	if depth > 0 {
		out = append(out, v[start:]) // unclosed: bash still expands it
	}
	return out
}

// placeholderScripts are the command strings that a shell run by xargs,
// parallel or find -exec gets from its runner rather than from the line:
// a -c script holding the runner's placeholder ({}, or xargs's -I/--replace
// string) is run with a file's name or an input line in its place, and a
// -c with no script behind xargs or parallel takes the first line read as
// its script. before are the words before the shell's name; each such
// script is only known when it runs.
func placeholderScripts(before, shell []word, r shellRun) (unknown []string) {
	runner, holders := "", []string{"{}"}
	for i, w := range before {
		v, ok := w.value()
		if !ok {
			continue
		}
		switch {
		case v == "xargs" || v == "parallel" || v == "find":
			runner = v
		case runner != "xargs":
		case v == "-I" && i+1 < len(before):
			if h, ok := before[i+1].value(); ok && h != "" {
				holders = append(holders, h)
			}
		case strings.HasPrefix(v, "-I") && len(v) > 2:
			holders = append(holders, v[2:])
		case strings.HasPrefix(v, "-i") && len(v) > 2:
			holders = append(holders, v[2:])
		case strings.HasPrefix(v, "--replace="):
			holders = append(holders, strings.TrimPrefix(v, "--replace="))
		}
	}
	if runner == "" {
		return nil
	}
	what := "what " + joinWords(shell, "").display + " runs, given by " + runner
	for _, sc := range r.scripts {
		for _, h := range holders {
			if h != "" && strings.Contains(sc, h) {
				return []string{what}
			}
		}
	}
	if runner != "find" && len(r.scripts) == 0 && len(r.unknown) == 0 && len(shell) > 1 {
		if v, ok := shell[len(shell)-1].value(); ok && len(v) > 1 && v[0] == '-' && !strings.HasPrefix(v, "--") && strings.HasSuffix(v, "c") {
			return []string{what}
		}
	}
	return nil
}

func isUnsigned(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// shellQuote is s as one single-quoted shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unwrapShell returns the script of argv shaped like `[/bin/]bash -lc
// <script>` when that is all it runs.
func unwrapShell(argv []string) (string, bool) {
	if len(argv) < 2 {
		return "", false
	}
	syn, ok := shells[filepath.Base(argv[0])]
	if !ok {
		return "", false
	}
	ws := make([]word, len(argv))
	for i, a := range argv {
		ws[i] = knownWord(a)
	}
	budget := maxFormBytes
	r := readShell(syn, ws, &budget)
	if len(r.scripts) != 1 || len(r.unknown) > 0 || r.input != noInput || len(r.files) > 0 || budget < 0 {
		return "", false
	}
	return r.scripts[0], true
}
