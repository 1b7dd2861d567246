// Command structure checks the repository's structure limits (issue #36):
// session.Manager has at most 35 methods, no Go file is over 800 lines and
// no function over 100 lines. It reads every non-test, non-generated .go
// file under the root given (both Go modules), skipping *.pb.go,
// *.pb.gw.go, node_modules, .cache, .git and testdata, and exits non-zero
// naming each offender. scripts/structure.sh runs it (make check-structure).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type limits struct {
	methods, fileLines, funcLines int
}

type finding struct {
	where string
	n     int
}

type report struct {
	methods   []string
	files     []finding
	funcs     []finding
	maxFile   finding
	maxFunc   finding
	goFiles   int
	managerAt string
}

func main() {
	root := flag.String("root", ".", "repository root")
	manager := flag.String("manager", "internal/session", "directory of the package whose Manager type is counted")
	lim := limits{}
	flag.IntVar(&lim.methods, "max-methods", 35, "most methods of Manager")
	flag.IntVar(&lim.fileLines, "max-file-lines", 800, "most lines of a file")
	flag.IntVar(&lim.funcLines, "max-func-lines", 100, "most lines of a function")
	flag.Parse()
	r, err := scan(*root, filepath.Join(*root, *manager), lim)
	if err != nil {
		fmt.Fprintln(os.Stderr, "structure:", err)
		os.Exit(2)
	}
	if !r.print(lim) {
		os.Exit(1)
	}
}

// skipDir reports directories that hold no code of ours.
func skipDir(name string) bool {
	switch name {
	case "node_modules", ".cache", ".git", "testdata", "vendor":
		return true
	}
	return false
}

// counted reports whether a file is non-test, non-generated Go source.
func counted(path string, src []byte) bool {
	base := filepath.Base(path)
	if !strings.HasSuffix(base, ".go") || strings.HasSuffix(base, "_test.go") ||
		strings.HasSuffix(base, ".pb.go") || strings.HasSuffix(base, ".pb.gw.go") {
		return false
	}
	head := src[:min(len(src), 4096)]
	return !strings.Contains(string(head), "// Code generated ") || !strings.Contains(string(head), "DO NOT EDIT.")
}

func scan(root, managerDir string, lim limits) (*report, error) {
	r := &report{managerAt: managerDir}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !counted(path, src) {
			return nil
		}
		return r.file(root, path, src, filepath.Dir(path) == filepath.Clean(managerDir), lim)
	})
	return r, err
}

func (r *report) file(root, path string, src []byte, inManager bool, lim limits) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	r.goFiles++
	rel, _ := filepath.Rel(root, path)
	lines := fset.File(f.Pos()).LineCount()
	if lines > r.maxFile.n {
		r.maxFile = finding{rel, lines}
	}
	if lines > lim.fileLines {
		r.files = append(r.files, finding{rel, lines})
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		where := rel + " " + funcName(fn)
		if n > r.maxFunc.n {
			r.maxFunc = finding{where, n}
		}
		if n > lim.funcLines {
			r.funcs = append(r.funcs, finding{where, n})
		}
		if inManager && receiverIs(fn, "Manager") {
			r.methods = append(r.methods, fn.Name.Name)
		}
	}
	return nil
}

// funcName is Name or (Recv).Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + typeName(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return "?"
}

func receiverIs(fn *ast.FuncDecl, name string) bool {
	return fn.Recv != nil && len(fn.Recv.List) > 0 && strings.TrimPrefix(typeName(fn.Recv.List[0].Type), "*") == name
}

// print writes the numbers and offenders and reports whether all limits hold.
func (r *report) print(lim limits) bool {
	exported := 0
	for _, m := range r.methods {
		if ast.IsExported(m) {
			exported++
		}
	}
	fmt.Printf("session.Manager methods: %d (%d exported; limit %d)\n", len(r.methods), exported, lim.methods)
	fmt.Printf("Go files counted: %d; largest: %s, %d lines (limit %d)\n", r.goFiles, r.maxFile.where, r.maxFile.n, lim.fileLines)
	fmt.Printf("longest function: %s, %d lines (limit %d)\n", r.maxFunc.where, r.maxFunc.n, lim.funcLines)
	ok := true
	if len(r.methods) > lim.methods {
		ok = false
		sort.Strings(r.methods)
		fmt.Printf("FAIL session.Manager has %d methods, over %d: %s\n", len(r.methods), lim.methods, strings.Join(r.methods, " "))
	}
	for _, f := range r.files {
		ok = false
		fmt.Printf("FAIL file %s: %d lines, over %d\n", f.where, f.n, lim.fileLines)
	}
	for _, f := range r.funcs {
		ok = false
		fmt.Printf("FAIL function %s: %d lines, over %d\n", f.where, f.n, lim.funcLines)
	}
	return ok
}
