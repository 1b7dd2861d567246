// Package strict decodes a configuration tree into Go structs and refuses
// anything it does not expect, naming where. It is the one decoder behind
// every file an operator writes (deployments, workflows, effect contracts,
// reward contracts) and behind sdk.DecodeConfig, so that every refusal reads
// the same: the dotted path of the key, what is wrong, and what is allowed.
//
// A tree is what a JSON reader (with json.Number) or a YAML reader yields:
// maps with string keys, lists, strings, numbers, booleans and null. Decode
// walks it along the target's type:
//
//   - a struct's keys are its fields' `json` tag names (the field name when
//     untagged; `json:"-"` and unexported fields are not keys). The fields
//     of an embedded struct without a tag are keys of the struct embedding
//     it. The tag `strict:"required"` makes a key mandatory: absent or
//     null, it is refused as missing.
//   - a key the struct has no field for is refused with the keys allowed
//     there and, when one is close, the key that was probably meant.
//   - a value of the wrong type is refused with the type it must be. null
//     leaves a pointer, an interface, a map or a slice nil; it is refused
//     for a string, a number, a boolean or a struct.
//   - a field of type any receives the subtree as it is (for a caller that
//     reads that part itself); json.RawMessage receives it as JSON; a type
//     with an UnmarshalTree method reads its own subtree; any other
//     json.Unmarshaler receives the subtree as JSON. Such a type is called
//     whenever its key is present, null included, so it can tell a null
//     from an absent key.
//   - a key absent from the tree leaves its field as it was, so a caller
//     sets defaults by filling the value before decoding.
//
// A tree nested deeper than jsondepth.Max is refused rather than followed.
// The package is a leaf of the SDK: it imports the standard library,
// sdk/unstable/jsondepth and sdk/refusal only, so the daemon and adapters share it.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// Codes of a refusal.
const (
	// CodeUnknownKey is a key the target has no field for.
	CodeUnknownKey = "UNKNOWN_KEY"
	// CodeMissing is a required key that is absent or null.
	CodeMissing = "MISSING_KEY"
	// CodeType is a value of the wrong type.
	CodeType = "WRONG_TYPE"
	// CodeDepth is a tree nested deeper than jsondepth.Max.
	CodeDepth = "TOO_DEEP"
	// CodeSyntax is JSON text that does not parse (DecodeJSON).
	CodeSyntax = "SYNTAX"
	// CodeInvalid is a value its own type's decoder refused.
	CodeInvalid = "INVALID_VALUE"
)

// Error is a refused tree: what is wrong (Code), where (Path, in the form
// a.b[2].c, the caller's prefix first) and how to fix it (Message).
type Error struct {
	Code    string
	Path    string
	Message string
	// Key and Allowed are set for CodeUnknownKey: the key as written and
	// the keys allowed where it stands, in the order the struct declares
	// them.
	Key     string
	Allowed []string
	// Err is, for CodeInvalid, the refusal of the type's own decoder, so
	// that a caller finds its own error type with errors.As.
	Err error
}

// Unwrap is the type's own refusal (CodeInvalid), or nil.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Unmarshaler is a type that reads its own subtree; path is where the
// subtree stands, for its refusals.
type Unmarshaler interface {
	UnmarshalTree(tree any, path string) error
}

// Decode walks tree into v, a non-nil pointer. path names tree in
// refusals ("" for a document's top level). Every refusal is an *Error.
func Decode(tree any, path string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strict.Decode needs a non-nil pointer, not %T", v)
	}
	return decode(tree, path, rv.Elem(), 1)
}

// DecodeRefusal is Decode for a caller whose refusals are *refusal.Error
// (an adapter's refusal.Error is one): a *refusal.Error that a type's own
// decoder returned comes back as it is, and every other refusal as a
// *refusal.Error of code with the path and message Decode gave it.
func DecodeRefusal(tree any, path string, v any, code string) error {
	err := Decode(tree, path, v)
	if err == nil {
		return nil
	}
	if own, ok := refusal.As(err); ok {
		return own
	}
	if se, ok := errors.AsType[*Error](err); ok {
		return refusal.New(code, se.Path, se.Message)
	}
	return refusal.New(code, path, err.Error())
}

// DecodeJSON reads one JSON value from data (numbers kept exact, nesting
// bounded by jsondepth.Max) and decodes it into v as Decode does. Empty
// text leaves v as it is.
func DecodeJSON(data []byte, path string, v any) error {
	tree, err := ParseJSON(data, path)
	if err != nil || tree == nil && len(bytes.TrimSpace(data)) == 0 {
		return err
	}
	return Decode(tree, path, v)
}

