package param

import (
	"encoding/json"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
)

// urlTemplates are the shapes a read URL takes: a path segment, a partial
// segment, a query value, a JSON filter inside a query value, a fragment.
var urlTemplates = []string{
	"/api/resource/Patient%20Encounter/{v}",
	"/api/{v}/encounters?limit=20",
	"/fhir/Observation/x-{v}.json",
	"/api?patient={v}&limit=20",
	`/api/resource/Encounter?filters=[["patient","=","{v}"]]&order_by=creation`,
	"https://app.example.org/patients/{v}/encounters?view={v}",
	"https://app.example.org/p#{v}",
}

// FuzzExpandURL: whatever a parameter holds, the expanded URL either is
// refused or has exactly the template's path segments and query keys, with
// the parameter's segment and query value reading back as the value.
func FuzzExpandURL(f *testing.F) {
	for _, s := range []string{"p1", "../admin", "p1/../../x", "p1&limit=999", "..", "", "a%2Fb", "?x=1", "#f", "a\x00", "%", "ç /?", `\`} {
		for i := range urlTemplates {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, v string) {
		tmpl := urlTemplates[int(which)%len(urlTemplates)]
		got, err := Expand(tmpl, URL, Lookup(func(string) (string, bool) { return v, true }))
		if err != nil {
			return
		}
		want := reference(t, tmpl)
		u, err := url.Parse(absolute(got))
		if err != nil {
			t.Fatalf("%q expanded to %q, not a URL: %v", v, got, err)
		}
		if u.Host != want.Host {
			t.Fatalf("%q moved the read to host %q", v, u.Host)
		}
		gotSegs, wantSegs := strings.Split(u.EscapedPath(), "/"), strings.Split(want.EscapedPath(), "/")
		if len(gotSegs) != len(wantSegs) {
			t.Fatalf("%q gave %d path segments (%q), the template has %d", v, len(gotSegs), u.EscapedPath(), len(wantSegs))
		}
		for i, seg := range wantSegs {
			if !strings.Contains(seg, "PLACEHOLDER") {
				if gotSegs[i] != seg {
					t.Fatalf("%q changed segment %d from %q to %q", v, i, seg, gotSegs[i])
				}
				continue
			}
			un, err := url.PathUnescape(gotSegs[i])
			wantText, _ := url.PathUnescape(strings.ReplaceAll(seg, "PLACEHOLDER", url.PathEscape(v)))
			if err != nil || un != wantText {
				t.Fatalf("%q: segment %d reads back as %q, want %q", v, i, un, wantText)
			}
		}
		gotQ, wantQ := u.Query(), want.Query()
		if !slices.Equal(slices.Sorted(maps.Keys(gotQ)), slices.Sorted(maps.Keys(wantQ))) {
			t.Fatalf("%q changed the query keys from %v to %v", v, slices.Sorted(maps.Keys(wantQ)), slices.Sorted(maps.Keys(gotQ)))
		}
		for k, vals := range wantQ {
			if len(gotQ[k]) != len(vals) {
				t.Fatalf("%q repeated query key %q", v, k)
			}
			for i, w := range vals {
				if w = strings.ReplaceAll(w, "PLACEHOLDER", v); gotQ[k][i] != w {
					t.Fatalf("%q: query %s reads back as %q, want %q", v, k, gotQ[k][i], w)
				}
			}
		}
		if strings.Contains(tmpl, "#") && u.Fragment != strings.ReplaceAll(want.Fragment, "PLACEHOLDER", strings.ReplaceAll(v, " ", "+")) {
			// QueryEscape writes a space as '+', which a fragment keeps.
			t.Fatalf("%q: fragment reads back as %q", v, u.Fragment)
		}
	})
}

func reference(t *testing.T, tmpl string) *url.URL {
	t.Helper()
	s, err := Expand(tmpl, URL, Lookup(func(string) (string, bool) { return "PLACEHOLDER", true }))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(absolute(s))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func absolute(s string) string {
	if strings.HasPrefix(s, "/") {
		return "https://h.example" + s
	}
	return s
}

// FuzzFileName: a value substituted into a file name never holds a
// separator and, as a glob, matches only itself.
func FuzzFileName(f *testing.F) {
	for _, s := range []string{"note.txt", "*", "../x", "..", "a[0-9]", `\`, "?", "a*b", "", "a\x00", "[", "]", "ç"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := FileName(v)
		if err != nil {
			return
		}
		if strings.ContainsAny(v, "/\\") || v == "." || v == ".." || v == "" {
			t.Fatalf("FileName(%q) = %q; want a refusal", v, got)
		}
		if ok, err := path.Match(got, v); !ok || err != nil {
			t.Fatalf("FileName(%q) = %q does not match the value itself (%v)", v, got, err)
		}
		for _, other := range []string{v + "x", "x" + v, "a", "", strings.ReplaceAll(v, "*", "xx"), strings.ReplaceAll(v, "?", "x")} {
			if other == v {
				continue
			}
			if ok, _ := path.Match(got, other); ok {
				t.Fatalf("FileName(%q) = %q also matches %q", v, got, other)
			}
		}
		expanded, err := Expand("/data/{v}/*.pdf", FilePattern, Lookup(func(string) (string, bool) { return v, true }))
		if err != nil {
			t.Fatalf("Expand refused %q that FileName accepted: %v", v, err)
		}
		if strings.Count(expanded, "/") != 3 {
			t.Fatalf("%q changed the pattern's directories: %q", v, expanded)
		}
	})
}

// FuzzParseValue: ParseJSON accepts exactly what Parse accepts on the same
// JSON, never panics, and a literal reads back as written.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{`"x"`, `{"literal":"y"}`, `{"param":"p"}`, `{"param":""}`, `5`, `null`, `[]`, `{}`, `{"literal":1}`, `{"param":"p","x":1}`, `{"foo":"x"}`, `"\u0000"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := ParseJSON(raw, "k")
		var tree any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		decodeErr := dec.Decode(&tree)
		if decodeErr != nil || dec.More() {
			if err == nil {
				t.Fatalf("ParseJSON accepted %q, which is not one JSON value", raw)
			}
			return
		}
		tv, terr := Parse(tree, "k")
		if (err == nil) != (terr == nil) || (err == nil && tv != v) {
			t.Fatalf("%q: ParseJSON = %+v, %v; Parse = %+v, %v", raw, v, err, tv, terr)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "k") {
				t.Fatalf("%q: refusal %q does not name the path", raw, err)
			}
			return
		}
		if s, ok := tree.(string); ok && (v.Literal != s || v.IsParam()) {
			t.Fatalf("%q: literal read as %+v", raw, v)
		}
		got, err := v.Bind(map[string]string{v.Param: "bound"}, "k")
		if err != nil || (v.IsParam() && got != "bound") || (!v.IsParam() && got != v.Literal) {
			t.Fatalf("%q: Bind = %q, %v", raw, got, err)
		}
	})
}
