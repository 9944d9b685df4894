package policy

import (
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// How a command rule reads a simple command.
//
// The shell runs words, not text: `\rm -rf /`, `r''m -rf /`, `"rm" -rf /`
// and `X=1 rm -rf /` all run rm with -rf and /. So besides the command's
// source text a rule is matched against its words after quote removal
// (escapes and quotes removed, braces expanded), with leading assignments and
// redirections set aside; a rule matches when either reading does. A word
// holding a space or an operator character reads quoted, so `echo '> /x'`
// never reads as a redirection.
//
// A deny or ask rule (a rule that holds a call back) also reads the command
// the way the shell may end up running it, so that no spelling slips past it:
//   - the words followed by the redirections, each as "op target", so
//     `>/etc/x echo hi` reads "echo hi > /etc/x";
//   - the command named without its folder: `/bin/rm -rf /` reads "rm -rf /";
//   - past a wrapper (see wrappers): `sudo -u x rm -rf /` reads "rm -rf /";
//   - a word the gate cannot know before the shell runs (one holding $VAR,
//     ${…}, $(…), `…`, $((…)), <(…), or an unquoted glob) may be anything:
//     an unquoted one any text, several words or none, a quoted one any text
//     within its word; never an operator. The rule matches if it matches for
//     some value of such words, so `$X -rf /` and `$(echo rm) -rf /` are
//     denied by a deny rule "rm -rf *", while `"$PY" x.py` is not (no value
//     of one word makes it read "rm -rf …"). A command only known when the
//     shell runs (`eval "$X"`, `bash -c "$X"`, a shell reading a pipe) may be
//     any command.
//
// Such a match denies (or asks, for an ask rule): the agent is told to write
// the command out. It is not turned into a question, because a person's
// approval is something the thread sends, and nothing the thread sends may
// relax the machine owner's deny.
//
// The scripts a call runs are split into their own parts, judged like the
// line: `eval …`, `su -c '…'`, `env -S '…'`, `watch '…'`, and what a shell
// runs (shells.go: its -c string wherever its options put it, its input, a
// file descriptor or process substitution as its script, and the strings it
// keeps to run later: trap, alias, hash -p), also behind a wrapper.
//
// An allow rule reads only the source and the words (with an unknown word as
// written): it cannot widen what a deny holds back, and it never allows
// `sudo go test` for a rule "go test *", nor `./git status` for "git status".

// wild says what the shell may make of a segment of a word.
type wild uint8

const (
	known    wild = iota // the text itself
	anyText              // any text, spaces included, or nothing at all
	wordText             // any text without a space: it stays in its word
)

// seg is one stretch of a command as the gate reads it: known text, or a
// wild stretch whose text is its source as written.
type seg struct {
	text string
	wild wild
	op   bool // shell syntax (a redirection's operator), never quoted
}

// opChars are the characters of shell operators. The shell never makes an
// operator out of a word's value, so a known word holding one is shown
// quoted in a reading (`echo '> /etc/x'` does not read as a redirection),
// and an unknown stretch never stands for one.
const opChars = "|&;<>()"

// quoted is a known stretch as it reads in a form: single-quoted when it
// holds an operator character or a space, so its words stay its words.
func (s seg) quoted() string {
	if s.wild != known || s.op || !strings.ContainsAny(s.text, opChars) && strings.IndexFunc(s.text, unicode.IsSpace) < 0 {
		return s.text
	}
	return "'" + strings.ReplaceAll(s.text, "'", `'\''`) + "'"
}

// word is one shell word: one known segment when the gate knows it.
type word []seg

func knownWord(s string) word { return word{{text: s}} }

// value is the word's text when it is known.
func (w word) value() (string, bool) {
	if len(w) == 1 && w[0].wild == known {
		return w[0].text, true
	}
	return "", false
}

// String is the word as people read it: quotes removed, wild stretches as
// written.
func (w word) String() string {
	var b strings.Builder
	for _, s := range w {
		b.WriteString(s.text)
	}
	return b.String()
}

// form is one reading of a command: the segments matched against a rule's
// pattern, and how people are told about it.
type form struct {
	segs    []seg
	display string // the words joined by spaces, wild stretches as written
	note    string // "the words the shell runs", …
}

// text is the form as people read it, folded.
func (f form) text() string { return foldSpace(f.display) }

func (f form) wild() bool {
	for _, s := range f.segs {
		if s.wild != known {
			return true
		}
	}
	return false
}

// wordsCost is what the form of words weighs against the line's budget:
// its bytes, and a little for each segment.
func wordsCost(ws []word) int {
	n := 0
	for _, w := range ws {
		n += 16
		for _, s := range w {
			n += len(s.text) + 16
		}
	}
	return n
}

// joinWords makes the form of words joined by spaces. A word that is wholly
// unquoted-unknown may stand for no word at all, so the space beside it may
// vanish too: its wild stretch takes the space's place.
func joinWords(ws []word, note string) form {
	var segs []seg
	var display strings.Builder
	lone := func(w word) bool { return len(w) == 1 && w[0].wild == anyText }
	for i, w := range ws {
		if i > 0 {
			display.WriteByte(' ')
			if !lone(w) && !lone(ws[i-1]) {
				segs = append(segs, seg{text: " "})
			}
		}
		for _, s := range w {
			q := s.quoted()
			if s.wild == known {
				segs = append(segs, seg{text: q})
			} else {
				segs = append(segs, s)
			}
			display.WriteString(q)
		}
	}
	return form{segs: segs, display: display.String(), note: note}
}

// readWords reads the words of a call: each argument after quote removal and
// brace expansion, in order. line is the source the words point into. Each
// word's bytes are taken from *budget; reading stops when it runs out.
func readWords(line string, args []*syntax.Word, budget *int) []word {
	var out []word
	for _, a := range args {
		ws := readWord(line, a)
		for _, w := range ws {
			*budget -= len(w.String()) + 16
		}
		if *budget < 0 {
			return out
		}
		out = append(out, ws...)
	}
	return out
}

// maxBraceWords is how many words one brace expansion may make before the
// gate reads the word as unknown: {a,b}{a,b}… doubles with each pair.
const maxBraceWords = 64

// readWord reads one shell word; brace expansion can make it several.
func readWord(line string, w *syntax.Word) []word {
	if len(w.Parts) == 1 {
		// The common words need no expansion: plain ones and 'quoted' ones.
		switch x := w.Parts[0].(type) {
		case *syntax.Lit:
			if !strings.ContainsAny(x.Value, "\\{~*?[") {
				return []word{knownWord(x.Value)}
			}
		case *syntax.SglQuoted:
			if !x.Dollar {
				return []word{knownWord(x.Value)}
			}
		}
	}
	src := nodeSource(line, w)
	static := true
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if hasGlob(x.Value) {
				// Pathname expansion: any files, as many words as match.
				return []word{{{text: src, wild: anyText}}}
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					static = false
				}
			}
		default:
			static = false
		}
	}
	if static {
		words := []*syntax.Word{w}
		if b := *w; syntax.SplitBraces(&b) { // a copy: SplitBraces replaces its parts
			if braceWords(&b) > maxBraceWords {
				return []word{{{text: src, wild: anyText}}}
			}
			words = nil
			for e, err := range expand.BracesSeq(nil, &b) {
				if err != nil || len(words) == maxBraceWords {
					return []word{{{text: src, wild: anyText}}}
				}
				words = append(words, e)
			}
		}
		var ws []word
		for _, e := range words {
			fields, err := expand.Fields(&expand.Config{}, e)
			if err != nil {
				return []word{{{text: src, wild: anyText}}}
			}
			for _, f := range fields {
				ws = append(ws, knownWord(f))
			}
		}
		return ws
	}
	var segs word
	add := func(s seg) {
		if n := len(segs); n > 0 && s.wild == known && segs[n-1].wild == known {
			segs[n-1].text += s.text
			return
		}
		segs = append(segs, s)
	}
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			if strings.ContainsRune(x.Value, '{') {
				// A brace expansion around an unknown part: too many shapes
				// to follow, so the word may be anything.
				return []word{{{text: src, wild: anyText}}}
			}
			add(seg{text: partValue(x)})
		case *syntax.SglQuoted:
			add(seg{text: partValue(x)})
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				switch y := q.(type) {
				case *syntax.Lit:
					add(seg{text: partValue(&syntax.DblQuoted{Parts: []syntax.WordPart{y}})})
				case *syntax.ParamExp:
					if y.Param != nil && (y.Param.Value == "@" || y.Param.Value == "*") || y.Index != nil || y.Names != 0 {
						// "$@" and "${a[@]}" are as many words as they hold.
						add(seg{text: nodeSource(line, y), wild: anyText})
					} else {
						add(seg{text: nodeSource(line, y), wild: wordText})
					}
				default:
					add(seg{text: nodeSource(line, q), wild: wordText})
				}
			}
		default:
			// Unquoted: split into fields and globbed, so any words or none.
			add(seg{text: nodeSource(line, p), wild: anyText})
		}
	}
	return []word{segs}
}

