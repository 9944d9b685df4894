package run_test

import (
	"go/ast"
	"go/token"
	"reflect"
	"slices"
	"testing"
)

// readerFiles are the readers that judge what a run would do without
// running one; readerSeams are the files of the doors they take into the
// activation (docs/design.md, The readers' seams).
var (
	readerFiles = []string{"ls.go", "feed.go", "explain.go", "doctor.go", "doctor_worker.go"}
	readerSeams = []string{"readers.go", "launch.go"}
)

// TestReadersUseTheirSeams: ls, policy explain and doctor never build an
// activation nor call an unexported method of Runner declared outside
// their own files and the seams' (readers.go, launch.go), but for the
// kernel check doctor shares with the checklist and section.log's writer.
// So how each works reads in its own file.
func TestReadersUseTheirSeams(t *testing.T) {
	fset := token.NewFileSet()
	allowed := map[string]bool{"checkConfine": true, "appendSectionLog": true}
	internal := map[string]string{} // unexported Runner methods → their file
	parsed := parseRunFiles(t, fset)
	for name, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || ast.IsExported(fd.Name.Name) {
				continue
			}
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if id, _ := star.X.(*ast.Ident); id != nil && id.Name == "Runner" {
				if slices.Contains(readerFiles, name) || slices.Contains(readerSeams, name) {
					allowed[fd.Name.Name] = true
				}
				internal[fd.Name.Name] = name
			}
		}
	}
	for _, name := range readerFiles {
		f := parsed[name]
		if f == nil {
			t.Fatalf("%s is gone: update readerFiles", name)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if n.Name == "activation" {
					t.Errorf("%s: names the activation at %v; read it through a seam of readers.go", name, fset.Position(n.Pos()))
				}
			case *ast.SelectorExpr:
				if file, ok := internal[n.Sel.Name]; ok && !allowed[n.Sel.Name] {
					t.Errorf("%s: calls Runner.%s of %s at %v; read it through a seam of readers.go", name, n.Sel.Name, file, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// TestReadersNeedNoOtherFile: the unexported functions, types, variables
// and constants the readers name are their own, a seam's (readers.go,
// launch.go) or another reader's; the rest of run/ they reach through its
// exported API (Decide, DownloadJob). So no file of the run is needed to
// read how ls, explain and doctor work.
func TestReadersNeedNoOtherFile(t *testing.T) {
	fset := token.NewFileSet()
	parsed := parseRunFiles(t, fset)
	declared := map[string]string{} // unexported top-level name → its file
	for name, f := range parsed {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = name
						}
					}
				}
			}
		}
	}
	for _, name := range readerFiles {
		f := parsed[name]
		local := localNames(f)
		for _, id := range namesUsed(f) {
			file, ok := declared[id.Name]
			if !ok || ast.IsExported(id.Name) || local[id.Name] || slices.Contains(readerFiles, file) || slices.Contains(readerSeams, file) {
				continue
			}
			t.Errorf("%s: names %s of %s at %v; make it a seam of readers.go", name, id.Name, file, fset.Position(id.Pos()))
		}
	}
}

// namesUsed are the identifiers f uses as names of its package: not a
// selector's field or method, a struct literal's key, a declared
// function's or field's own name.
func namesUsed(f *ast.File) []*ast.Ident {
	var out []*ast.Ident
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			ast.Inspect(n.X, walk)
			return false
		case *ast.KeyValueExpr:
			if _, field := n.Key.(*ast.Ident); !field {
				ast.Inspect(n.Key, walk)
			}
			ast.Inspect(n.Value, walk)
			return false
		case *ast.FuncDecl:
			for _, c := range []ast.Node{n.Recv, n.Type, n.Body} {
				if c != nil && !reflect.ValueOf(c).IsNil() {
					ast.Inspect(c, walk)
				}
			}
			return false
		case *ast.Field:
			ast.Inspect(n.Type, walk)
			return false
		case *ast.Ident:
			out = append(out, n)
		}
		return true
	}
	ast.Inspect(f, walk)
	return out
}

// localNames are the names f declares inside its functions (parameters,
// results, := and var): a use of one is not a use of run/'s name.
func localNames(f *ast.File) map[string]bool {
	local := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		ast.Inspect(fd, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				for _, id := range n.Names {
					local[id.Name] = true
				}
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE {
					for _, e := range n.Lhs {
						if id, ok := e.(*ast.Ident); ok {
							local[id.Name] = true
						}
					}
				}
			case *ast.ValueSpec:
				for _, id := range n.Names {
					local[id.Name] = true
				}
			case *ast.RangeStmt:
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						local[id.Name] = true
					}
				}
			}
			return true
		})
	}
	return local
}
