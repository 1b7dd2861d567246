package session

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// judgePath is the import path of the judge.
const judgePath = "github.com/verifierd/verifierd/judge"

// judgingCalls are the judge's functions that turn reads into verdicts:
// only the one judging path (proof.go) calls them.
var judgingCalls = []string{"Judge", "JudgeBatch", "PollGroup"}

// proofFile is the one file of the daemon allowed to call them.
const proofFile = "internal/session/proof.go"

// judgeCallsIn lists the calls of judgingCalls in one parsed file, as
// "file:line: judge.Name", through whatever name the file imports the
// judge by (a dot import included).
func judgeCallsIn(fset *token.FileSet, f *ast.File) []string {
	names, dot := map[string]bool{}, false
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != judgePath {
			continue
		}
		switch {
		case imp.Name == nil:
			names["judge"] = true
		case imp.Name.Name == ".":
			dot = true
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		name := ""
		switch fn := call.Fun.(type) {
		case *ast.SelectorExpr:
			if x, ok := fn.X.(*ast.Ident); ok && names[x.Name] {
				name = fn.Sel.Name
			}
		case *ast.Ident:
			if dot {
				name = fn.Name
			}
		}
		if slices.Contains(judgingCalls, name) {
			out = append(out, fset.Position(call.Pos()).String()+": judge."+name)
		}
		return true
	})
	return out
}

// moduleRoot is the root module's directory (two up from this package).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(b), "module github.com/verifierd/verifierd\n") {
		t.Fatalf("%s is not the root module (go.mod: %v)", root, err)
	}
	return root
}

// skipDir reports whether the walk leaves dir out: the judge itself, the
// test servers, hidden and testdata folders, and nested modules (sdk,
// tools, …), which are not the daemon.
func skipDir(root, dir string) bool {
	rel, _ := filepath.Rel(root, dir)
	rel = filepath.ToSlash(rel)
	base := filepath.Base(dir)
	if rel == "judge" || rel == "internal/testservers" || base == "testdata" || (strings.HasPrefix(base, ".") && rel != ".") {
		return true
	}
	if rel == "." {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// judgeCallsUnder parses every non-test .go file under root (skipDir
// aside) and returns the judging calls outside proofFile, those in it, and
// how many files it parsed.
func judgeCallsUnder(root string) (stray, inProof []string, files int, err error) {
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(root, p) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		calls := judgeCallsIn(fset, f)
		if rel, _ := filepath.Rel(root, p); filepath.ToSlash(rel) == proofFile {
			inProof = append(inProof, calls...)
		} else {
			stray = append(stray, calls...)
		}
		return nil
	})
	return stray, inProof, files, err
}

// TestOneJudgingPath: no non-test file of the root module outside the
// judge and the test servers calls judge.Judge, judge.JudgeBatch or
// judge.PollGroup, except the one judging path (proof.go). It checks that
// proof.go itself is found calling them, so that a walk that misses files
// fails too.
func TestOneJudgingPath(t *testing.T) {
	t.Parallel()
	stray, inProof, files, err := judgeCallsUnder(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || len(inProof) != len(judgingCalls) {
		t.Fatalf("parsed %d files and found %v in %s: the walk did not see the daemon", files, inProof, proofFile)
	}
	for _, s := range stray {
		t.Errorf("%s: judge only through the one judging path in %s (prove, settleProof), which applies the deployment's census, freshness and absence rule", s, proofFile)
	}
}

// TestOneJudgingPathFails: on a synthetic module the walk reports a stray
// call, and leaves out proof.go, test files, the judge and nested modules.
func TestOneJudgingPathFails(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	call := "package x\nimport \"" + judgePath + "\"\nfunc f() { judge.Judge(nil) }\n"
	for name, src := range map[string]string{
		"go.mod":                      "module github.com/verifierd/verifierd\n",
		"internal/reward/outcome.go":  call,
		proofFile:                     call,
		"internal/reward/x_test.go":   call,
		"judge/judge.go":              call,
		"internal/testservers/s/s.go": call,
		"sdk/go.mod":                  "module github.com/verifierd/verifierd/sdk\n",
		"sdk/unstable/host/h.go":      call,
		"internal/session/clean.go":   "package x\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stray, inProof, files, err := judgeCallsUnder(root)
	if err != nil {
		t.Fatal(err)
	}
	if files != 3 || len(inProof) != 1 || len(stray) != 1 || !strings.Contains(stray[0], filepath.FromSlash("internal/reward/outcome.go")+":3:") {
		t.Errorf("parsed %d files (want 3), in proof.go %v (want 1), stray %v (want internal/reward/outcome.go:3)", files, inProof, stray)
	}
}

// TestJudgeCallsFound: the check finds a judging call however the judge is
// imported, and nothing else.
func TestJudgeCallsFound(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		src  string
		want int
	}{
		"plain":             {"package x\nimport \"" + judgePath + "\"\nfunc f() { judge.Judge(nil, judge.Snapshot{}, judge.Snapshot{}, judge.Options{}) }\n", 1},
		"batch and poll":    {"package x\nimport \"" + judgePath + "\"\nfunc f() { _ = judge.JudgeBatch; judge.JudgeBatch(nil); judge.PollGroup(nil) }\n", 2},
		"renamed":           {"package x\nimport j \"" + judgePath + "\"\nfunc f() { j.Judge(nil) }\n", 1},
		"dot import":        {"package x\nimport . \"" + judgePath + "\"\nfunc f() { Judge(nil) }\n", 1},
		"other package":     {"package x\nimport judge \"example.com/other\"\nfunc f() { judge.Judge(nil) }\n", 0},
		"constructor":       {"package x\nimport \"" + judgePath + "\"\nfunc f() { judge.Unreachable(nil, \"\") }\n", 0},
		"a method of a var": {"package x\nimport \"" + judgePath + "\"\nfunc f(m interface{ Judge() }) { m.Judge() }\n", 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name+".go", tc.src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := judgeCallsIn(fset, f); len(got) != tc.want {
			t.Errorf("%s: found %v, want %d call(s)", name, got, tc.want)
		}
	}
}
