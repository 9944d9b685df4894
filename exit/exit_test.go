package exit

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// codeConstants are the string constants named Code* declared in exit's
// non-test files.
func codeConstants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// TestTableCoversEveryCode: every error code exit declares (the two
// adapter codes among them) is in exactly one row of Classes (so Errorf
// derives its exit), and a code --help names on a row belongs to that row.
func TestTableCoversEveryCode(t *testing.T) {
	rows := map[string][]int{}
	for _, c := range Classes {
		for _, code := range c.Codes {
			rows[code] = append(rows[code], c.Exit)
		}
	}
	consts := codeConstants(t)
	if len(consts) < 30 {
		t.Fatalf("found only %d Code constants: the parse is broken", len(consts))
	}
	for name, code := range consts {
		if len(rows[code]) != 1 {
			t.Errorf("%s (%s) is in %d rows of Classes, want 1", name, code, len(rows[code]))
		}
	}
	declared := slices.Collect(maps.Values(consts))
	for code, exits := range rows {
		if !slices.Contains(declared, code) {
			t.Errorf("Classes names %s (exits %v), which no constant declares", code, exits)
		}
	}
	word := regexp.MustCompile(`\b[A-Z][A-Z_]{3,}\b`)
	for _, c := range Classes {
		for _, w := range word.FindAllString(c.Help, -1) {
			if !slices.Contains(c.Codes, w) && !strings.HasPrefix(w, "SIG") {
				t.Errorf("--help's line for %s names %s, which exits %v", c.Label, w, rows[w])
			}
		}
		if ex, ok := OfCode(firstOr(c.Codes, "")); ok && ex != c.Exit {
			t.Errorf("Errorf(%s) exits %d, want %d", c.Codes[0], ex, c.Exit)
		}
	}
	if e := Errorf("NO_SUCH_CODE_ANYWHERE", "x"); e.Exit != Failed || e.Code != CodeInternal {
		t.Errorf("an unknown code gives %+v, want INTERNAL", e)
	}
}

func firstOr(s []string, d string) string {
	if len(s) == 0 {
		return d
	}
	return s[0]
}

// TestOfAnyError: one function gives every command its exit: an
// *Error keeps its own (wrapped too), any other error is INTERNAL 1,
// and the cause stays reachable.
func TestOfAnyError(t *testing.T) {
	cause := os.ErrPermission
	e := Errorf(CodeStateTreeInvalid, "cannot write thread.yaml: %v", cause)
	if e.Exit != Config || !strings.Contains(e.Error(), "STATE_INVALID") {
		t.Fatalf("%+v", e)
	}
	if got := Of(e); got != e {
		t.Fatalf("Of(*Error) = %+v", got)
	}
	if got := Of(&wrapped{e}); got != e {
		t.Fatalf("Exit of a wrapped *Error = %+v", got)
	}
	if !errors.Is(e, cause) {
		t.Fatal("the cause is not reachable through Unwrap")
	}
	in := Of(os.ErrClosed)
	if in.Exit != Failed || in.Code != CodeInternal || !errors.Is(in, os.ErrClosed) {
		t.Fatalf("Of(plain error) = %+v", in)
	}
	if Of(nil) != nil {
		t.Fatal("Of(nil) is not nil")
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