// braceWords is how many words a brace expansion makes, counted the way
// mvdan.cc/sh/expand expands it, and at most maxBraceWords+1.
func braceWords(w *syntax.Word) int {
	n := 1
	for _, p := range w.Parts {
		br, ok := p.(*syntax.BraceExp)
		if !ok {
			continue
		}
		k := 0
		if br.Sequence {
			k = maxBraceWords + 1
			from, err1 := strconv.ParseInt(br.Elems[0].Lit(), 10, 64)
			to, err2 := strconv.ParseInt(br.Elems[1].Lit(), 10, 64)
			if err1 != nil || err2 != nil {
				a, b := br.Elems[0].Lit(), br.Elems[1].Lit()
				if a != "" && b != "" {
					from, to = int64(a[0]), int64(b[0])
					err1 = nil
				}
			}
			step := int64(1)
			if len(br.Elems) > 2 {
				if s, err := strconv.ParseInt(br.Elems[2].Lit(), 10, 64); err == nil && s != 0 {
					step = max(s, -s)
				}
			}
			if err1 == nil && step > 0 {
				span := max(to-from, from-to)
				if span >= 0 && span/step < maxBraceWords {
					k = int(span/step) + 1
				}
			}
		} else {
			for _, e := range br.Elems {
				k += braceWords(e)
			}
		}
		n *= min(k, maxBraceWords+1)
		if n > maxBraceWords {
			return maxBraceWords + 1
		}
	}
	return n
}

