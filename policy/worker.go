package policy

import (
	"errors"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// This file is blobhub-worker's own reading of a guarded call, kept beside
// bhw-run's deeper one: the worker's rules are tried in order, the machine
// owner's first, the first that matches deciding, else the thread's default.
// An exec rule that holds calls back (deny, ask) is matched against the
// command and each of its top-level segments, with leading environment
// assignments and git's relocation options folded away; an allow rule only
// against the command as written. `outside` compares the path, resolved as
// Python's Path.resolve resolves it, with the work folder or the outbox.
// The gate never answers looser than this reading (gate.go).

// WorkerDecision is what blobhub-worker decides for a call: its action, the
// rule's id ("" for the default) and whose rule it was.
type WorkerDecision struct {
	Action string
	RuleID string
	Origin string // worker | thread | default
	Index  int    // the rule's position in its list; -1 for the default
}

// Origins of a decision, as the worker's audit items name them.
const (
	OriginWorker  = "worker"
	OriginThread  = "thread"
	OriginDefault = "default"
)

// pyIsSpace is Python's str.isspace, which both its strip() and `\s` use.
func pyIsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

const pyWS = `\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

var (
	workerEnvAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[^` + pyWS + `]*[` + pyWS + `]+`)
	workerGitFold       = func() *regexp.Regexp {
		s, S := `[`+pyWS+`]+`, `[^`+pyWS+`]+`
		opt := `-C` + s + S + `|--git-dir(?:=` + S + `|` + s + S + `)|--work-tree(?:=` + S + `|` + s + S + `)|-c` + s + S + `|--namespace(?:=` + S + `|` + s + S + `)`
		return regexp.MustCompile(`^git(?:` + s + `(?:` + opt + `))+` + s)
	}()
)

// workerSplit splits a command line on `&&`, `||`, `;`, `|`, newline and a
// lone `&` outside quotes, backticks and `$( )`; an unterminated one leaves
// the line whole.
func workerSplit(command string) []string {
	var segs []string
	var cur strings.Builder
	var quote byte
	backtick := false
	depth := 0
	n := len(command)
	for i := 0; i < n; {
		ch := command[i]
		switch {
		case quote != 0:
			cur.WriteByte(ch)
			if ch == quote {
				quote = 0
			}
			i++
			continue
		case backtick:
			cur.WriteByte(ch)
			if ch == '`' {
				backtick = false
			}
			i++
			continue
		case depth > 0:
			cur.WriteByte(ch)
			if ch == '(' {
				depth++
			} else if ch == ')' {
				depth--
			}
			i++
			continue
		case ch == '\'' || ch == '"':
			quote = ch
			cur.WriteByte(ch)
			i++
			continue
		case ch == '`':
			backtick = true
			cur.WriteByte(ch)
			i++
			continue
		case ch == '$' && i+1 < n && command[i+1] == '(':
			depth = 1
			cur.WriteString("$(")
			i += 2
			continue
		}
		op := ""
		for _, o := range []string{"&&", "||", ";", "|", "\n"} {
			if strings.HasPrefix(command[i:], o) {
				if o == "|" && i+1 < n && command[i+1] == '&' {
					continue
				}
				op = o
				break
			}
		}
		if op != "" {
			segs = append(segs, cur.String())
			cur.Reset()
			i += len(op)
			continue
		}
		if ch == '&' {
			// At either end of the line the worker's test reads the empty
			// string, which Python finds in every string: no split there.
			prevOK := i > 0 && !strings.ContainsRune("&><|", rune(command[i-1]))
			nextOK := i+1 < n && !strings.ContainsRune("&><", rune(command[i+1]))
			if prevOK && nextOK {
				segs = append(segs, cur.String())
				cur.Reset()
				i++
				continue
			}
		}
		cur.WriteByte(ch)
		i++
	}
	segs = append(segs, cur.String())
	if quote != 0 || backtick || depth > 0 {
		return []string{command}
	}
	return segs
}

