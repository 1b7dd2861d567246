package cdpguard

import "testing"

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