// ParseJSON reads one JSON value into a tree (json.Number for numbers),
// refusing text nested deeper than jsondepth.Max and text after the value.
// Empty text is a nil tree.
func ParseJSON(data []byte, path string) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	if err := jsondepth.CheckJSON(data, path, jsondepth.Max); err != nil {
		if de, ok := errors.AsType[*jsondepth.Error](err); ok {
			return nil, &Error{Code: CodeDepth, Path: de.Path, Message: strings.TrimPrefix(err.Error(), de.Path+" ")}
		}
		return nil, &Error{Code: CodeDepth, Path: path, Message: err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, &Error{Code: CodeSyntax, Path: path, Message: "not valid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Code: CodeSyntax, Path: path, Message: "more than one JSON value; write one"}
	}
	return tree, nil
}

var (
	typeNumber = reflect.TypeFor[json.Number]()
	typeRaw    = reflect.TypeFor[json.RawMessage]()
)

func decode(tree any, path string, v reflect.Value, depth int) error {
	if depth > jsondepth.Max {
		return &Error{Code: CodeDepth, Path: path, Message: fmt.Sprintf("nests more than %d levels of maps and lists; flatten the value", jsondepth.Max)}
	}
	t := v.Type()
	switch {
	case t == typeRaw:
		raw, err := json.Marshal(tree)
		if err != nil {
			return &Error{Code: CodeInvalid, Path: path, Message: "cannot be written as JSON: " + err.Error()}
		}
		v.SetBytes(raw)
		return nil
	case t.Kind() == reflect.Interface:
		if tree == nil {
			v.SetZero()
			return nil
		}
		tv := reflect.ValueOf(tree)
		if !tv.Type().AssignableTo(t) {
			return &Error{Code: CodeType, Path: path, Message: "has the wrong type for this key"}
		}
		v.Set(tv)
		return nil
	}
	if u, ok := reflect.TypeAssert[Unmarshaler](v.Addr()); ok {
		return wrapInvalid(path, u.UnmarshalTree(tree, path))
	}
	if u, ok := reflect.TypeAssert[json.Unmarshaler](v.Addr()); ok && t != typeNumber {
		raw, err := json.Marshal(tree)
		if err != nil {
			return &Error{Code: CodeInvalid, Path: path, Message: "cannot be written as JSON: " + err.Error()}
		}
		return wrapInvalid(path, u.UnmarshalJSON(raw))
	}
	if t.Kind() == reflect.Pointer {
		if tree == nil {
			v.SetZero()
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return decode(tree, path, v.Elem(), depth)
	}
	switch t.Kind() {
	case reflect.Struct:
		return decodeStruct(tree, path, v, depth)
	case reflect.Map:
		return decodeMap(tree, path, v, depth)
	case reflect.Slice, reflect.Array:
		return decodeList(tree, path, v, depth)
	default:
		return decodeScalar(tree, path, v)
	}
}

// wrapInvalid gives a type's own refusal the path, unless it is already
// one of ours (it named its own path). The refusal stays reachable with
// errors.As, so a caller whose type refused in its own terms keeps them.
func wrapInvalid(path string, err error) error {
	if err == nil {
		return nil
	}
	if se, ok := errors.AsType[*Error](err); ok {
		return se
	}
	return &Error{Code: CodeInvalid, Path: path, Message: err.Error(), Err: err}
}

// asMap is tree as a map with string keys, or false.
func asMap(tree any) (map[string]any, bool) {
	switch m := tree.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			s, ok := k.(string)
			if !ok {
				return nil, false
			}
			out[s] = x
		}
		return out, true
	}
	return nil, false
}

func decodeStruct(tree any, path string, v reflect.Value, depth int) error {
	m, ok := asMap(tree)
	if !ok {
		return typeError(path, "a map", tree)
	}
	fs := cachedFields(v.Type())
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		if _, ok := fieldNamed(fs, k); !ok {
			return UnknownKey(path, k, Keys(v.Type()))
		}
	}
	for _, k := range keys {
		f, _ := fieldNamed(fs, k)
		if m[k] == nil && f.Required {
			continue // refused below as missing
		}
		if err := decode(m[k], join(path, k), fieldAt(v, f.index), depth+1); err != nil {
			return err
		}
	}
	for _, f := range fs {
		if f.Required && m[f.Name] == nil {
			return &Error{Code: CodeMissing, Path: join(path, f.Name), Message: "missing: this key is required"}
		}
	}
	return nil
}

func decodeMap(tree any, path string, v reflect.Value, depth int) error {
	if tree == nil {
		v.SetZero()
		return nil
	}
	m, ok := asMap(tree)
	if !ok {
		return typeError(path, "a map", tree)
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		return fmt.Errorf("strict: map keys of %s are not strings", t)
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(t, len(m)))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		elem := reflect.New(t.Elem()).Elem()
		if old := v.MapIndex(reflect.ValueOf(k).Convert(t.Key())); old.IsValid() {
			elem.Set(old)
		}
		if err := decode(m[k], join(path, k), elem, depth+1); err != nil {
			return err
		}
		v.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), elem)
	}
	return nil
}

