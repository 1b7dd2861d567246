package rest

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// placeholderRE is one {name} in records_path.
var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// pathTemplate is records_path: literal text with {name} placeholders.
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
	t := &pathTemplate{text: s}
	seen := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			t.names = append(t.names, m[1])
		}
	}
	return t, nil
}

// expand fills every placeholder. A value in the path (before the first
// '?') is path-escaped and may not be empty, "." or "..", which would change
// which resource the path names; a value in the query is query-escaped, so
// it cannot add parameters of its own.
func (t *pathTemplate) expand(values map[string]string) (string, error) {
	query := strings.IndexByte(t.text, '?')
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRE.FindAllStringSubmatchIndex(t.text, -1) {
		name := t.text[loc[2]:loc[3]]
		v, ok := values[name]
		if !ok {
			return "", fmt.Errorf("placeholder {%s} has no entry in path_params", name)
		}
		b.WriteString(t.text[last:loc[0]])
		if query < 0 || loc[0] < query {
			if v == "" || v == "." || v == ".." {
				return "", fmt.Errorf("placeholder {%s} in the path would be %q, which names another resource; bind it to a real identifier", name, v)
			}
			b.WriteString(url.PathEscape(v))
		} else {
			b.WriteString(url.QueryEscape(v))
		}
		last = loc[1]
	}
	b.WriteString(t.text[last:])
	return b.String(), nil
}
