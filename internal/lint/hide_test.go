package lint

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestNoVariableHidesAPackage: no parameter, result or local variable is
// named like a package its file imports (a variable `store` in a file
// that imports package store): the package is then out of reach in that
// scope, and a reader takes one for the other. Tests included; soak/ and
// third_party/ are left to their owners.
func TestNoVariableHidesAPackage(t *testing.T) {
	root := moduleRoot(t)
	// The name of every package the module's code and tests import.
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}} {{.Name}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	names := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 { // "PATH NAME" or "PATH [TEST] NAME"
			names[f[0]] = f[len(f)-1]
		}
	}
	var hides []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "third_party" || rel == "soak" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		imported := map[string]bool{}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			switch {
			case is.Name != nil && is.Name.Name != "_" && is.Name.Name != ".":
				imported[is.Name.Name] = true
			case is.Name == nil && names[p] != "":
				imported[names[p]] = true
			}
		}
		for _, id := range declaredNames(f) {
			if imported[id.Name] {
				hides = append(hides, fset.Position(id.Pos()).String()+": "+id.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(hides)
	for _, h := range hides {
		t.Errorf("%s hides the package of that name: rename it", strings.TrimPrefix(h, root+"/"))
	}
}

// declaredNames are the parameters, results, receivers and local
// variables (and constants) declared in f's functions.
func declaredNames(f *ast.File) []*ast.Ident {
	var ids []*ast.Ident
	fields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fd := range fl.List {
			ids = append(ids, fd.Names...)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			fields(n.Recv)
		case *ast.FuncType:
			fields(n.Params)
			fields(n.Results)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						ids = append(ids, id)
					}
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						ids = append(ids, id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := n.Decl.(*ast.GenDecl); ok && (g.Tok == token.VAR || g.Tok == token.CONST) {
				for _, s := range g.Specs {
					ids = append(ids, s.(*ast.ValueSpec).Names...)
				}
			}
		}
		return true
	})
	return ids
}