// partValue is the value of one quoted or literal word part after quote
// removal, read by the shell's own rules (mvdan.cc/sh/expand).
func partValue(p syntax.WordPart) string {
	fields, err := expand.Fields(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{p}})
	if err != nil {
		return ""
	}
	return strings.Join(fields, " ")
}

// hasGlob reports whether unquoted literal text holds pathname expansion:
// an unescaped *, ? or a [ closed later by ].
func hasGlob(s string) bool {
	open := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		case '[':
			open = true
		case ']':
			if open {
				return true
			}
		}
	}
	return false
}

func nodeSource(line string, n syntax.Node) string {
	a, b := int(n.Pos().Offset()), int(n.End().Offset())
	if a < 0 || b > len(line) || a > b {
		return ""
	}
	return line[a:b]
}

// redirWords renders redirections as "op target" words, for the reading with
// redirections last. A here-document is its operator and delimiter.
func redirWords(line string, redirs []*syntax.Redirect) []word {
	var out []word
	for _, r := range redirs {
		op := r.Op.String()
		if r.N != nil {
			op = r.N.Value + op
		}
		out = append(out, word{{text: op, op: true}})
		if r.Word != nil {
			out = append(out, readWord(line, r.Word)...)
		}
	}
	return out
}

// withBaseName names the command without its folder when its name has one
// and the part after the last slash is known: /bin/rm → rm, "$D/rm" → rm.
func withBaseName(ws []word) ([]word, bool) {
	if len(ws) == 0 || len(ws[0]) == 0 {
		return nil, false
	}
	last := ws[0][len(ws[0])-1]
	i := strings.LastIndexByte(last.text, '/')
	if last.wild != known || i < 0 || i == len(last.text)-1 {
		return nil, false
	}
	return append([]word{knownWord(last.text[i+1:])}, ws[1:]...), true
}

// commandName is the known name of the command, without its folder.
func commandName(ws []word) (string, bool) {
	if len(ws) == 0 {
		return "", false
	}
	v, ok := ws[0].value()
	if !ok {
		return "", false
	}
	return filepath.Base(v), true
}

// wrapper says how a command that runs another one reads its arguments.
type wrapper struct {
	// positional is how many arguments it takes before the command
	// (timeout's duration, chroot's folder, flock's file).
	positional int
	// assigns: NAME=value arguments set the environment (env, sudo).
	assigns bool
	// appends: it adds arguments of its own the gate cannot see (xargs
	// appends what it reads), so its command's readings end in an unknown
	// stretch.
	appends bool
	// exec: the command follows -exec, -execdir, -ok or -okdir (find).
	exec bool
	// scriptFlags take a shell command line as their argument (su -c,
	// env -S), read as a script.
	scriptFlags []string
	// viaShell: its command's words are joined and run by a shell (watch).
	viaShell bool
}

