package run_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStateHasOneOwner reads run/'s own files and checks that the state
// docs/design.md gives an owner ("Who owns an activation's state") is
// written by that owner only: thread.yaml and the journal by the record
// (record.go, journal.go), what posting learned by the poster (poster.go).
// A write elsewhere is a second writer, which the split exists to prevent.
func TestStateHasOneOwner(t *testing.T) {
	// Calls that open or write a file, and the files of the record.
	writers := map[string]bool{"setup.WriteStateFile": true, "statefile.WriteAtomic": true, "statefile.Open": true,
		"os.WriteFile": true, "os.OpenFile": true, "os.Create": true}
	recordFiles := map[string]bool{"thread.yaml": true, "emissions.jsonl": true}
	// The journal is opened only by its owner.
	journalOpeners := map[string]bool{"openJournal": true, "readJournal": true}
	// The poster's failure flags.
	posterFlags := map[string]bool{"offline": true, "authRefused": true, "threadGone": true, "turnStopped": true}
	fset := token.NewFileSet()
	files := parseRunFiles(t, fset)
	for name, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				callee := calleeName(n.Fun)
				if journalOpeners[callee] && name != "record.go" && name != "journal.go" {
					t.Errorf("%s: %s opens the journal; only the record does (record.go)", fset.Position(n.Pos()), callee)
				}
				if writers[callee] && name != "record.go" && name != "journal.go" {
					for _, arg := range n.Args {
						ast.Inspect(arg, func(m ast.Node) bool {
							if lit, ok := m.(*ast.BasicLit); ok && lit.Kind == token.STRING {
								if s, _ := strconv.Unquote(lit.Value); recordFiles[s] {
									t.Errorf("%s: %s writes %s; only the record does (record.go)", fset.Position(n.Pos()), callee, s)
								}
							}
							return true
						})
					}
				}
			case *ast.AssignStmt:
				for _, lhs := range n.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && posterFlags[sel.Sel.Name] && name != "poster.go" {
						t.Errorf("%s: sets %s; only the poster does (poster.go)", fset.Position(n.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
}

// parseRunFiles parses run/'s own files, its tests left out, by name; it
// fails the test when it finds too few to be run/ (the test runs there).
func parseRunFiles(t *testing.T, fset *token.FileSet) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	if len(files) < 20 {
		t.Fatalf("read %d of run/'s files; the test runs in run/", len(files))
	}
	return files
}

// calleeName is a call's function as written: name, or pkg.Name for a
// selector on an identifier.
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
	}
	return ""
}
