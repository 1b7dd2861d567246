package cdpguard

import (
	"strings"
	"testing"
)

func TestRefusalsSummary(t *testing.T) {
	t.Parallel()
	var rs Refusals
	if got := rs.Summary(); got != "" {
		t.Fatalf("no refusals: %q", got)
	}
	first := Refusal{Layer: "page guard", How: "form", Method: "POST", Target: "http://127.0.0.1/save"}
	rs.Add(first)
	if got, want := rs.Summary(), "POST http://127.0.0.1/save via form, refused by the page guard"; got != want {
		t.Fatalf("one refusal: %q, want %q", got, want)
	}
	rs.Add(Refusal{Layer: "network guard", How: "fetch", Method: "DELETE"})
	rs.Add(Refusal{Layer: "network guard", How: "xhr", Method: "PUT"})
	if got, want := rs.Summary(), first.String()+" (and 2 more)"; got != want {
		t.Fatalf("three refusals: %q, want %q", got, want)
	}
}

// TestPageGuardNoAllowedPosts: with no POST allowed the script gets an
// empty list, never JSON null, on which it stopped before guarding
// anything.
func TestPageGuardNoAllowedPosts(t *testing.T) {
	t.Parallel()
	for _, allowed := range [][]string{nil, {}} {
		js := PageGuardJS("b", allowed)
		if !strings.HasSuffix(js, `)("b",[]);`) {
			t.Errorf("PageGuardJS(%#v) ends %q; want an empty list passed", allowed, js[len(js)-20:])
		}
	}
}