// workerNormalise trims a segment, drops leading `(`/`{` and trailing
// `)`/`}`/`;`, leading NAME=value assignments, and folds git's relocation
// options (`git -C x push` reads `git push`).
func workerNormalise(seg string) string {
	text := strings.TrimFunc(seg, pyIsSpace)
	for text != "" && strings.ContainsRune("({", rune(text[0])) {
		text = strings.TrimFunc(text[1:], pyIsSpace)
	}
	for text != "" && strings.ContainsRune(")};", rune(text[len(text)-1])) {
		text = strings.TrimFunc(text[:len(text)-1], pyIsSpace)
	}
	for {
		loc := workerEnvAssignment.FindStringIndex(text)
		if loc == nil {
			break
		}
		text = text[loc[1]:]
	}
	if loc := workerGitFold.FindStringIndex(text); loc != nil {
		text = "git " + text[loc[1]:]
	}
	return text
}

// WorkerCommands is the worker's list of a command's effective commands:
// the command as written, the whole line normalised, then each segment.
func WorkerCommands(command string) []string {
	out := []string{command}
	// A set, not a scan of out: a hostile line may have a million segments.
	seen := map[string]bool{command: true}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(workerNormalise(command))
	for _, seg := range workerSplit(command) {
		add(workerNormalise(seg))
	}
	return out
}

// errLoop is a symlink loop met while resolving a path.
var errLoop = errors.New("symlink loop")

// pyResolve resolves p (absolute) as Python's Path.resolve(strict=False)
// does: symlinks followed component by component, `..` taken after the link
// before it, a missing component kept as written; a loop, a link that cannot
// be read or a NUL byte is an error.
func pyResolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("NUL byte")
	}
	seen := map[string]*string{}
	out, ok, err := pyJoinReal("", p, seen)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errLoop
	}
	if _, err := os.Stat(out); errors.Is(err, syscall.ELOOP) {
		return "", errLoop
	}
	return out, nil
}

func pyJoinReal(p, rest string, seen map[string]*string) (string, bool, error) {
	if strings.HasPrefix(rest, "/") {
		rest = rest[1:]
		p = "/"
	}
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, "/")
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			if p != "" {
				dir, base := path.Split(p)
				if dir != "/" {
					dir = strings.TrimSuffix(dir, "/")
				}
				p = dir
				if base == ".." {
					p = path.Join(p, "..", "..")
				}
			} else {
				p = ".."
			}
			continue
		}
		next := path.Join(p, name)
		if p == "" {
			next = name
		}
		st, err := os.Lstat(next)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			p = next
			continue
		}
		if v, ok := seen[next]; ok {
			if v != nil {
				p = *v
				continue
			}
			return path.Join(next, rest), false, nil
		}
		seen[next] = nil
		target, err := os.Readlink(next)
		if err != nil {
			return "", false, err
		}
		var ok bool
		p, ok, err = pyJoinReal(p, target, seen)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return path.Join(p, rest), false, nil
		}
		v := p
		seen[next] = &v
	}
	return p, true, nil
}

// pyJoin is pathlib's `base / p`: an absolute p wins; "." parts and
// repeated slashes vanish, ".." stays.
func pyJoin(base, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = base + "/" + p
	}
	var parts []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			parts = append(parts, s)
		}
	}
	return "/" + strings.Join(parts, "/")
}