// wrappers are the commands that run the command named in their arguments.
// A deny or ask rule also reads the command each one may run, so
// `sudo -u x rm -rf /`, `env -i X=1 rm -rf /`, `nice -n 5 rm -rf /`,
// `timeout 5 rm -rf /`, `busybox rm -rf /`, `xargs rm -rf` and
// `find . -exec rm -rf {} +` all read "rm -rf …". Options are not parsed
// per wrapper: every word from the wrapper's name up to the first one that
// must be its command (not an option, not right after an option or an
// unknown word, not an assignment or a positional argument) may start the
// command, and each such tail is read.
var wrappers = map[string]wrapper{
	"builtin": {}, "busybox": {}, "chroot": {positional: 1}, "chrt": {positional: 1},
	"command": {}, "doas": {assigns: true}, "exec": {}, "find": {exec: true},
	"env":    {assigns: true, scriptFlags: []string{"-S", "--split-string"}},
	"flock":  {positional: 1, scriptFlags: []string{"-c", "--command"}},
	"ionice": {}, "nice": {}, "nohup": {}, "nsenter": {}, "parallel": {appends: true},
	"runuser": {positional: 1, scriptFlags: []string{"-c", "--command"}},
	"setsid":  {}, "stdbuf": {}, "strace": {},
	"su":   {positional: 1, scriptFlags: []string{"-c", "--command"}},
	"sudo": {assigns: true}, "taskset": {positional: 1}, "time": {}, "timeout": {positional: 1},
	"toybox": {}, "unshare": {}, "watch": {viaShell: true}, "xargs": {appends: true},
}

// tail is where in a call's words a command may start, and how the wrapper
// that runs it passes it on.
type tail struct {
	start    int
	appends  bool // arguments the gate cannot see follow
	viaShell bool // the words are joined into a shell script
}

// commandTails are the places in a call's words where a command may start:
// the call itself, and every command its wrappers may run, wrappers inside
// wrappers included (`sudo env rm`). Each word looked at costs *budget a
// little; it stops when that runs out.
func commandTails(ws []word, budget *int) []tail {
	tails := []tail{{start: 0}}
	seen := map[int]bool{0: true}
	var by tail // how the wrapper being read passes its command on
	push := func(i int) {
		if i < len(ws) && !seen[i] {
			seen[i] = true
			tails = append(tails, tail{i, by.appends, by.viaShell})
		}
	}
	for n := 0; n < len(tails) && *budget >= 0; n++ {
		k := tails[n].start
		name, ok := commandName(ws[k:])
		w, isWrapper := wrappers[name]
		if !ok || !isWrapper {
			continue
		}
		by = tail{appends: w.appends || tails[n].appends, viaShell: w.viaShell}
		if w.exec {
			for i := k + 1; i < len(ws); i++ {
				*budget -= 8
				v, known := ws[i].value()
				switch {
				case !known:
					// It may be -exec and more.
					push(i)
					push(i + 1)
				case v == "-exec" || v == "-execdir" || v == "-ok" || v == "-okdir":
					push(i + 1)
				}
			}
			continue
		}
		positional, afterOption := w.positional, false
	words:
		for i := k + 1; i < len(ws); i++ {
			*budget -= 8
			push(i)
			v, known := ws[i].value()
			switch {
			case !known:
				afterOption = true // it may be an option taking the next word
			case strings.HasPrefix(v, "-") && v != "-":
				afterOption = true
			case afterOption:
				afterOption = false // perhaps the option's argument
			case w.assigns && isAssignment(v):
			case positional > 0:
				positional--
			default:
				break words // this one must be the command
			}
		}
	}
	return tails
}

// isAssignment reports whether an argument reads NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && !unicode.IsLetter(r) && !(i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// strictForms are the readings only a deny or ask rule sees, for a call's
// words ws and its redirections rw: the words followed by the redirections,
// the name without its folder, and each command a wrapper may run (and that
// one without its folder). Each form's cost is taken from *budget; the forms
// stop when it runs out (the caller then gives up on the line).
func strictForms(ws, rw []word, tails []tail, budget *int) []form {
	var out []form
	add := func(ws []word, note string) bool {
		// The cost is known before the form is built, so a form the budget
		// cannot pay for is never built.
		if *budget -= wordsCost(ws); *budget < 0 {
			return false
		}
		out = append(out, joinWords(ws, note))
		return true
	}
	if len(rw) > 0 && !add(append(append([]word{}, ws...), rw...), "the words and redirections the shell runs") {
		return out
	}
	for _, t := range tails {
		cmd := ws[t.start:]
		note := "the command named without its folder"
		if t.start > 0 {
			name, _ := commandName(ws[:t.start])
			note = "a command " + name + " may run"
			if t.appends {
				cmd = append(append([]word{}, cmd...), word{{text: "…", wild: anyText}})
			}
			if !add(cmd, note) {
				return out
			}
		}
		if b, ok := withBaseName(cmd); ok && !add(b, note) {
			return out
		}
		if g, ok := gitFolded(cmd); ok && !add(g, "git without the options that choose its repository") {
			return out
		}
	}
	return out
}

