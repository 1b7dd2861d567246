// Command apisnap writes the exported API of Go packages as text, one
// sorted line per exported name, field, method and constant value, in the
// spirit of the Go project's api/ files:
//
//	pkg github.com/verifierd/verifierd/client, func Dial(string, ...Option) (*Client, error)
//	pkg github.com/verifierd/verifierd/client, type Request struct, Deployment string
//
// make check-api (scripts/check-api.sh) compares it with the committed
// files under api/; make update-api rewrites them.
//
//	apisnap -C MODULE_DIR [-exclude PATH_PART] PATTERN...
//
// Internal packages, examples and commands (package main) are left out:
// they are no part of what a customer can import. -exclude leaves out, in
// addition, every package whose import path holds PATH_PART (the SDK's
// /unstable/ packages, which the compatibility promise does not cover).
//
// A type of one of the module's internal packages that the API reaches (an exported alias of
// it, a field, parameter or result of its type) is promised all the same:
// its exported fields and methods are callable by whoever holds a value of
// it. An exported alias's target is listed under the alias's name,
//
//	pkg github.com/verifierd/verifierd/judge, type Batch = github.com/verifierd/verifierd/internal/compact.Batch
//	pkg github.com/verifierd/verifierd/judge, method (*Batch) Len() int
//
// and every other internal type reached, from those lines too, under its
// import path.
package main

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	dir := flag.String("C", ".", "the module's folder")
	exclude := flag.String("exclude", "", "leave out the packages whose import path holds this text")
	flag.Parse()
	lines, err := snapshot(*dir, *exclude, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "apisnap:", err)
		os.Exit(1)
	}
	fmt.Print(strings.Join(lines, ""))
}

// snapshot loads the packages matching patterns in dir and returns their
// API lines, sorted, leaving out those whose path holds exclude (when set).
func snapshot(dir, exclude string, patterns []string) ([]string, error) {
	cfg := &packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if p.Name == "main" || strings.Contains(p.PkgPath, "/internal/") || strings.Contains(p.PkgPath, "/examples/") {
			continue
		}
		if exclude != "" && strings.Contains(p.PkgPath, exclude) {
			continue
		}
		own := p.PkgPath
		if p.Module != nil {
			own = p.Module.Path
		}
		lines = append(lines, packageLines(p.Types, own)...)
		lines = append(lines, reachedLines(p.Types, own)...)
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// packageLines is the API of one package of the module whose path is own.
func packageLines(pkg *types.Package, own string) []string {
	prefix := "pkg " + pkg.Path() + ", "
	qual := types.RelativeTo(pkg)
	var out []string
	add := func(s string) { out = append(out, prefix+s+"\n") }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			add("const " + name + " " + types.TypeString(o.Type(), qual))
			add("const " + name + " = " + o.Val().ExactString())
		case *types.Var:
			add("var " + name + " " + types.TypeString(o.Type(), qual))
		case *types.Func:
			add("func " + name + signature(o.Type().(*types.Signature), qual))
		case *types.TypeName:
			for _, l := range typeLines(o, own, qual) {
				add(l)
			}
		}
	}
	return out
}

// typeLines is a named type's declaration, its exported fields or
// interface methods, and its exported methods; for an alias of an
// internal type of module own, its target's.
func typeLines(tn *types.TypeName, own string, qual types.Qualifier) []string {
	head := "type " + tn.Name() + typeParams(tn.Type(), qual)
	if tn.IsAlias() {
		out := []string{head + " = " + types.TypeString(types.Unalias(tn.Type()), qual)}
		if named := internalNamed(tn.Type(), own); named != nil {
			out = append(out, namedLines("type "+tn.Name(), tn.Name(), named, qual)...)
		}
		return out
	}
	named, ok := tn.Type().(*types.Named)
	if !ok {
		return []string{head + " " + types.TypeString(tn.Type().Underlying(), qual)}
	}
	return namedLines(head, "", named, qual)
}

// namedLines is a named type's kind with its exported fields or interface
// methods, and its exported methods, each line starting with head. A
// method's receiver is written recv (an alias's name, so that its target
// reads as the alias's own methods) or, when recv is empty, as declared.
func namedLines(head, recv string, named *types.Named, qual types.Qualifier) []string {
	var out []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		out = append(out, head+" struct")
		for f := range u.Fields() {
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				out = append(out, head+" struct, embedded "+types.TypeString(f.Type(), qual))
			} else {
				out = append(out, head+" struct, "+f.Name()+" "+types.TypeString(f.Type(), qual))
			}
		}
	case *types.Interface:
		out = append(out, head+" interface")
		for m := range u.Methods() {
			if m.Exported() {
				out = append(out, head+" interface, "+m.Name()+signature(m.Type().(*types.Signature), qual))
			}
		}
		for e := range u.EmbeddedTypes() {
			out = append(out, head+" interface, embedded "+types.TypeString(e, qual))
		}
	default:
		out = append(out, head+" "+types.TypeString(u, qual))
	}
	for m := range named.Methods() {
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		r := types.TypeString(sig.Recv().Type(), qual)
		if recv != "" {
			r = recv
			if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
				r = "*" + recv
			}
		}
		out = append(out, "method ("+r+") "+m.Name()+signature(sig, qual))
	}
	return out
}

// signature is a function's type parameters, parameter types and result
// types, as Go writes them after the name; parameter names are left out (a
// rename breaks no caller).
func signature(sig *types.Signature, qual types.Qualifier) string {
	var b strings.Builder
	if tps := sig.TypeParams(); tps.Len() > 0 {
		var parts []string
		for p := range tps.TypeParams() {
			parts = append(parts, p.Obj().Name()+" "+types.TypeString(p.Constraint(), qual))
		}
		b.WriteString("[" + strings.Join(parts, ", ") + "]")
	}
	b.WriteString("(" + tuple(sig.Params(), sig.Variadic(), qual) + ")")
	switch res := sig.Results(); {
	case res.Len() == 1:
		b.WriteString(" " + types.TypeString(res.At(0).Type(), qual))
	case res.Len() > 1:
		b.WriteString(" (" + tuple(res, false, qual) + ")")
	}
	return b.String()
}

// tuple is a parameter or result list's types, comma separated; the last
// of a variadic list written ...T.
func tuple(t *types.Tuple, variadic bool, qual types.Qualifier) string {
	var parts []string
	for i := range t.Len() {
		typ := t.At(i).Type()
		if variadic && i == t.Len()-1 {
			parts = append(parts, "..."+types.TypeString(typ.(*types.Slice).Elem(), qual))
			continue
		}
		parts = append(parts, types.TypeString(typ, qual))
	}
	return strings.Join(parts, ", ")
}

// typeParams is a generic type's parameter list, "[B any]".
func typeParams(t types.Type, qual types.Qualifier) string {
	named, ok := t.(*types.Named)
	if !ok || named.TypeParams().Len() == 0 {
		return ""
	}
	var parts []string
	for p := range named.TypeParams().TypeParams() {
		parts = append(parts, p.Obj().Name()+" "+types.TypeString(p.Constraint(), qual))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
