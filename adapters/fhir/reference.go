package fhir

import (
	"net/url"
	"regexp"
	"strings"
)

// localReference is the relative form of a literal reference,
// [type]/[id] with an optional /_history/[version].
var localReference = regexp.MustCompile(`^[A-Z][A-Za-z]{1,63}/[A-Za-z0-9\-.]{1,64}(/_history/[A-Za-z0-9\-.]{1,64})?$`)

// relativeReferences rewrites, in place, every reference in res (the
// "reference" element of any Reference, at any depth) that points at the
// server's own base URL to its relative form: a save that spelt the
// patient http://emr.example/fhir/Patient/p1 reads as Patient/p1, the
// spelling a contract writes, so the judge sees the one record under
// either. A reference to another server, or one that is not [type]/[id]
// after the base, stays as it is.
func (s *settings) relativeReferences(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if ref, ok := e.(string); ok && k == "reference" {
				v[k] = s.relative(ref)
				continue
			}
			s.relativeReferences(e)
		}
	case []any:
		for _, e := range v {
			s.relativeReferences(e)
		}
	}
}

// relative is ref without the server's base when ref is an absolute URL
// of a resource on this server, ref itself otherwise.
func (s *settings) relative(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || !u.IsAbs() || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		!strings.EqualFold(u.Scheme, s.base.Scheme) || !sameHost(u, s.base) {
		return ref
	}
	rest, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimSuffix(s.base.EscapedPath(), "/")+"/")
	if !ok || !localReference.MatchString(rest) {
		return ref
	}
	return rest
}

// sameHost compares the hosts of two URLs of one scheme, case aside and
// the scheme's default port written or not.
func sameHost(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			return "443"
		case "http":
			return "80"
		}
		return ""
	}
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}
