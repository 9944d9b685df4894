package policy

import (
	"errors"
	"strings"
	"sync"
)

// A command pattern is a shell glob read exactly as blobhub-worker reads it
// (Python's fnmatchcase): `*` matches any run of characters, newlines
// included; `?` matches one character; `[abc]`, `[a-z]` and `[!a-z]` match
// one character of a set or outside it; a `[` with no closing `]` is itself.
// Nothing is escaped: a backslash is an ordinary character. Matching is
// anchored at both ends and counts characters, not bytes.

// globTok is one step of a compiled pattern.
type globTok struct {
	kind  globKind
	r     rune        // globLit
	set   []runeRange // globClass
	negok bool        // globClass: matches what is outside set
}

type globKind uint8

const (
	globLit globKind = iota
	globAny
	globStar
	globClass
	globNever // an empty set: matches no character
)

type runeRange struct{ lo, hi rune }

func (t globTok) one(r rune) bool {
	switch t.kind {
	case globLit:
		return r == t.r
	case globAny:
		return true
	case globClass:
		in := false
		for _, rr := range t.set {
			if rr.lo <= r && r <= rr.hi {
				in = true
				break
			}
		}
		return in != t.negok
	default:
		return false
	}
}

// errBadRange is a set the worker's regular expression engine refuses; the
// worker's gate then fails closed (deny).
var errBadRange = errors.New("bad character range in a command pattern")

// compileGlob reads a pattern as fnmatch.translate does: the same scan for
// the closing `]`, the same split of a set on `-` into ranges (an empty
// range dropped), then the set read as the regular expression engine reads
// the text translate makes of it.
func compileGlob(pat string) ([]globTok, error) {
	p := []rune(pat)
	var out []globTok
	for i, n := 0, len(p); i < n; {
		c := p[i]
		i++
		switch c {
		case '*':
			if len(out) == 0 || out[len(out)-1].kind != globStar {
				out = append(out, globTok{kind: globStar})
			}
		case '?':
			out = append(out, globTok{kind: globAny})
		case '[':
			j := i
			if j < n && p[j] == '!' {
				j++
			}
			if j < n && p[j] == ']' {
				j++
			}
			for j < n && p[j] != ']' {
				j++
			}
			if j >= n {
				out = append(out, globTok{kind: globLit, r: '['})
				continue
			}
			t, err := globSet(p, i, j)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			i = j + 1
		default:
			out = append(out, globTok{kind: globLit, r: c})
		}
	}
	return out, nil
}

