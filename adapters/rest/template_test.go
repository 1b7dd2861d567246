package rest

import (
	"net/url"
	"strings"
	"testing"
)

func TestTemplateEscaping(t *testing.T) {
	t.Parallel()
	tmpl, err := parseTemplate(`/api/resource/Patient Encounter/{name}?filters=[["patient","=","{patient}"]]&x={name}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.expand(map[string]string{"name": "a;b c", "patient": `P 1&limit_page_length=0`})
	if err != nil {
		t.Fatal(err)
	}
	want := `/api/resource/Patient%20Encounter/a%3Bb%20c?filters=[["patient","=","P+1%26limit_page_length%3D0"]]&x=a%3Bb+c`
	if got != want {
		t.Errorf("expand =\n%s\nwant\n%s", got, want)
	}
	u, err := url.Parse("https://h" + got)
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); len(q) != 2 || q.Get("x") != "a;b c" {
		t.Errorf("query %v: a value added parameters of its own", q)
	}
}

// TestTemplateRefusesSeparators: a value fills one path segment; a '/' or
// '\' in it is refused, even though it could be escaped, because servers
// and proxies that decode %2F before routing would climb out of it.
func TestTemplateRefusesSeparators(t *testing.T) {
	t.Parallel()
	tmpl, err := parseTemplate(`/api/resource/Patient%20Encounter/{name}?x={q}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a/b", "../admin", `a\b`} {
		if got, err := tmpl.expand(map[string]string{"name": v, "q": "x"}); err == nil || !strings.Contains(err.Error(), "path separator") {
			t.Errorf("expand(%q) = %q, %v; want a refusal", v, got, err)
		}
	}
	if got, err := tmpl.expand(map[string]string{"name": "n", "q": "a/b"}); err != nil || got != "/api/resource/Patient%20Encounter/n?x=a%2Fb" {
		t.Errorf("a '/' in the query: %q, %v", got, err)
	}
}

func TestWithQueryKeepsTheRest(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(`https://h/api?fields=["*"]&limit_page_length=20&limit_start=5`)
	got := withQuery(u, map[string]string{"limit_start": "40", "limit_page_length": "20"})
	if want := `fields=["*"]&limit_page_length=20&limit_start=40`; got.RawQuery != want {
		t.Errorf("RawQuery = %s, want %s", got.RawQuery, want)
	}
}