// pyRelativeTo is PurePath.is_relative_to for two absolute clean paths.
func pyRelativeTo(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// workerView is the resolved roots the worker compares paths with.
type workerView struct {
	work   string // "" when there is no work folder
	outbox string // "" when the outbox is unusable (every path is outside it)
}

func newWorkerView(workFolder, outbox string) workerView {
	var v workerView
	if workFolder != "" {
		if r, err := pyResolve(pyJoin("/", workFolder)); err == nil {
			v.work = r
		} else {
			v.work = pyJoin("/", workFolder)
		}
	}
	v.outbox, _ = ResolveOutbox(v.work, outbox)
	return v
}

// ResolveOutbox is the thread's outbox as the worker resolves it for an
// `outside: outbox` rule, or "" and why it is unusable: it must be a
// relative path strictly inside the (resolved) work folder, reached through
// no symlink. Without a usable outbox every path counts as outside it.
func ResolveOutbox(work, outbox string) (string, string) {
	switch {
	case outbox == "":
		return "", "the thread has no artifacts outbox"
	case work == "":
		return "", "the run has no work folder"
	case strings.HasPrefix(outbox, "/"):
		return "", "the outbox " + outbox + " is absolute"
	}
	joined := pyJoin(work, outbox)
	real, err := pyResolve(joined)
	if err != nil {
		return "", "the outbox " + outbox + " cannot be resolved"
	}
	if real != path.Clean(joined) {
		return "", "the outbox " + outbox + " runs through a symlink"
	}
	if real == work || !pyRelativeTo(real, work) {
		return "", "the outbox " + outbox + " is not strictly inside the work folder"
	}
	return real, ""
}

// leaves is the worker's test for `outside`: whether the path, joined to
// the work folder and resolved, falls outside root. An empty path, a missing
// root and a path that cannot be resolved all count as outside.
func (v workerView) leaves(root, p string) bool {
	if p == "" || root == "" || v.work == "" {
		return true
	}
	r, err := pyResolve(pyJoin(v.work, p))
	if err != nil {
		return true
	}
	return !pyRelativeTo(r, root)
}

// workerMatches is the worker's PolicyEvaluator._matches for one path.
func (v workerView) matches(r Rule, effect, command, p string) (bool, error) {
	if effect == "" || r.Effect != effect {
		return false, nil
	}
	if r.Effect == EffectExec && len(r.Command) > 0 {
		candidates := []string{command}
		if r.Action != DecisionAllow {
			candidates = WorkerCommands(command)
		}
		hit := false
		for _, c := range candidates {
			for _, pat := range r.Command {
				ok, err := Fnmatch(pat, c)
				if err != nil {
					return false, err
				}
				if ok {
					hit = true
					break
				}
			}
			if hit {
				break
			}
		}
		if !hit {
			return false, nil
		}
	}
	switch r.Outside {
	case OutsideWorkFolder:
		return v.leaves(v.work, p), nil
	case OutsideOutbox:
		return v.leaves(v.outbox, p), nil
	}
	return true, nil
}

// WorkerDecide is blobhub-worker's decision for a guarded call: the machine
// owner's rules then the thread's, first match deciding, else the thread's
// default. A call with several paths is judged once per path (the worker
// sees one), the strictest answer kept; a call with none as the worker sees
// it, with an empty path. An error in a pattern denies, as the worker's gate
// does when its evaluator raises.
func WorkerDecide(owner []Rule, thread Policy, workFolder, outbox string, c Call) WorkerDecision {
	v := newWorkerView(workFolder, outbox)
	paths := append([]string(nil), c.Target.Paths...)
	if c.GrantRoot != "" && len(paths) > 0 && !slices.Contains(paths, c.GrantRoot) {
		paths = append(paths, c.GrantRoot)
	}
	if len(paths) == 0 || (c.Effect != EffectRead && c.Effect != EffectWrite) {
		// The worker gives only read and write calls a path.
		paths = []string{""}
	}
	var best WorkerDecision
	for i, p := range paths {
		d := v.decide(owner, thread, c.Effect, c.Target.Command, p)
		if i == 0 || strictness(d.Action) > strictness(best.Action) {
			best = d
		}
	}
	return best
}

func (v workerView) decide(owner []Rule, thread Policy, effect, command, p string) WorkerDecision {
	lists := []struct {
		origin string
		rules  []Rule
	}{{OriginWorker, owner}, {OriginThread, thread.Rules}}
	for _, l := range lists {
		for i, r := range l.rules {
			ok, err := v.matches(r, effect, command, p)
			if err != nil {
				return WorkerDecision{Action: DecisionDeny, RuleID: "policy_evaluation_error", Origin: l.origin, Index: i}
			}
			if ok {
				return WorkerDecision{Action: r.action(), RuleID: r.ID, Origin: l.origin, Index: i}
			}
		}
	}
	return WorkerDecision{Action: thread.DefaultDecision(), Origin: OriginDefault, Index: -1}
}
