package param

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Value is one value expression: literal text, or a reference to a run
// parameter.
type Value struct {
	Literal string
	Param   string // non-empty for a {param: name} reference
	// As is the comparison type of a contract value (decimal, integer,
	// boolean; "" is text). Only the judge's contract loader sets it: Parse
	// never does, and refuses an `as` key like any other unknown key.
	As string
}

// IsParam reports whether v refers to a run parameter.
func (v Value) IsParam() bool { return v.Param != "" }

// Error is a refused value or parameter, and an adapter's refused
// configuration (sdk.ConfigError is this type). Path is the dotted path of
// the offending key ("" when the caller has not said where the value came
// from); Message says what is wrong and what to write instead.
type Error struct {
	Path    string
	Message string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Option adjusts how Parse words its refusals.
type Option func(*parser)

type parser struct {
	numberText func(string) string
}

// NumberText renders the number in the "write it as a string" hint of a
// refused number (the judge passes its canonical form, so 2.50 suggests
// "2.5"). Without it the number is suggested as written.
func NumberText(f func(text string) string) Option {
	return func(p *parser) { p.numberText = f }
}

// Parse reads one value expression from a decoded YAML or JSON tree
// (strings, json.Number or Go numbers, booleans, nil, []any and
// map[string]any): a bare string or {literal: "text"} is a literal,
// {param: name} names a run parameter. Anything else is refused with an
// *Error whose Path is path or the offending key under it.
func Parse(tree any, path string, opts ...Option) (Value, error) {
	var p parser
	for _, o := range opts {
		o(&p)
	}
	switch x := tree.(type) {
	case string:
		return Value{Literal: x}, nil
	case map[string]any:
		if len(x) != 1 {
			return Value{}, refuse(path, `a value object has exactly one key, literal or param: write {literal: "text"} or {param: name}`)
		}
		if lit, ok := x["literal"]; ok {
			s, isStr := lit.(string)
			if !isStr {
				return Value{}, refuse(join(path, "literal"), "a literal must be a string, got %s; write %q", TypeName(lit), p.suggestion(lit))
			}
			return Value{Literal: s}, nil
		}
		if name, ok := x["param"]; ok {
			s, isStr := name.(string)
			if !isStr || s == "" {
				return Value{}, refuse(join(path, "param"), "a param reference must name a run parameter (a non-empty string), got %s", Show(name))
			}
			return Value{Param: s}, nil
		}
		var key string
		for k := range x {
			key = k
		}
		return Value{}, refuse(path, `malformed value object with key %q: write {literal: "text"} or {param: name}`, key)
	default:
		return Value{}, refuse(path, "a value must be a string, got %s; write %q (%s)", TypeName(tree), p.suggestion(tree), lastKey(path))
	}
}

// ParseJSON reads one value expression from raw JSON, as an adapter holds
// its section. It accepts exactly what Parse accepts; a refusal names path
// itself and lists the three forms, which reads better in a deployment
// section than the judge's detail.
func ParseJSON(raw json.RawMessage, path string) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err == nil && !dec.More() {
		if v, err := Parse(tree, path); err == nil {
			return v, nil
		}
	}
	return Value{}, &Error{Path: path, Message: `write a string, {literal: "text"} or {param: name}; numbers are written as strings ("42")`}
}

// Bind returns the literal, or the run parameter v names. A parameter the
// run does not supply is refused: a read must never go out with a hole
// where its subject belongs.
func (v Value) Bind(params map[string]string, path string) (string, error) {
	if !v.IsParam() {
		return v.Literal, nil
	}
	s, ok := params[v.Param]
	if !ok {
		return "", &Error{Path: path, Message: fmt.Sprintf("the run has no parameter %q; pass it with the run (--param %s=VALUE) or write a literal", v.Param, v.Param)}
	}
	return s, nil
}

// BindJSON parses raw with ParseJSON and binds it.
func BindJSON(raw json.RawMessage, path string, params map[string]string) (string, error) {
	v, err := ParseJSON(raw, path)
	if err != nil {
		return "", err
	}
	return v.Bind(params, path)
}

// BindMap parses and binds every entry of a JSON map of value expressions;
// each entry's path is path.name. Entries are read in name order, so the
// first refusal is stable.
func BindMap(raw map[string]json.RawMessage, path string, params map[string]string) (map[string]string, error) {
	names := slices.Sorted(maps.Keys(raw))
	out := make(map[string]string, len(raw))
	for _, k := range names {
		v, err := BindJSON(raw[k], join(path, k), params)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func refuse(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// TypeName names a decoded YAML or JSON value's type for a message ("a
// string", "a map"), never its content.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, int, int64, uint64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// Text is the text of a decoded scalar as it was written: a string as is,
// a number in its digits (json.Number's own text), a bool as true or false.
// nil and anything else (a map, a list) have none.
func Text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// Show renders a decoded scalar for a message (strings quoted) and names
// the type of anything else.
func Show(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return TypeName(v)
}

// suggestion is the string a refused scalar should have been written as.
func (p parser) suggestion(v any) string {
	var n string
	switch x := v.(type) {
	case json.Number:
		n = string(x)
	case int:
		n = strconv.Itoa(x)
	case int64:
		n = strconv.FormatInt(x, 10)
	case uint64:
		n = strconv.FormatUint(x, 10)
	case float64:
		n = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	default:
		return "text"
	}
	if p.numberText != nil {
		return p.numberText(n)
	}
	return n
}

// Values is a map of value expressions read once, when an adapter is
// configured, and bound to each call's run parameters. Binding never
// changes which names there are, only their values.
type Values struct {
	path  string
	names []string
	m     map[string]Value
}

// ParseMap reads every entry of a JSON map of value expressions; each
// entry's path is path.name. Entries are read in name order, so the first
// refusal is stable.
func ParseMap(raw map[string]json.RawMessage, path string) (Values, error) {
	vs := Values{path: path, m: make(map[string]Value, len(raw))}
	vs.names = slices.Sorted(maps.Keys(raw))
	for _, k := range vs.names {
		v, err := ParseJSON(raw[k], join(path, k))
		if err != nil {
			return Values{}, err
		}
		vs.m[k] = v
	}
	return vs, nil
}

// Names lists the entries' names in order.
func (vs Values) Names() []string { return vs.names }

// Len is the number of entries.
func (vs Values) Len() int { return len(vs.names) }

// Bind returns every entry's value for one call's run parameters; a
// parameter the run does not supply is refused with the entry's path.
func (vs Values) Bind(params map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(vs.names))
	for _, k := range vs.names {
		s, err := vs.m[k].Bind(params, join(vs.path, k))
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// Get returns the entry name.
func (vs Values) Get(name string) (Value, bool) {
	v, ok := vs.m[name]
	return v, ok
}
