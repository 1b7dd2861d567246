package cdpguard

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
)

func paused(id, method, rawURL string) *fetch.EventRequestPaused {
	return &fetch.EventRequestPaused{RequestID: fetch.RequestID(id), ResourceType: network.ResourceTypeXHR,
		Request: &network.Request{Method: method, URL: rawURL}}
}

// TestNetworkDecides shows the guard's decisions before any answer: a
// refused request is recorded, an allowed one is not, and with a limit an
// allowed request beyond the waiting decisions is refused too.
func TestNetworkDecides(t *testing.T) {
	var refused Refusals
	n := NewNetwork(&refused, func(method, _ string) bool { return IsRead(method) }, 2)
	n.Paused(paused("1", "GET", "http://127.0.0.1/a?x=1"))
	if got := refused.Summary(); got != "" {
		t.Fatalf("a GET was refused: %s", got)
	}
	n.Paused(paused("2", "post", "http://127.0.0.1/save"))
	if got := refused.Snapshot(); len(got) != 1 || got[0].Method != "POST" || got[0].How != "xhr request" || got[0].Target != "http://127.0.0.1/save" {
		t.Fatalf("refusals after a POST = %+v", got)
	}
	n.Paused(paused("3", "GET", "http://127.0.0.1/b"))
	got := refused.Snapshot()
	if len(got) != 2 || !strings.Contains(got[1].How, "beyond the guard's queue") {
		t.Fatalf("refusals after a GET beyond the limit = %+v", got)
	}
	if len(n.waiting) != 2 || !n.waiting[0].allow || n.waiting[1].allow {
		t.Errorf("waiting decisions = %+v; want the GET allowed and the POST refused", n.waiting)
	}

	var none Refusals
	unbounded := NewNetwork(&none, func(string, string) bool { return true }, 0)
	for range 5000 {
		unbounded.Paused(paused("x", "GET", "http://127.0.0.1/"))
	}
	if len(unbounded.waiting) != 5000 || none.Summary() != "" {
		t.Errorf("an unbounded guard holds %d decisions and refused %q", len(unbounded.waiting), none.Summary())
	}
}
