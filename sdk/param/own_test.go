package param_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// ldapFilter is an LDAP adapter's own place: an assertion value in a
// search filter (RFC 4515), where '*', '(', ')', '\' and NUL are written
// as \2a, \28, \29, \5c and \00.
var ldapFilter = param.Place{Where: "in the LDAP filter", Escape: func(v string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '*', '(', ')', '\\', 0:
			fmt.Fprintf(&b, `\%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}}

// unescapeFilter reads an assertion value back, or fails on a bare
// metacharacter.
func unescapeFilter(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '(', ')':
			return "", fmt.Errorf("bare %q at byte %d", c, i)
		case '\\':
			if i+3 > len(s) {
				return "", fmt.Errorf("short escape at byte %d", i)
			}
			var x byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &x); err != nil {
				return "", err
			}
			b.WriteByte(x)
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

const filterTemplate = "(&(objectClass=person)(uid={uid}))"

func TestExpandOwnPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
	}{
		{"jdoe", "(&(objectClass=person)(uid=jdoe))"},
		{"*", `(&(objectClass=person)(uid=\2a))`},
		{"*)(uid=*", `(&(objectClass=person)(uid=\2a\29\28uid=\2a))`},
		{`a\b`, `(&(objectClass=person)(uid=a\5cb))`},
		{"", "(&(objectClass=person)(uid=))"},
	} {
		got, err := param.Expand(filterTemplate, ldapFilter, param.Lookup(func(string) (string, bool) { return tc.in, true }))
		if err != nil || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// Control characters are refused before the adapter's escaper runs.
	_, err := param.Expand(filterTemplate, ldapFilter, param.Lookup(func(string) (string, bool) { return "a\x00b", true }))
	if err == nil || !strings.Contains(err.Error(), "in the LDAP filter") {
		t.Errorf("a NUL: %v; want a refusal naming the place", err)
	}
	// A missing value is refused, never an empty assertion.
	if _, err := param.Expand(filterTemplate, ldapFilter, param.Lookup(func(string) (string, bool) { return "", false })); err == nil {
		t.Error("a missing value was expanded")
	}
	// A place whose escaper refuses a value says so with its Where.
	dn := param.Place{Where: "in the DN", Escape: func(v string) (string, error) {
		if v == "" || strings.ContainsAny(v, `,+"\<>;=#`) {
			return "", errors.New("holds a DN metacharacter; an identifier here is letters, digits and '-'")
		}
		return v, nil
	}}
	_, err = param.Expand("uid={uid},ou=people,dc=example,dc=org", dn, param.Lookup(func(string) (string, bool) { return "x,ou=admins", true }))
	var perr *refusal.Error
	if !errors.As(err, &perr) || !strings.Contains(perr.Message, "{uid} in the DN holds a DN metacharacter") {
		t.Errorf("a DN value with a comma: %v", err)
	}
	if _, err := (param.Place{Where: "nowhere"}).Bind("x"); err == nil {
		t.Error("a Place without Escape accepted a value")
	}
}

// TestBindInOwnPlace: the same place binds a deployment value (a param
// or a template) through Value.BindIn and a map through Expand with Values.Source.
func TestBindInOwnPlace(t *testing.T) {
	t.Parallel()
	v, err := param.Parse(map[string]any{"template": "{first}*"}, "options.prefix", param.Templates())
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.BindIn(map[string]string{"first": "a*b"}, "options.prefix", ldapFilter.Bind)
	if err != nil || got != `a\2ab*` {
		t.Errorf("BindIn = %q, %v; want the template's own * kept and the value's escaped", got, err)
	}
	vs, err := param.ParseMap(map[string]json.RawMessage{"uid": json.RawMessage(`{"param":"user"}`)}, "filter_params")
	if err != nil {
		t.Fatal(err)
	}
	got, err = param.Expand(filterTemplate, ldapFilter, vs.Source(map[string]string{"user": "*"}))
	if err != nil || got != `(&(objectClass=person)(uid=\2a))` {
		t.Errorf("Expand(vs.Source) = %q, %v", got, err)
	}
	_, err = param.Expand(filterTemplate, ldapFilter, vs.Source(nil))
	var perr *refusal.Error
	if !errors.As(err, &perr) || perr.Path != "filter_params.uid" {
		t.Errorf("Expand(vs.Source) without the parameter = %v; want a refusal at filter_params.uid", err)
	}
}

// FuzzOwnPlace: whatever the value, Expand with the LDAP filter place
// either refuses it or yields the template's structure with the value
// reading back as itself: a value never adds a clause or a wildcard.
func FuzzOwnPlace(f *testing.F) {
	for _, s := range []string{"jdoe", "*", "*)(uid=*", ")(|(objectClass=*)", `\2a`, "", "é", "a\x00"} {
		f.Add(s)
	}
	prefix, suffix := "(&(objectClass=person)(uid=", "))"
	f.Fuzz(func(t *testing.T, v string) {
		got, err := param.Expand(filterTemplate, ldapFilter, param.Lookup(func(string) (string, bool) { return v, true }))
		if err != nil {
			return
		}
		if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) {
			t.Fatalf("%q changed the filter's frame: %q", v, got)
		}
		back, err := unescapeFilter(got[len(prefix) : len(got)-len(suffix)])
		if err != nil || back != v {
			t.Fatalf("%q stands in the filter as %q, which reads back as %q (%v)", v, got, back, err)
		}
	})
}
