package run_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// designSection is the text of docs/design.md's section under "## heading".
func designSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/design.md has no %q section", "## "+heading)
	}
	section, _, _ := strings.Cut(after, "\n## ")
	return section
}

// owners reads the table of docs/design.md's "Who owns a record": each
// row names records in backquotes (a file name such as `section.yaml`; an
// object's alias constant such as `WorkerAlias`, or the alias itself in
// quotes) and, in its second column, the one file that owns them.
func owners(t *testing.T) map[string]string {
	t.Helper()
	section := designSection(t, "Who owns a record")
	row := regexp.MustCompile("^\\| ([^|]+) \\| `([^`|]+\\.go)` \\|")
	name := regexp.MustCompile("`([^`]+)`")
	own := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			own[n[1]] = m[2]
		}
	}
	if len(own) < 4 {
		t.Fatalf("found only %d records in docs/design.md's owners table: the parse is broken", len(own))
	}
	return own
}

// TestRecordsHaveOneOwner: a record docs/design.md gives one owner is
// touched by that file alone, in every non-test file of the module: a
// record file's name is spelled (as a Go string) nowhere else, and an
// object is uploaded or downloaded by its alias (the constant, or the
// alias spelled out) nowhere else. Everyone else calls the owner.
func TestRecordsHaveOneOwner(t *testing.T) {
	own := owners(t)
	seen := map[string]bool{} // record → its owner touches it
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
		touch := func(record string, at token.Pos) {
			owner, ok := own[record]
			switch {
			case !ok:
			case owner == rel:
				seen[record] = true
			default:
				t.Errorf("%s touches %s, whose one owner is %s (docs/design.md, Who owns a record); call the owner instead", fset.Position(at), record, owner)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil {
					touch(s, n.Pos())
					if q := strconv.Quote(s); own[q] == rel {
						seen[q] = true // the owner spells the alias (its constant)
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Upload" && sel.Sel.Name != "Download" {
					return true
				}
				for _, arg := range n.Args {
					switch a := arg.(type) {
					case *ast.BasicLit:
						touch(a.Value, a.Pos()) // the alias spelled out
					case *ast.Ident:
						touch(a.Name, a.Pos())
					case *ast.SelectorExpr:
						touch(a.Sel.Name, a.Pos())
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for record, owner := range own {
		if !seen[record] {
			t.Errorf("docs/design.md names %s the owner of %s, which it does not touch; correct the row", owner, record)
		}
	}
}
