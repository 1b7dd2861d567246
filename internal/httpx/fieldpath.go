package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// FieldPath is the path language of field_paths, shared by the rest,
// graphql and fhir adapters: where one output field is taken from inside a
// record. Segments are separated by dots; each is
//
//   - a key of an object: subject.reference
//   - digits, an index into an array: code.coding.0.code (or coding[0])
//   - key[name=value], the one element of the array at key that is an
//     object whose field name equals value: identifier[system=urn:claims].value,
//     custom_fields[id=1].value
//
// Inside brackets a dot is part of the value (system=http://loinc.org).
// Arrays are never entered implicitly: which element counts is the
// operator's choice.
type FieldPath struct {
	text string
	segs []fieldSeg
}

type fieldSeg struct {
	key      string // object key; "" for a bare index segment
	index    int    // array index, when hasIndex
	hasIndex bool
	digits   string // the index as written, when it stands alone: an object's key then
	selKey   string // [selKey=selValue], when selects
	selValue string
	selects  bool
}

// ParseFieldPath reads one path of the language above.
func ParseFieldPath(s string) (FieldPath, error) {
	if s == "" {
		return FieldPath{}, errors.New("the path is empty; write a dotted path such as custom_fields[id=1].value")
	}
	var segs []fieldSeg
	rest := s
	for n := 1; ; n++ {
		// The segment ends at the first dot outside brackets.
		end, depth := len(rest), 0
		for i := 0; i < len(rest); i++ {
			switch rest[i] {
			case '[':
				depth++
			case ']':
				depth--
			case '.':
				if depth == 0 {
					end = i
				}
			}
			if end != len(rest) {
				break
			}
		}
		seg, err := parseFieldSeg(rest[:end])
		if err != nil {
			return FieldPath{}, fmt.Errorf("segment %d of %q: %v", n, s, err)
		}
		segs = append(segs, seg...)
		if end == len(rest) {
			break
		}
		rest = rest[end+1:]
	}
	return FieldPath{text: s, segs: segs}, nil
}

// parseFieldSeg reads one dotted segment: key, digits, key[digits] or
// key[name=value]; a segment may carry several brackets (a[0][k=v]).
func parseFieldSeg(seg string) ([]fieldSeg, error) {
	if seg == "" {
		return nil, errors.New("it is empty; write keys separated by single dots, e.g. subject.reference")
	}
	key, brackets, _ := strings.Cut(seg, "[")
	if strings.ContainsAny(key, "]=") {
		return nil, fmt.Errorf("%q is not a key; a selector is written key[name=value]", seg)
	}
	if key == "" {
		return nil, fmt.Errorf("%q: write the key of the array before the bracket, e.g. identifier[system=urn:claims]", seg)
	}
	var out []fieldSeg
	if i, ok := index(key); ok {
		out = append(out, fieldSeg{index: i, hasIndex: true, digits: key})
	} else {
		out = append(out, fieldSeg{key: key})
	}
	if !strings.Contains(seg, "[") {
		return out, nil
	}
	rest := "[" + brackets
	for rest != "" {
		if rest[0] != '[' {
			return nil, fmt.Errorf("%q: write nothing between or after brackets (key[name=value].next)", seg)
		}
		closeAt := strings.IndexByte(rest, ']')
		if closeAt < 0 {
			return nil, fmt.Errorf("%q: a bracket is not closed", seg)
		}
		inner := rest[1:closeAt]
		rest = rest[closeAt+1:]
		if strings.ContainsAny(inner, "[") {
			return nil, fmt.Errorf("%q: brackets do not nest", seg)
		}
		if i, ok := index(inner); ok {
			out = append(out, fieldSeg{index: i, hasIndex: true})
			continue
		}
		name, value, ok := strings.Cut(inner, "=")
		if !ok || name == "" || value == "" || strings.ContainsAny(name, ".=") {
			return nil, fmt.Errorf("%q: inside brackets write an index (0) or a selector name=value, e.g. [system=urn:claims]", seg)
		}
		out = append(out, fieldSeg{selKey: name, selValue: value, selects: true})
	}
	return out, nil
}

