package main

import (
	"go/types"
	"strings"
)

// reachedLines is the API of the types of module own's internal packages
// that pkg's API reaches, other than the targets of its exported aliases (typeLines lists
// those under the alias's name): every such type's exported fields and
// methods, under its import path, and so on for the types those reach.
func reachedLines(pkg *types.Package, own string) []string {
	qual := types.RelativeTo(pkg)
	r := &reach{own: own, seen: map[*types.Named]bool{}, aliased: map[*types.Named]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		switch {
		case !ok:
			r.visit(obj.Type())
		case tn.IsAlias():
			if n := internalNamed(tn.Type(), own); n != nil {
				r.aliased[n] = true
			}
			r.visit(types.Unalias(tn.Type()))
		default:
			if n, ok := tn.Type().(*types.Named); ok {
				r.members(n)
			} else {
				r.visit(tn.Type().Underlying())
			}
		}
	}
	var out []string
	for i := 0; i < len(r.queue); i++ {
		n := r.queue[i]
		r.members(n)
		if r.aliased[n] {
			continue
		}
		for _, l := range namedLines("type "+types.TypeString(n, qual), "", n, qual) {
			out = append(out, "pkg "+pkg.Path()+", "+l+"\n")
		}
	}
	return out
}

// reach collects the internal named types an API reaches, in the order
// first seen.
type reach struct {
	own     string
	seen    map[*types.Named]bool
	aliased map[*types.Named]bool
	queue   []*types.Named
}

// visit notes every internal named type t names, through pointers,
// containers, signatures and literal structs and interfaces; a named
// type's own members are visited when it is taken from the queue
// (internal) or by the caller (the package's own types).
func (r *reach) visit(t types.Type) {
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		for a := range t.TypeArgs().Types() {
			r.visit(a)
		}
		if isInternal(t, r.own) && !r.seen[t] {
			r.seen[t] = true
			r.queue = append(r.queue, t)
		}
	case *types.Pointer:
		r.visit(t.Elem())
	case *types.Slice:
		r.visit(t.Elem())
	case *types.Array:
		r.visit(t.Elem())
	case *types.Chan:
		r.visit(t.Elem())
	case *types.Map:
		r.visit(t.Key())
		r.visit(t.Elem())
	case *types.Signature:
		r.tuple(t.Params())
		r.tuple(t.Results())
	case *types.Struct:
		r.fields(t)
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				r.visit(m.Type())
			}
		}
		for e := range t.EmbeddedTypes() {
			r.visit(e)
		}
	}
}

// members visits a named type's exported fields (and embedded ones, whose
// methods are promoted), its underlying type otherwise, and its exported
// methods' signatures.
func (r *reach) members(n *types.Named) {
	if _, isStruct := n.Underlying().(*types.Struct); !isStruct {
		r.visit(n.Underlying())
	} else {
		r.fields(n.Underlying().(*types.Struct))
	}
	for m := range n.Methods() {
		if m.Exported() {
			r.visit(m.Type())
		}
	}
}

// fields visits a struct's exported and embedded fields.
func (r *reach) fields(s *types.Struct) {
	for f := range s.Fields() {
		if f.Exported() || f.Embedded() {
			r.visit(f.Type())
		}
	}
}

// tuple visits every type of a parameter or result list.
func (r *reach) tuple(t *types.Tuple) {
	for v := range t.Variables() {
		r.visit(v.Type())
	}
}

// internalNamed is the named type t stands for when it is one of an
// internal package of module own, else nil.
func internalNamed(t types.Type, own string) *types.Named {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || !isInternal(n, own) {
		return nil
	}
	return n
}

// isInternal reports whether a named type is declared in an internal
// package of module own, one no customer can import, whose API only this
// module's snapshot can show. (Another module's internal types, reached
// through that module's public aliases, are its own promise.)
func isInternal(n *types.Named, own string) bool {
	p := n.Obj().Pkg()
	if p == nil || (p.Path() != own && !strings.HasPrefix(p.Path(), own+"/")) {
		return false
	}
	return strings.Contains(p.Path(), "/internal/") || strings.HasSuffix(p.Path(), "/internal")
}
