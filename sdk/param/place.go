package param

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
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

// Syntax is what a template is, which decides the place of each of its
// placeholders.
type Syntax int

const (
	// URL is a URL, or the path and query of one: placeholders before the
	// first '?' or '#' are path segments, after it query values. A
	// placeholder may not stand in the scheme or host.
	URL Syntax = iota + 1
	// FilePattern is a file path or glob pattern: every placeholder is a
	// file name.
	FilePattern
)

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

// ExpandValues is Expand with each placeholder filled from vs bound to
// params: a {param} or literal entry is escaped for the placeholder's place
// as Expand escapes it; a template entry is bound with each of its own
// parameters escaped for that place and its literal text kept as written,
// so {template: "Patient/{id}"} in the query is "Patient/" followed by the
// query-escaped id. A parameter the run does not supply is an *Error with
// the entry's path; a value refused for its place, one without a Path.
func ExpandValues(template string, syntax Syntax, vs Values, params map[string]string) (string, error) {
	return expand(template, syntax, func(name, where string, escape func(string) (string, error)) (string, error) {
		v, ok := vs.Get(name)
		if !ok {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} has no value", name)}
		}
		if !v.IsTemplate() {
			s, err := v.Bind(params, join(vs.path, name))
			if err != nil {
				return "", err
			}
			e, err := escape(s)
			if err != nil {
				return "", &Error{Message: fmt.Sprintf("placeholder {%s} %s %v", name, where, err)}
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
				return "", &Error{Message: fmt.Sprintf("placeholder {%s} %s: run parameter %q %v", name, where, p, err)}
			}
			return e, nil
		})
	})
}

// Expand fills each {name} of template with lookup(name), escaped for the
// place it stands in (see the package documentation). The *Error it
// returns names the placeholder and has no Path; the caller sets it.
func Expand(template string, syntax Syntax, lookup func(name string) (string, bool)) (string, error) {
	return expand(template, syntax, func(name, where string, escape func(string) (string, error)) (string, error) {
		v, ok := lookup(name)
		if !ok {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} has no value", name)}
		}
		e, err := escape(v)
		if err != nil {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} %s %v", name, where, err)}
		}
		return e, nil
	})
}

// expand fills each placeholder of template with fill(name, where, escape),
// where escape is the escaping of the place the placeholder stands in and
// where says that place for a message.
func expand(template string, syntax Syntax, fill func(name, where string, escape func(string) (string, error)) (string, error)) (string, error) {
	query, authority := len(template), 0
	if syntax == URL {
		if i := strings.IndexAny(template, "?#"); i >= 0 {
			query = i
		}
		authority = authorityEnd(template)
	}
	var b strings.Builder
	last := 0
	for _, p := range Placeholders(template) {
		if p.Start < authority {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} stands in the scheme or host; a parameter may only fill the path or query", p.Name)}
		}
		var (
			escape func(string) (string, error)
			where  string
		)
		switch {
		case syntax == FilePattern:
			escape, where = FileName, "in the file pattern"
		case p.Start < query:
			escape, where = PathSegment, "in the path"
		default:
			escape, where = QueryValue, "in the query"
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