func decodeList(tree any, path string, v reflect.Value, depth int) error {
	t := v.Type()
	if tree == nil && t.Kind() == reflect.Slice {
		v.SetZero()
		return nil
	}
	if s, ok := tree.(string); ok && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		v.SetBytes([]byte(s))
		return nil
	}
	items, ok := tree.([]any)
	if !ok {
		return typeError(path, "a list", tree)
	}
	if t.Kind() == reflect.Array {
		if len(items) != t.Len() {
			return &Error{Code: CodeType, Path: path, Message: fmt.Sprintf("must be a list of %d items, got %d", t.Len(), len(items))}
		}
	} else {
		v.Set(reflect.MakeSlice(t, len(items), len(items)))
	}
	for i, item := range items {
		if err := decode(item, path+"["+strconv.Itoa(i)+"]", v.Index(i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func decodeScalar(tree any, path string, v reflect.Value) error {
	t := v.Type()
	switch k := t.Kind(); {
	case t == typeNumber:
		n, ok := numberText(tree)
		if s, isStr := tree.(string); isStr && json.Valid([]byte(s)) {
			if _, err := strconv.ParseFloat(s, 64); err == nil {
				n, ok = s, true
			}
		}
		if !ok {
			return typeError(path, "a number", tree)
		}
		v.SetString(n)
	case k == reflect.String:
		s, ok := tree.(string)
		if !ok {
			return stringError(path, tree)
		}
		v.SetString(s)
	case k == reflect.Bool:
		b, ok := tree.(bool)
		if !ok {
			return typeError(path, "true or false", tree)
		}
		v.SetBool(b)
	case k >= reflect.Int && k <= reflect.Int64:
		i, ok := wholeNumber(tree)
		if !ok || v.OverflowInt(i) {
			return typeError(path, "a whole number", tree)
		}
		v.SetInt(i)
	case k >= reflect.Uint && k <= reflect.Uintptr:
		i, ok := wholeNumber(tree)
		if !ok || i < 0 || v.OverflowUint(uint64(i)) {
			return typeError(path, "a whole number, 0 or more", tree)
		}
		v.SetUint(uint64(i))
	case k == reflect.Float32 || k == reflect.Float64:
		n, ok := numberText(tree)
		f, err := strconv.ParseFloat(n, t.Bits())
		if !ok || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return typeError(path, "a number", tree)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("strict: %s at %s is not a type a configuration decodes into", t, path)
	}
	return nil
}

// numberText is a number of the tree as decimal text.
func numberText(tree any) (string, bool) {
	switch n := tree.(type) {
	case json.Number:
		return string(n), true
	case float64:
		return strconv.FormatFloat(n, 'g', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(n), 'g', -1, 32), true
	case int, int64, int32, uint64, uint:
		return fmt.Sprint(n), true // decimal digits, as strconv writes them
	}
	return "", false
}

// wholeNumber reads a number with no fraction (2 and 2.0, not 2.5).
func wholeNumber(tree any) (int64, bool) {
	n, ok := numberText(tree)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// stringError refuses a non-string where a string must be; a number or a
// boolean (a YAML reader's reading of version: 1 or name: yes) is most
// likely meant as text, so the refusal says to quote it. It does not
// offer the quoted text: a YAML reader may have changed it (0007 reads
// as 7).
func stringError(path string, got any) error {
	err := typeError(path, "a string", got)
	if _, isMap := asMap(got); got != nil && !isMap {
		if _, isList := got.([]any); !isList {
			err.Message += "; write it in quotes if it is text"
		}
	}
	return err
}

func typeError(path, want string, got any) *Error {
	return &Error{Code: CodeType, Path: path, Message: "must be " + want + ", got " + Describe(got)}
}

// Describe names what a tree value is, for refusals: a number or a
// boolean as written, anything else by its type (a string's text is not
// repeated: it may be something the operator would not want in a log).
func Describe(tree any) string {
	if tree == nil {
		return "null"
	}
	if b, ok := tree.(bool); ok {
		return strconv.FormatBool(b)
	}
	if n, ok := numberText(tree); ok {
		if len(n) > 32 {
			return "a number"
		}
		return n
	}
	switch tree.(type) {
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	if _, ok := asMap(tree); ok {
		return "a map"
	}
	return fmt.Sprintf("a %T", tree)
}

// UnknownKey is the refusal of key, written under path where only allowed
// may stand: the keys allowed, and the one probably meant when one is
// close. A walker of its own (a map whose keys it checks by hand) refuses
// with it so that its refusals read as Decode's.
func UnknownKey(path, key string, allowed []string) *Error {
	msg := fmt.Sprintf("unknown key; %q is not one of: %s", clip(key), strings.Join(allowed, ", "))
	if path != "" {
		msg = fmt.Sprintf("unknown key; %q is not one of the keys of %s: %s", clip(key), path, strings.Join(allowed, ", "))
	}
	if len(allowed) == 0 {
		msg = fmt.Sprintf("unknown key; %q is not allowed here (no keys are)", clip(key))
	}
	if s := Closest(key, allowed); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return &Error{Code: CodeUnknownKey, Path: join(path, key), Message: msg, Key: key, Allowed: allowed}
}

// clip bounds a key quoted in a message.
func clip(k string) string {
	const most = 64
	if len(k) > most {
		return strings.ToValidUTF8(k[:most], "") + "…"
	}
	return k
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
