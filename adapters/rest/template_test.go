package rest

import (
	"net/url"
	"testing"
)

func TestTemplateEscaping(t *testing.T) {
	t.Parallel()
	tmpl, err := parseTemplate(`/api/resource/Patient Encounter/{name}?filters=[["patient","=","{patient}"]]&x={name}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.expand(map[string]string{"name": "a/b c", "patient": `P 1&limit_page_length=0`})
	if err != nil {
		t.Fatal(err)
	}
	want := `/api/resource/Patient%20Encounter/a%2Fb%20c?filters=[["patient","=","P+1%26limit_page_length%3D0"]]&x=a%2Fb+c`
	if got != want {
		t.Errorf("expand =\n%s\nwant\n%s", got, want)
	}
	u, err := url.Parse("https://h" + got)
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); len(q) != 2 || q.Get("x") != "a/b c" {
		t.Errorf("query %v: a value added parameters of its own", q)
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
