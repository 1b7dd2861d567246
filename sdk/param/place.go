package param

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// Check refuses a value that holds invalid UTF-8, NUL or any other control
// character. It is the whole treatment of a value passed as data (a GraphQL
// variable, a plugin option) and the first step of every other place.
func Check(v string) error {
	for i, r := range v {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(v[i:]); size <= 1 {
				return fmt.Errorf("is not valid UTF-8 (byte %d)", i)
			}
		}
		if unicode.IsControl(r) {
			return fmt.Errorf("holds a control character (%U at byte %d); a run parameter may not carry NUL, line breaks or other control characters", r, i)
		}
	}
	return nil
}

// Data is the place of a value passed as data (a SQL bind argument, a
// GraphQL variable, a plugin option): v is checked (Check) and used as it
// is.
func Data(v string) (string, error) {
	if err := Check(v); err != nil {
		return "", err
	}
	return v, nil
}

// PathSegment escapes v to stand as exactly one URL path segment, refusing
// a value that would name another resource ("", ".", "..") or that holds
// a path separator.
func PathSegment(v string) (string, error) {
	if err := Check(v); err != nil {
		return "", err
	}
	if v == "" || v == "." || v == ".." {
		return "", fmt.Errorf("would be %q, which names another resource; bind it to a real identifier", v)
	}
	if strings.ContainsAny(v, `/\`) {
		return "", fmt.Errorf("holds a path separator (%q); a value fills exactly one path segment", v)
	}
	return url.PathEscape(v), nil
}

// QueryValue escapes v to stand as one URL query value (or in a fragment),
// so that it cannot add or change parameters.
func QueryValue(v string) (string, error) {
	if err := Check(v); err != nil {
		return "", err
	}
	return url.QueryEscape(v), nil
}

// FileName escapes v to stand as one file name, or inside one segment of a
// path.Match glob pattern, where it matches only itself: the
// metacharacters * ? [ ] are escaped with a backslash. It refuses "", ".",
// ".." and any '/' or '\', which would leave the directory.
func FileName(v string) (string, error) {
	if err := Check(v); err != nil {
		return "", err
	}
	if v == "" || v == "." || v == ".." {
		return "", fmt.Errorf("would be %q, which names another directory; bind it to a real name", v)
	}
	if strings.ContainsAny(v, `/\`) {
		return "", fmt.Errorf("holds a path separator (%q); a value fills exactly one file name", v)
	}
	var b strings.Builder
	for _, r := range v {
		switch r {
		case '*', '?', '[', ']':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), nil
}

// Place is where a template's placeholders stand, which decides how each
// value is escaped: URL and FilePattern are the places this package knows;
// an adapter declares a place of its own (an LDAP filter or DN, a query
// language, a command's argument) with Where and Escape. Give it to Expand
// for a whole template, or its Bind to Value.BindIn and Values.BindWith
// for one value.
//
// Escape is the whole of an adapter's place's rule, a pure function of the
// value, so it can be fuzzed on its own (see the package's FuzzOwnPlace):
// for any value it either refuses it or returns text that, in the place,
// stands for exactly that value and nothing more (no wildcard, no
// operator, no second clause).
type Place struct {
	// Where names the place in a refusal: "in the LDAP filter".
	Where string
	// Escape writes v so that it stands in the place as itself, or says
	// why v cannot stand there ("holds a NUL" is never one of its
	// reasons: Bind has refused control characters and invalid UTF-8
	// before Escape sees v).
	Escape func(v string) (string, error)

	url bool // URL: the place of each placeholder is where it stands
}

var (
	// URL is a URL, or the path and query of one: placeholders before the
	// first '?' or '#' are path segments (PathSegment), after it query
	// values (QueryValue). A placeholder may not stand in the scheme or
	// host. Its Bind refuses every value: one value's place in a URL is
	// PathSegment's or QueryValue's.
	URL = Place{Where: "in the URL", url: true}
	// FilePattern is a file path or glob pattern: every placeholder is a
	// file name (FileName).
	FilePattern = Place{Where: "in the file pattern", Escape: FileName}
)

// Bind checks v (Check) and escapes it for p. A Place without an Escape
// refuses every value.
func (p Place) Bind(v string) (string, error) {
	if err := Check(v); err != nil {
		return "", err
	}
	if p.Escape == nil {
		return "", fmt.Errorf("has no place to stand %s (the Place has no Escape)", p.Where)
	}
	return p.Escape(v)
}

// placer is the placer of template in p.
func (p Place) placer(template string) placer {
	if p.url {
		return urlPlaces(template)
	}
	return func(Placeholder) (func(string) (string, error), string, error) {
		return p.Bind, p.Where, nil
	}
}

// Placeholder is one {name} of a template.
type Placeholder struct {
	Name       string
	Start, End int // byte offsets of "{" and just after "}"
}

// Placeholders returns every {name} of template in order; a name used twice
// appears twice.
func Placeholders(template string) []Placeholder {
	var out []Placeholder
	for i := 0; i < len(template); i++ {
		if template[i] != '{' {
			continue
		}
		j := i + 1
		for j < len(template) && isNameByte(template[j], j == i+1) {
			j++
		}
		if j > i+1 && j < len(template) && template[j] == '}' {
			out = append(out, Placeholder{Name: template[i+1 : j], Start: i, End: j + 1})
			i = j
		}
	}
	return out
}

// Names returns the placeholder names of template, each once, in order of
// first appearance.
func Names(template string) []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range Placeholders(template) {
		if !seen[p.Name] {
			seen[p.Name] = true
			names = append(names, p.Name)
		}
	}
	return names
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case first:
		return false
	}
	return c >= '0' && c <= '9' || c == '.' || c == '-'
}

// CheckTemplate refuses a value template ({template: ...}) that names no
// run parameter, or holds a brace that does not open or close a {name}
// placeholder (a placeholder name is a letter or '_' followed by letters,
// digits, '_', '.' or '-'). A template has no literal braces: text with a
// brace of its own is written as a literal, not a template.
func CheckTemplate(t string) error {
	ps := Placeholders(t)
	at := 0
	for _, p := range append(ps, Placeholder{Start: len(t), End: len(t)}) {
		if i := strings.IndexAny(t[at:p.Start], "{}"); i >= 0 {
			return fmt.Errorf("the brace at byte %d of %q opens or closes no {name} placeholder; braces must be balanced around a parameter name", at+i, t)
		}
		at = p.End
	}
	if len(ps) == 0 {
		return fmt.Errorf("%q names no run parameter; write {name} where the parameter goes, or write the text as a literal", t)
	}
	return nil
}

// Source gives each placeholder of a template its value: Lookup (a value
// per name) or Values.Source (deployment values bound to the run's
// parameters).
type Source struct {
	fill filler
}

// Expand fills each {name} of template with its value from from, escaped
// for the place it stands in (see the package documentation): in a URL,
// the path or the query, as where it stands says; in a file pattern, a
// file name; in a Place of the adapter's own, that place (Place.Bind).
// The *refusal.Error it returns for a value refused for its place names
// the placeholder and has no Path (the caller sets it); a {param} the run
// does not supply, through Values.Source, has the entry's path.
func Expand(template string, in Place, from Source) (string, error) {
	if from.fill == nil {
		return "", &refusal.Error{Message: "no source of values for the template's placeholders"}
	}
	return expand(template, in.placer(template), from.fill)
}

// Lookup is the Source that fills the placeholder name with lookup(name);
// a name it does not know is refused.
func Lookup(lookup func(name string) (string, bool)) Source {
	return Source{fill: func(name, where string, escape func(string) (string, error)) (string, error) {
		v, ok := lookup(name)
		if !ok {
			return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} has no value", name)}
		}
		e, err := escape(v)
		if err != nil {
			return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} %s %v", name, where, err)}
		}
		return e, nil
	}}
}

// Source is the Source that fills each placeholder from vs bound to
// params: a {param} or literal entry is escaped for the placeholder's
// place; a template entry is bound with each of its own parameters escaped
// for that place and its literal text kept as written, so
// {template: "Patient/{id}"} in the query is "Patient/" followed by the
// query-escaped id. A parameter the run does not supply is a
// *refusal.Error with the entry's path; a value refused for its place,
// one without a Path.
func (vs Values) Source(params map[string]string) Source {
	return Source{fill: func(name, where string, escape func(string) (string, error)) (string, error) {
		v, ok := vs.Get(name)
		if !ok {
			return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} has no value", name)}
		}
		if !v.IsTemplate() {
			s, err := v.Bind(params, join(vs.path, name))
			if err != nil {
				return "", err
			}
			e, err := escape(s)
			if err != nil {
				return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} %s %v", name, where, err)}
			}
			return e, nil
		}
		return substitute(v.Template, func(p string) (string, error) {
			s, ok := params[p]
			if !ok {
				return "", missing(join(vs.path, name), p)
			}
			e, err := escape(s)
			if err != nil {
				return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} %s: run parameter %q %v", name, where, p, err)}
			}
			return e, nil
		})
	}}
}

// A filler fills the placeholder name, where escape is the escaping of the
// place it stands in and where says that place for a message.
type filler func(name, where string, escape func(string) (string, error)) (string, error)

// A placer says the place of one placeholder: its escaping and its name
// for a message, or why nothing may stand there.
type placer func(p Placeholder) (escape func(string) (string, error), where string, err error)

// urlPlaces is the placer of a URL template.
func urlPlaces(template string) placer {
	query, authority := len(template), authorityEnd(template)
	if i := strings.IndexAny(template, "?#"); i >= 0 {
		query = i
	}
	return func(p Placeholder) (func(string) (string, error), string, error) {
		switch {
		case p.Start < authority:
			return nil, "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} stands in the scheme or host; a parameter may only fill the path or query", p.Name)}
		case p.Start < query:
			return PathSegment, "in the path", nil
		}
		return QueryValue, "in the query", nil
	}
}

// expand fills each placeholder of template with fill, given the place
// place says it stands in.
func expand(template string, place placer, fill filler) (string, error) {
	var b strings.Builder
	last := 0
	for _, p := range Placeholders(template) {
		escape, where, err := place(p)
		if err != nil {
			return "", err
		}
		escaped, err := fill(p.Name, where, escape)
		if err != nil {
			return "", err
		}
		b.WriteString(template[last:p.Start])
		b.WriteString(escaped)
		last = p.End
	}
	b.WriteString(template[last:])
	return b.String(), nil
}

// authorityEnd is the offset just past the scheme and host of an absolute
// URL template ("scheme://host"), or 0 when the template has none.
func authorityEnd(t string) int {
	i := strings.Index(t, "://")
	if i <= 0 || strings.ContainsAny(t[:i], "/?#") {
		return 0
	}
	end := i + 3
	if j := strings.IndexAny(t[end:], "/?#"); j >= 0 {
		return end + j
	}
	return len(t)
}
