package param

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/sdk/internal/typename"
	"github.com/verifierd/verifierd/sdk/refusal"
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
	// Template is non-empty for a {template: "text {name} text"}: literal
	// text composed with run parameters. Only a parser given Templates
	// reads one (ParseMap does; so does the judge's contract loader, which
	// expands it as plain text when it binds a contract).
	Template string
}

// IsParam reports whether v refers to a run parameter.
func (v Value) IsParam() bool { return v.Param != "" }

// IsTemplate reports whether v is a template.
func (v Value) IsTemplate() bool { return v.Template != "" }

// Params lists the run parameters v reads: the one it names, each
// placeholder of its template once, or none for a literal.
func (v Value) Params() []string {
	switch {
	case v.IsParam():
		return []string{v.Param}
	case v.IsTemplate():
		return Names(v.Template)
	}
	return nil
}

// Option adjusts how Parse words its refusals.
type Option func(*parser)

type parser struct {
	numberText func(string) string
	templates  bool
}

// Templates lets Parse read the fourth form, {template: "text {name}"}:
// literal text composed with run parameters (see BindIn, and Expand with
// Values.Source, for how each part is escaped where a read is built). A template that
// names no parameter, or whose braces do not each open or close a {name},
// is refused. Without this option a template is refused.
func Templates() Option {
	return func(p *parser) { p.templates = true }
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
// *refusal.Error whose Path is path or the offending key under it.
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
		if tmpl, ok := x["template"]; ok {
			if !p.templates {
				return Value{}, refuse(join(path, "template"), `a template composes a deployment's parameter value and is not allowed here; write {param: name} or a literal`)
			}
			s, isStr := tmpl.(string)
			if !isStr {
				return Value{}, refuse(join(path, "template"), `a template must be text with {name} placeholders, e.g. "Patient/{patient_id}", got %s`, Show(tmpl))
			}
			if err := CheckTemplate(s); err != nil {
				return Value{}, refuse(join(path, "template"), "%v", err)
			}
			return Value{Template: s}, nil
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
// its section. It accepts exactly what Parse accepts with the same
// options; a refusal names path itself and lists the forms, which reads
// better in a deployment section than the judge's detail (a template's own
// refusal, which says what is wrong with it, is kept).
func ParseJSON(raw json.RawMessage, path string, opts ...Option) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err == nil && !dec.More() {
		v, err := Parse(tree, path, opts...)
		if err == nil {
			return v, nil
		}
		if m, ok := tree.(map[string]any); ok && len(m) == 1 && m["template"] != nil {
			return Value{}, err
		}
	}
	return Value{}, &refusal.Error{Path: path, Message: `write a string, {literal: "text"} or {param: name}; numbers are written as strings ("42")`}
}

// Bind returns the literal, or the run parameter v names. A parameter the
// run does not supply is refused: a read must never go out with a hole
// where its subject belongs. A template is bound as data (BindIn with
// Check): each parameter is checked and substituted as it is, the literal
// text kept.
func (v Value) Bind(params map[string]string, path string) (string, error) {
	if v.IsTemplate() {
		return v.BindIn(params, path, Data)
	}
	if !v.IsParam() {
		return v.Literal, nil
	}
	s, ok := params[v.Param]
	if !ok {
		return "", missing(path, v.Param)
	}
	return s, nil
}

func missing(path, name string) *refusal.Error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf("the run has no parameter %q; pass it with the run (--param %s=VALUE) or write a literal", name, name)}
}

// BindIn binds v for a place whose escaping is escape (PathSegment,
// QueryValue, FileName, Data, or an adapter's own): a {param} value is
// escape(value); a template substitutes each {name} with escape(value) and
// keeps its literal text as written; a literal is returned as written. A
// parameter the run does not supply, or a value escape refuses, is an
// *refusal.Error at path naming the parameter.
func (v Value) BindIn(params map[string]string, path string, escape func(string) (string, error)) (string, error) {
	fill := func(name string) (string, error) {
		s, ok := params[name]
		if !ok {
			return "", missing(path, name)
		}
		e, err := escape(s)
		if err != nil {
			return "", &refusal.Error{Path: path, Message: fmt.Sprintf("run parameter %q %v", name, err)}
		}
		return e, nil
	}
	switch {
	case v.IsParam():
		return fill(v.Param)
	case !v.IsTemplate():
		return v.Literal, nil
	}
	return substitute(v.Template, fill)
}

// substitute replaces each placeholder of t with fill(name), keeping the
// text between them as written.
func substitute(t string, fill func(name string) (string, error)) (string, error) {
	var b strings.Builder
	last := 0
	for _, p := range Placeholders(t) {
		e, err := fill(p.Name)
		if err != nil {
			return "", err
		}
		b.WriteString(t[last:p.Start])
		b.WriteString(e)
		last = p.End
	}
	b.WriteString(t[last:])
	return b.String(), nil
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

func refuse(path, format string, args ...any) *refusal.Error {
	return &refusal.Error{Path: path, Message: fmt.Sprintf(format, args...)}
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
func TypeName(v any) string { return typename.Of(v) }

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
// refusal is stable. The map is a deployment's (path_params,
// sql_query_params, graphql_variables, search_param_exprs, url_params), so
// an entry may be a template.
func ParseMap(raw map[string]json.RawMessage, path string) (Values, error) {
	vs := Values{path: path, m: make(map[string]Value, len(raw))}
	vs.names = slices.Sorted(maps.Keys(raw))
	for _, k := range vs.names {
		v, err := ParseJSON(raw[k], join(path, k), Templates())
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

// BindWith is Bind with every run parameter's value, whether the entry
// names it or a template composes it, passed through escape (see BindIn).
// An adapter whose place has a rule of its own (a FHIR search value may
// not hold a comma) binds with it.
func (vs Values) BindWith(params map[string]string, escape func(string) (string, error)) (map[string]string, error) {
	out := make(map[string]string, len(vs.names))
	for _, k := range vs.names {
		s, err := vs.m[k].BindIn(params, join(vs.path, k), escape)
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
