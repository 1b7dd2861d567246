package rest

import (
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/sdk/param"
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
	return param.Expand(t.text, param.URL, func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	})
}
