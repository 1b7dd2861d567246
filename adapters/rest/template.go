package rest

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// pathTemplate is records_path: literal text with {name} placeholders
// (sdk/param's template grammar).
type pathTemplate struct {
	text  string
	names []string // each placeholder once, in order of appearance
}

// parseTemplate checks the literal text of records_path: it is the path and
// query of the read, starting with '/', URL-encoded except that a space may
// be written as itself (Frappe filters name doctypes with spaces), with no
// fragment.
func parseTemplate(s string) (*pathTemplate, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("must start with /, e.g. /api/resource/Encounter")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return nil, fmt.Errorf("byte %d is a control character; write it URL-encoded", i)
		}
	}
	s = strings.ReplaceAll(s, " ", "%20")
	if strings.Contains(s, "#") {
		return nil, fmt.Errorf("must not contain a fragment (#)")
	}
	return &pathTemplate{text: s, names: param.Names(s)}, nil
}

// expand fills every placeholder with param.Expand: a value in the path
// (before the first '?') is exactly one path segment, never empty, "." or
// "..", and never holding a '/' or '\', which would change which resource
// the path names; a value in the query is query-escaped, so it cannot add
// parameters of its own. Control characters are refused in both.
func (t *pathTemplate) expand(values map[string]string) (string, error) {
	for _, name := range t.names {
		if _, ok := values[name]; !ok {
			return "", fmt.Errorf("placeholder {%s} has no entry in path_params", name)
		}
	}
	return param.Expand(t.text, param.URL, param.Lookup(func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}))
}

// expandRecordsPath binds one call's run parameters into records_path
// (the template text, parseTemplate's). A placeholder before the first '?'
// fills exactly one path segment:
//
//   - a {param: name} entry: the value as param.PathSegment escapes it
//     ("", ".", ".." and any '/' or '\' refused, since a server may decode
//     %2F before routing);
//   - a literal or a template entry: its whole text, literal text
//     included, percent-escaped as one segment, so a space, '/', '?', '#'
//     or '%' the operator wrote stays inside the segment instead of being
//     sent raw or splitting the URL; each run parameter of a template is
//     still checked as a path-segment value.
//
// Placeholders in the query are filled by param.Expand from Values.Source,
// query-escaped; a space a template there writes as literal text is sent
// as %20, as a space written in records_path itself is (parseTemplate),
// never raw in the request line.
func expandRecordsPath(tmpl string, vs param.Values, params map[string]string) (string, error) {
	query := strings.IndexByte(tmpl, '?')
	if query < 0 {
		query = len(tmpl)
	}
	var b strings.Builder
	last := 0
	for _, p := range param.Placeholders(tmpl[:query]) {
		seg, err := pathSegment(p.Name, vs, params)
		if err != nil {
			return "", err
		}
		b.WriteString(tmpl[last:p.Start])
		b.WriteString(seg)
		last = p.End
	}
	b.WriteString(tmpl[last:])
	out, err := param.Expand(b.String(), param.URL, vs.Source(params))
	return strings.ReplaceAll(out, " ", "%20"), err
}

// pathSegment is the escaped path segment of the placeholder name.
func pathSegment(name string, vs param.Values, params map[string]string) (string, error) {
	v, ok := vs.Get(name)
	if !ok {
		return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} has no value", name)}
	}
	path := "path_params." + name
	if v.IsParam() {
		s, err := v.Bind(params, path)
		if err != nil {
			return "", err
		}
		seg, err := param.PathSegment(s)
		if err != nil {
			return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} in the path %v", name, err)}
		}
		return seg, nil
	}
	for _, pn := range v.Params() {
		if s, ok := params[pn]; ok {
			if _, err := param.PathSegment(s); err != nil {
				return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} in the path: run parameter %q %v", name, pn, err)}
			}
		}
	}
	text, err := v.BindIn(params, path, param.Data)
	if err != nil {
		return "", err
	}
	if err := param.Check(text); err != nil {
		return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} in the path %v", name, err)}
	}
	if text == "" || text == "." || text == ".." {
		return "", &refusal.Error{Message: fmt.Sprintf("placeholder {%s} in the path would be %q, which names another resource; write a real segment", name, text)}
	}
	return url.PathEscape(text), nil
}
