package run_test

import (
	"go/ast"
	"go/token"
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
