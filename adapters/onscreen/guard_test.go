package onscreen

import (
	"strings"
	"testing"
	"time"
)

// TestRenavigationNeverWrites: a re-navigation whose click would submit a
// form with POST, or post with fetch, is stopped by the read-only guards
// before the request leaves the browser; the read is unusable
// (INDETERMINATE), never a pass, and the application receives nothing.
func TestRenavigationNeverWrites(t *testing.T) {
	for _, button := range []string{"#send", "#fetch"} {
		t.Run(button, func(t *testing.T) {
			a := startApp(t)
			rec := typed("g-1")
			sec := a.reopenSection()
			inner(sec)["renavigate"] = []any{
				map[string]any{"open": a.URL + "/postform"},
				map[string]any{"click": button},
				map[string]any{"wait": map[string]any{"selector": "#record"}},
			}
			inner(sec)["navigation_timeout_s"] = 2
			c := client(t, request(t, sec, params(rec)))
			got := capture(t, c, true)
			if got.Reachable {
				t.Fatalf("a re-navigation that posts read as reachable: %+v", got)
			}
			if !strings.Contains(got.Reason, "non-read request") || !strings.Contains(got.Reason, "POST") {
				t.Errorf("reason %q; want the refused POST named", got.Reason)
			}
			// The page guard stops it first, in the page: the network guard
			// is the second layer, not the only one. (Until the page guard
			// script stopped failing on an empty list of allowed POSTs, every
			// refusal here came from the network guard.)
			if !strings.Contains(got.Reason, "refused by the page guard") {
				t.Errorf("reason %q; want the refusal from the page guard", got.Reason)
			}
			time.Sleep(200 * time.Millisecond)
			if n := a.Posts(); n != 0 {
				t.Errorf("the application received %d POST(s); the guards must stop them in the browser", n)
			}
		})
	}
}

// TestSearchRenavigation: a re-navigation that types this run's value into
// a search box, submits the search (a GET form, which the guards allow) and
// follows the hit re-opens the record like a URL does.
func TestSearchRenavigation(t *testing.T) {
	a := startApp(t)
	rec := typed("s-1")
	sec := a.reopenSection()
	inner(sec)["renavigate"] = []any{
		map[string]any{"open": a.URL + "/search"},
		map[string]any{"type": map[string]any{"selector": "#q", "param": "name"}},
		map[string]any{"click": "#go"},
		map[string]any{"wait": map[string]any{"selector": "a.hit"}},
		map[string]any{"click": "a.hit"},
		map[string]any{"wait": map[string]any{"selector": "#record"}},
	}
	c := client(t, request(t, sec, params(rec)))
	a.fill(t, rec)
	got := capture(t, c, true)
	if !got.Reachable || len(got.Records) != 1 {
		t.Fatalf("read %+v; want the one record", got)
	}
	r := got.Records[0]
	if r["id"] != "/records/"+rec.Ref || r["name"] != rec.Name || r["amount"] != rec.Amount {
		t.Errorf("record %v; want id /records/%s with the typed values", r, rec.Ref)
	}
	if n := a.Posts(); n != 1 {
		t.Errorf("the application received %d POSTs; want the automation's one save", n)
	}
}

// TestPreflight: the tier-4 preflight finds the application's tab without
// reading the fields (before the save the screen shows the form); a wrong
// address or prefix is unreachable, never an error.
func TestPreflight(t *testing.T) {
	a := startApp(t)
	rec := typed("p-1")
	c := client(t, request(t, a.sameSurfaceSection(), params(rec)))
	res, err := c.TestConnection(t.Context())
	if err != nil || !res.Reachable {
		t.Fatalf("tier-4 preflight on the empty form: %+v, %v; want reachable", res, err)
	}
	sec := a.sameSurfaceSection()
	inner(sec)["screen"] = map[string]any{"cdp_url": cdpURL, "page_url_prefix": "http://nowhere.invalid/"}
	c = client(t, request(t, sec, params(rec)))
	if res, err := c.TestConnection(t.Context()); err != nil || res.Reachable || !strings.Contains(res.Message, "page_url_prefix") {
		t.Errorf("preflight with no matching tab: %+v, %v; want unreachable naming page_url_prefix", res, err)
	}
	c = client(t, request(t, a.reopenSection(), params(rec)))
	if res, err := c.TestConnection(t.Context()); err != nil || !res.Reachable {
		t.Errorf("tier-3 preflight before the record exists: %+v, %v; want reachable (no record)", res, err)
	}
}