// gitGlobal are git's options before the subcommand: true for those whose
// value is the next word (unless written --opt=value).
var gitGlobal = map[string]bool{
	"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--exec-path": false, "--config-env": true, "--super-prefix": true, "--list-cmds": true,
	"--bare": false, "--no-pager": false, "-p": false, "--paginate": false, "-P": false,
	"--no-replace-objects": false, "--literal-pathspecs": false, "--glob-pathspecs": false,
	"--noglob-pathspecs": false, "--icase-pathspecs": false, "--no-optional-locks": false,
	"--no-lazy-fetch": false, "--no-advice": false,
}

// gitFolded is a git command without the global options before its
// subcommand (`git -C x -c k=v push` reads `git push`), which relocate the
// repository or the configuration and leave the subcommand the same.
func gitFolded(ws []word) ([]word, bool) {
	if len(ws) < 2 {
		return nil, false
	}
	if name, ok := ws[0].value(); !ok || path.Base(name) != "git" {
		return nil, false
	}
	i := 1
	for i < len(ws) {
		v, ok := ws[i].value()
		if !ok {
			break
		}
		opt, _, withValue := strings.Cut(v, "=")
		takes, known := gitGlobal[opt]
		if !known || withValue && !strings.HasPrefix(opt, "--") {
			break
		}
		i++
		if takes && !withValue {
			i++
		}
	}
	if i == 1 || i >= len(ws) {
		return nil, false
	}
	return append([]word{knownWord("git")}, ws[i:]...), true
}

// wrappedScripts are the shell scripts a call runs other than a shell's
// (shellScripts): the script of `eval …`, of a wrapper's script flag
// (`su -c '…'`), of `watch '…'`, and the strings kept to run later
// (laterScripts), also past a wrapper (`sudo eval '…'`). unknown holds the
// scripts only known when the shell runs (`eval "$X"`), as written: such a
// command may be any command.
func wrappedScripts(ws []word, tails []tail) (scripts, unknown []string) {
	for _, t := range tails {
		ws := ws[t.start:]
		if t.viaShell {
			if s, ok := knownJoin(ws); ok {
				scripts = append(scripts, s)
			} else {
				unknown = append(unknown, joinWords(ws, "").display)
			}
		}
		name, ok := commandName(ws)
		if w := wrappers[name]; ok && len(w.scriptFlags) > 0 {
			s, u := flagScripts(ws[1:], w.scriptFlags)
			scripts, unknown = append(scripts, s...), append(unknown, u...)
		}
		s, u := laterScripts(ws)
		scripts, unknown = append(scripts, s...), append(unknown, u...)
		if !ok || name != "eval" {
			continue
		}
		if s, ok := knownJoin(ws[1:]); ok {
			scripts = append(scripts, s)
		} else {
			unknown = append(unknown, joinWords(ws[1:], "").display)
		}
	}
	return scripts, unknown
}

// hdocText is a here-document's text when it holds no expansion.
func hdocText(w *syntax.Word) (string, bool) {
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.Lit); !ok {
			return "", false
		}
	}
	s, err := expand.Document(&expand.Config{}, w)
	return s, err == nil
}

// knownJoin joins words that are all known with spaces.
func knownJoin(ws []word) (string, bool) {
	vs := make([]string, len(ws))
	for i, w := range ws {
		v, ok := w.value()
		if !ok {
			return "", false
		}
		vs[i] = v
	}
	return strings.Join(vs, " "), true
}

