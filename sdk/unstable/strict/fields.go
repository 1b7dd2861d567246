package strict

import (
	"reflect"
	"strings"
	"sync"
)

// field is one key of a struct: its name, whether it is required, and
// where its field is (an index path through embedded structs).
type field struct {
	Name     string
	Required bool
	index    []int
}

// fieldCache holds fields' answer per struct type: a type's keys never
// change, and a contract list decodes the same struct once per effect.
var fieldCache sync.Map // reflect.Type -> []field

// cachedFields is fields(t), computed once per type. Callers must not
// change the slice.
func cachedFields(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field) //nolint:forcetypeassert // only []field is stored
	}
	fs := fields(t)
	fieldCache.Store(t, fs)
	return fs
}

// fields lists the keys of struct type t, in declaration order, with the
// keys of an embedded struct (untagged; a struct, or an exported pointer
// to one) in its place, as encoding/json promotes them.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer && f.IsExported() {
			ft = ft.Elem() // an exported embedded pointer is allocated when a key fills it
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for _, inner := range fields(ft) {
				inner.index = append([]int{i}, inner.index...)
				out = append(out, inner)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{Name: name, Required: hasOption(f.Tag.Get("strict"), "required"), index: []int{i}})
	}
	return out
}

// Keys lists the keys of struct type t (a pointer is followed), in
// declaration order.
func Keys(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for _, f := range cachedFields(t) {
		keys = append(keys, f.Name)
	}
	return keys
}

func fieldNamed(fields []field, key string) (field, bool) {
	for _, f := range fields {
		if f.Name == key {
			return f, true
		}
	}
	return field{}, false
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// Closest is the key of known nearest to key within two edits (a typo's
// likely intent), or "" when none is that close. Ties go to the first in
// known's order.
func Closest(key string, known []string) string {
	best, bestD := "", 3
	if len(key) > 64 {
		return ""
	}
	for _, k := range known {
		if len(k) > 64 {
			continue
		}
		if d := levenshtein(key, k); d < bestD && d < len(key) {
			best, bestD = k, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b, in bytes.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fieldAt is v's field at index, through embedded structs, allocating an
// embedded pointer that is nil.
func fieldAt(v reflect.Value, index []int) reflect.Value {
	for n, i := range index {
		if n > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v
}
