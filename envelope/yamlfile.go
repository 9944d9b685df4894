package envelope

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/internal/yamlkeys"
	"github.com/blobhub/bhw-run/policy"
)

// StampLayout is the form of every timestamp bhw-run stamps into a local
// file (identity.yaml, section.yaml, not_mine.yaml, thread.yaml, the
// journal, section.log), as the blobhub-worker documentation writes them:
// UTC to the second, "Z" (2026-05-27T12:35:01Z). Timestamps copied from
// the server (an item's created_at in the cursors) are kept exactly as
// served: they carry the microseconds a read of the thread resumes from.
const StampLayout = "2006-01-02T15:04:05Z"

// Stamp renders t in StampLayout.
func Stamp(t time.Time) string { return t.UTC().Format(StampLayout) }

// DecodeYAML decodes b into v. A file that is YAML but not of v's shape
// gets an error naming the line, the key and the kind of value the key
// should hold ("line 15: events is a list; it should be a mapping"),
// rather than yaml's Go type names; a file that is not YAML says so.
// known refuses keys v does not have.
func DecodeYAML(b []byte, v any, known bool) error {
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(known)
	err := dec.Decode(v)
	var te *yaml.TypeError
	var pe *policy.InvalidError
	switch {
	case err == nil, errors.Is(err, io.EOF): // io.EOF: an empty file
		return nil
	case errors.As(err, &pe):
		// A policy rule that does not read: its own message names it.
		return pe
	case !errors.As(err, &te):
		if line := tabIndented(b); line > 0 {
			return fmt.Errorf("is not valid YAML: line %d indents with a tab; YAML indents with spaces only (%w)", line, err)
		}
		return fmt.Errorf("is not valid YAML: %w", err)
	}
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		return fmt.Errorf("does not have the expected shape: %w", err)
	}
	// Each problem walks the whole document to name its key: only the
	// first maxShapeProblems are described (a file of 12,000 wrong values
	// took seconds), and the rest counted.
	var problems []string
	for _, msg := range te.Errors[:min(len(te.Errors), maxShapeProblems)] {
		problems = append(problems, shapeProblem(&root, reflect.TypeOf(v), msg))
	}
	if more := len(te.Errors) - maxShapeProblems; more > 0 {
		problems = append(problems, fmt.Sprintf("and %d more problems like these (fix these and run again to see them)", more))
	}
	return fmt.Errorf("does not have the expected shape: %s", strings.Join(problems, "; "))
}

// maxShapeProblems bounds the problems DecodeYAML describes.
const maxShapeProblems = 20

// yamlErrorRegexps are compiled on first use (only a file that does not
// decode needs them): compiled at start they cost every bhw-run process.
var yamlErrorRegexps = sync.OnceValues(func() (cannot, unknown *regexp.Regexp) {
	return regexp.MustCompile(`^line (\d+): cannot unmarshal (!!\w+)`),
		regexp.MustCompile(`^line (\d+): field (\S+) not found in type`)
})

// shapeProblem rewrites one of yaml's unmarshal errors in the file's own
// terms.
func shapeProblem(root *yaml.Node, t reflect.Type, msg string) string {
	reCannot, reUnknown := yamlErrorRegexps()
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		path := keyPath(root, line, "", m[2])
		meant := ""
		if len(path) > 0 {
			if k := ClosestKey(m[2], yamlkeys.Of(typeAt(t, path[:len(path)-1]))); k != "" {
				meant = "; did you mean " + k + "?"
			}
		}
		if len(path) > 1 {
			return fmt.Sprintf("line %d: %s has no key %s%s", line, strings.Join(path[:len(path)-1], "."), m[2], meant)
		}
		return fmt.Sprintf("line %d: unknown key %s%s", line, m[2], meant)
	}
	m := reCannot.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	path := keyPath(root, line, m[2], "")
	n := nodeAt(root, path)
	if len(path) == 0 || n == nil {
		return msg
	}
	name := strings.Join(path, ".")
	wantKind := kindOf(typeAt(t, path))
	if wantKind == "" {
		return fmt.Sprintf("line %d: %s is %s, which it cannot be", line, name, nodeKind(n))
	}
	return fmt.Sprintf("line %d: %s is %s; it should be %s", line, name, nodeKind(n), wantKind)
}

// keyPath returns the keys and list indexes that lead to the first value
// of tag on line, or with key set, to the key of that name on line.
func keyPath(root *yaml.Node, line int, tag, key string) []string {
	var found []string
	var walk func(n *yaml.Node, path []string) bool
	walk = func(n *yaml.Node, path []string) bool {
		if key == "" && n.Line == line && n.Kind != yaml.DocumentNode && n.ShortTag() == tag && len(path) > 0 {
			found = append([]string(nil), path...)
			return true
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if walk(c, path) {
					return true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(path, k.Value)
				if key != "" && k.Line == line && k.Value == key {
					found = p
					return true
				}
				if walk(v, p) {
					return true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if walk(c, append(path, "["+strconv.Itoa(i)+"]")) {
					return true
				}
			}
		}
		return false
	}
	walk(root, nil)
	return found
}

// nodeAt follows path from root.
func nodeAt(root *yaml.Node, path []string) *yaml.Node {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, p := range path {
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
					break
				}
			}
			if next == nil {
				return nil
			}
			n = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(strings.Trim(p, "[]"))
			if err != nil || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		default:
			return nil
		}
	}
	return n
}

// typeAt follows path through t: struct fields by their yaml name
// (inline fields included), map and list elements.
func typeAt(t reflect.Type, path []string) reflect.Type {
	for _, p := range path {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil {
			return nil
		}
		switch t.Kind() {
		case reflect.Struct:
			t = fieldType(t, p)
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	return t
}

func fieldType(t reflect.Type, key string) reflect.Type {
	var inlineMap reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Map {
				inlineMap = ft.Elem()
				continue
			}
			if got := fieldType(ft, key); got != nil {
				return got
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f.Type
		}
	}
	return inlineMap
}

// kindOf names what a YAML value of Go type t must be; "" when anything
// goes (an interface) or the type decodes itself.
func kindOf(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "true/false (" + n.Value + ")"
	case "!!int", "!!float":
		return "the number " + n.Value
	}
	return strconv.Quote(n.Value)
}

// tabIndented is the first line of b whose indentation holds a tab, which
// YAML refuses, or 0.
func tabIndented(b []byte) int {
	for i, line := range strings.Split(string(b), "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") && strings.TrimSpace(line) != "" {
			return i + 1
		}
	}
	return 0
}

// ClosestKey is the word of known a mistyped one most likely meant: the
// nearest within two edits (one for a word of four letters or less), or
// the only one it is the start of; "" when none is clear. The command
// line's "did you mean" asks it too.
func ClosestKey(word string, known []string) string {
	best, bestD := "", -1
	var prefixed []string
	for _, c := range known {
		if len(word) >= 2 && strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
		d := editDistance(word, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(word) <= 4 {
		limit = 1
	}
	switch {
	case bestD >= 0 && bestD <= limit && bestD < len(best):
		return best
	case len(prefixed) == 1:
		return prefixed[0]
	}
	return ""
}

// editDistance is the number of edits (insert, delete, replace, swap two
// neighbours) from a to b, in bytes: "shwo" is one from "show".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// KeyLine is the line of the key at path (mapping keys) in the YAML
// document b, 0 when it is not there.
func KeyLine(b []byte, path ...string) int {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil || len(path) == 0 {
		return 0
	}
	n := nodeAt(&root, path[:len(path)-1])
	if n == nil || n.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == path[len(path)-1] {
			return n.Content[i].Line
		}
	}
	return 0
}