func (p FieldPath) String() string { return p.text }

// Lookup walks p from v. A selector that more than one element satisfies
// is an error: which element is meant is not known, and guessing could
// confirm the wrong value.
func (p FieldPath) Lookup(v any) (any, Found, error) {
	for _, seg := range p.segs {
		if seg.key != "" {
			switch x := v.(type) {
			case nil:
				return nil, Null, nil
			case map[string]any:
				next, ok := x[seg.key]
				if !ok {
					return nil, Missing, nil
				}
				v = next
			default:
				return nil, Missing, nil
			}
		}
		if !seg.hasIndex && !seg.selects {
			continue
		}
		if m, ok := v.(map[string]any); ok && seg.digits != "" {
			next, ok := m[seg.digits]
			if !ok {
				return nil, Missing, nil
			}
			v = next
			continue
		}
		var list []any
		switch x := v.(type) {
		case nil:
			return nil, Null, nil
		case []any:
			list = x
		default:
			return nil, Missing, nil
		}
		if seg.hasIndex {
			if seg.index >= len(list) {
				return nil, Missing, nil
			}
			v = list[seg.index]
			continue
		}
		var found []any
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && textEquals(m[seg.selKey], seg.selValue) {
				found = append(found, m)
			}
		}
		switch len(found) {
		case 0:
			return nil, Missing, nil
		case 1:
			v = found[0]
		default:
			return nil, Missing, fmt.Errorf("field path %s: %d elements have %s=%s, so which one is meant is not known", p.text, len(found), seg.selKey, seg.selValue)
		}
	}
	if v == nil {
		return nil, Null, nil
	}
	return v, Present, nil
}

// textEquals compares a selector's value with a decoded JSON scalar as
// text: a string as it is, a number as written, a boolean as true/false.
func textEquals(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case json.Number:
		return x.String() == want
	case bool:
		return (x && want == "true") || (!x && want == "false")
	}
	return false
}

// FieldPaths maps each output field to its path: a field_paths section.
type FieldPaths map[string]FieldPath

// ParseFieldPaths reads field_paths at key (record field -> path), naming
// the field of a malformed path. A nil or empty map is nil: records are
// then read whole.
func ParseFieldPaths(key string, raw map[string]string) (FieldPaths, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(FieldPaths, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if name == "" {
			return nil, &refusal.Error{Path: key, Message: "a record field name is empty"}
		}
		p, err := ParseFieldPath(raw[name])
		if err != nil {
			return nil, &refusal.Error{Path: key + "." + name, Message: err.Error()}
		}
		out[name] = p
	}
	return out, nil
}

// Flatten makes one record of an object. Without field paths the record is
// the object itself (nested values compare as compact JSON). A path that
// leads nowhere, or to null, leaves the field out: the judge treats a
// missing field as having no value, so it never matches. An ambiguous
// selector is an error: the read is then not judged.
func (fp FieldPaths) Flatten(obj map[string]any) (sdk.Record, error) {
	if fp == nil {
		return sdk.Record(obj), nil
	}
	rec := make(sdk.Record, len(fp))
	for _, name := range slices.Sorted(maps.Keys(fp)) {
		v, found, err := fp[name].Lookup(obj)
		if err != nil {
			return nil, fmt.Errorf("record field %s: %w", name, err)
		}
		if found == Present {
			rec[name] = v
		}
	}
	return rec, nil
}

// FlattenAll flattens every record of a page in place; where names the
// list in the error.
func (fp FieldPaths) FlattenAll(recs []sdk.Record, where string) error {
	if fp == nil {
		return nil
	}
	for i, r := range recs {
		flat, err := fp.Flatten(r)
		if err != nil {
			return fmt.Errorf("%s[%d]: %v", where, i, err)
		}
		recs[i] = flat
	}
	return nil
}

func (fp FieldPaths) String() string {
	if fp == nil {
		return "the whole record"
	}
	return fmt.Sprintf("%d field paths", len(fp))
}
