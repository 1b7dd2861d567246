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

// Expand fills each {name} of template with lookup(name), escaped for the
// place it stands in (see the package documentation). The *Error it
// returns names the placeholder and has no Path; the caller sets it.
func Expand(template string, syntax Syntax, lookup func(name string) (string, bool)) (string, error) {
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
		v, ok := lookup(p.Name)
		if !ok {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} has no value", p.Name)}
		}
		var (
			escaped, where string
			err            error
		)
		switch {
		case syntax == FilePattern:
			escaped, err = FileName(v)
			where = "in the file pattern"
		case p.Start < query:
			escaped, err = PathSegment(v)
			where = "in the path"
		default:
			escaped, err = QueryValue(v)
			where = "in the query"
		}
		if err != nil {
			return "", &Error{Message: fmt.Sprintf("placeholder {%s} %s %v", p.Name, where, err)}
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