// globSet is the set p[i:j] (between the brackets): the class text translate
// writes, as a list of items each marked literal or escaped, then parsed.
func globSet(p []rune, i, j int) (globTok, error) {
	// item is one character of the class text: esc when translate put a
	// backslash before it (so it is never an operator).
	type item struct {
		r   rune
		esc bool
	}
	stuff := p[i:j]
	var text []item // the class text without the brackets
	escAll := func(s []rune) []item {
		var o []item
		for _, r := range s {
			switch r {
			case '\\', '-', '&', '~', '|':
				o = append(o, item{r, true})
			default:
				o = append(o, item{r, false})
			}
		}
		return o
	}
	if !containsRune(stuff, '-') {
		text = escAll(stuff)
	} else {
		var chunks [][]rune
		k := i + 1
		if p[i] == '!' {
			k = i + 2
		}
		for {
			k = indexRune(p, '-', k, j)
			if k < 0 {
				break
			}
			chunks = append(chunks, append([]rune(nil), p[i:k]...))
			i = k + 1
			k += 3
		}
		if chunk := p[i:j]; len(chunk) > 0 {
			chunks = append(chunks, append([]rune(nil), chunk...))
		} else {
			chunks[len(chunks)-1] = append(chunks[len(chunks)-1], '-')
		}
		for k := len(chunks) - 1; k > 0; k-- {
			prev, cur := chunks[k-1], chunks[k]
			if len(prev) == 0 || len(cur) == 0 {
				// Python raises IndexError here; the worker's gate denies.
				return globTok{}, errBadRange
			}
			if prev[len(prev)-1] > cur[0] {
				chunks[k-1] = append(append([]rune(nil), prev[:len(prev)-1]...), cur[1:]...)
				chunks = append(chunks[:k], chunks[k+1:]...)
			}
		}
		for n, ch := range chunks {
			if n > 0 {
				text = append(text, item{'-', false})
			}
			text = append(text, escAll(ch)...)
		}
	}
	switch {
	case len(text) == 0:
		return globTok{kind: globNever}, nil
	case len(text) == 1 && text[0] == item{'!', false}:
		return globTok{kind: globAny}, nil
	}
	t := globTok{kind: globClass}
	if text[0] == (item{'!', false}) {
		t.negok = true
		text = text[1:]
	} else if (text[0].r == '^' || text[0].r == '[') && !text[0].esc {
		text[0].esc = true
	}
	// The regular expression engine's reading of a class: an item, then
	// an unescaped `-` and a second item make a range; a `-` last is itself.
	for k := 0; k < len(text); {
		lo := text[k]
		k++
		if k < len(text) && text[k] == (item{'-', false}) {
			if k+1 >= len(text) {
				t.set = append(t.set, runeRange{lo.r, lo.r}, runeRange{'-', '-'})
				k++
				continue
			}
			hi := text[k+1]
			if hi.r < lo.r {
				return globTok{}, errBadRange
			}
			t.set = append(t.set, runeRange{lo.r, hi.r})
			k += 2
			continue
		}
		t.set = append(t.set, runeRange{lo.r, lo.r})
	}
	if len(t.set) == 0 {
		// "[!]"-like leftovers: the engine reads "[^]" as an error.
		return globTok{}, errBadRange
	}
	return t, nil
}

func containsRune(s []rune, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

// indexRune is Python's str.find(r, from, to) over runes.
func indexRune(s []rune, r rune, from, to int) int {
	for k := from; k < to && k < len(s); k++ {
		if s[k] == r {
			return k
		}
	}
	return -1
}

// matchGlob runs compiled tokens over a string's characters: the classic
// greedy walk, the last `*` retried one character further on a mismatch.
func matchGlob(toks []globTok, s []rune) bool {
	ti, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case ti < len(toks) && toks[ti].kind == globStar:
			star, mark = ti, si
			ti++
		case ti < len(toks) && toks[ti].one(s[si]):
			ti++
			si++
		case star >= 0:
			ti = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for ti < len(toks) && toks[ti].kind == globStar {
		ti++
	}
	return ti == len(toks)
}

// globCache keeps compiled patterns; policies are small, the cap only
// bounds a hostile one.
var globCache = struct {
	sync.Mutex
	m map[string]globCompiled
}{m: map[string]globCompiled{}}

type globCompiled struct {
	toks []globTok
	err  error
}

const globCacheMax = 4096

func compiledGlob(pat string) ([]globTok, error) {
	globCache.Lock()
	c, ok := globCache.m[pat]
	globCache.Unlock()
	if ok {
		return c.toks, c.err
	}
	toks, err := compileGlob(pat)
	globCache.Lock()
	if len(globCache.m) >= globCacheMax {
		clear(globCache.m)
	}
	globCache.m[pat] = globCompiled{toks, err}
	globCache.Unlock()
	return toks, err
}

// Fnmatch reports whether name matches the shell glob pattern as the worker
// matches a command rule (fnmatchcase). The error is a pattern the worker's
// engine refuses, which its gate answers with deny.
func Fnmatch(pattern, name string) (bool, error) {
	toks, err := compiledGlob(pattern)
	if err != nil {
		return false, err
	}
	return matchGlob(toks, []rune(name)), nil
}

// globChecks says whether a pattern is one the worker can use (Validate
// refuses the others, which the worker would only discover call by call).
func globChecks(pattern string) error {
	_, err := compiledGlob(pattern)
	return err
}

// hasCommandMeta reports whether a command pattern has a glob character.
func hasCommandMeta(pattern string) bool { return strings.ContainsAny(pattern, "*?[") }