// flagScripts are the arguments of a wrapper's script flags: `-c 'x'`,
// `-c'x'`, `--command=x`, `--command x`; unknown holds those only known when
// the shell runs, as written.
func flagScripts(args []word, flags []string) (scripts, unknown []string) {
	take := func(w word) {
		if v, ok := w.value(); ok {
			scripts = append(scripts, v)
		} else {
			unknown = append(unknown, w.String())
		}
	}
	for i, a := range args {
		v, ok := a.value()
		if !ok {
			continue
		}
		for _, f := range flags {
			switch {
			case v == f && i+1 < len(args):
				take(args[i+1])
			case strings.HasPrefix(f, "--") && strings.HasPrefix(v, f+"="):
				scripts = append(scripts, v[len(f)+1:])
			case !strings.HasPrefix(f, "--") && len(v) > len(f) && strings.HasPrefix(v, f):
				scripts = append(scripts, v[len(f):])
			}
		}
	}
	return scripts, unknown
}

// foldSegs folds whitespace in the known stretches of a form the way
// MatchCommand folds a command: each run to one space, none at either end.
func foldSegs(segs []seg) []seg {
	out := make([]seg, 0, len(segs))
	for _, s := range segs {
		if s.wild != known {
			out = append(out, s)
			continue
		}
		var b strings.Builder
		space := false
		for i := 0; i < len(s.text); {
			r, n := utf8.DecodeRuneInString(s.text[i:])
			if unicode.IsSpace(r) {
				space = true
				i += n
				continue
			}
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteString(s.text[i : i+n]) // the bytes as they are, valid or not
			i += n
		}
		if space {
			b.WriteByte(' ')
		}
		if n := len(out); n > 0 && out[n-1].wild == known {
			out[n-1].text += b.String()
		} else {
			out = append(out, seg{text: b.String()})
		}
	}
	// At either end the space goes, as MatchCommand trims; mayMatch lets a
	// space beside a wild stretch vanish with it.
	if n := len(out); n > 0 && out[0].wild == known {
		out[0].text = strings.TrimLeft(out[0].text, " ")
	}
	if n := len(out); n > 0 && out[n-1].wild == known {
		out[n-1].text = strings.TrimRight(out[n-1].text, " ")
	}
	return out
}

// mayMatch reports whether a command pattern matches a form for some value
// of its wild stretches, spending at most *cells steps (each step is one
// pattern position for one character of the form). When the budget runs out
// it answers true: a rule that holds calls back fails closed.
//
// The pattern's `*` matches any run, `?` and a set one character (a set
// is taken to match some character a wild stretch produces, which only
// ever makes a deny or ask rule match more); a wild stretch produces any
// run without
// an operator character (a wordText one, without a space either), and a
// space beside it may vanish with it, as folding would drop it. The two meet
// where the pattern and the form can spell one same string: a walk over the
// pattern positions reachable after each piece of the form.
func mayMatch(pattern string, f form, cells *int) bool {
	p, err := compiledGlob(foldSpace(pattern))
	if err != nil {
		return true
	}
	segs := foldSegs(f.segs)
	reach := make([]bool, len(p)+1)
	next := make([]bool, len(p)+1)
	reach[0] = true
	closeStars := func(r []bool) {
		for i := 0; i < len(p); i++ {
			if r[i] && p[i].kind == globStar {
				r[i+1] = true
			}
		}
	}
	closeStars(reach)
	spend := func() bool {
		*cells -= len(p) + 1
		return *cells >= 0
	}
	wildAt := func(j int) bool { return j >= 0 && j < len(segs) && segs[j].wild != known }
	for j, s := range segs {
		if s.wild != known {
			if !spend() {
				return true
			}
			copy(next, reach)
			for i := 0; i < len(p); i++ {
				if !next[i] {
					continue
				}
				switch t := p[i]; {
				case t.kind == globStar:
				case t.kind == globLit && strings.ContainsRune(opChars, t.r), s.wild == wordText && t.kind == globLit && t.r == ' ':
					continue
				case t.kind == globNever:
					continue
				}
				next[i+1] = true
			}
			reach, next = next, reach
			continue
		}
		if !utf8.ValidString(s.text) {
			// A stretch cut inside a character: its rest may come from the
			// wild one beside it. Fails closed.
			return true
		}
		runes := []rune(s.text)
		for k, c := range runes {
			if !spend() {
				return true
			}
			optional := c == ' ' && (k == 0 && wildAt(j-1) || k == len(runes)-1 && wildAt(j+1))
			if optional {
				copy(next, reach)
			} else {
				clear(next)
			}
			alive := optional
			for i := 0; i < len(p); i++ {
				if !reach[i] {
					continue
				}
				if p[i].kind == globStar {
					next[i] = true
					alive = true
				} else if p[i].one(c) {
					next[i+1] = true
					alive = true
				}
			}
			if !alive {
				return false
			}
			closeStars(next)
			reach, next = next, reach
		}
	}
	return reach[len(p)]
}
