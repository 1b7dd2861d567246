package onscreen

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard/guardtest"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// TestRefusedRequestsNeverArrive: the record page is a single-page admin
// app that renews its session as it loads, every 5 ms after that, and from
// a worker (which the page guard refuses to start), and loads itself again
// when the renewal on load fails
// (screenapp.SetRefreshing), so that its own navigations race the tab's
// close. Many tier-3 reads, four at a time,
// some cut short by their deadline at any step: every read is unusable,
// and not one of the refused POSTs reaches the application, during the
// read or while its tab closes. The same page opened without the guards
// does post: the count can fail.
//
// make test makes 24 reads; VERIFIERD_GUARD_READS=300 makes the full count.
func TestRefusedRequestsNeverArrive(t *testing.T) {
	reads := guardtest.Reads(t, 24)
	a := startApp(t)
	rec := typed("guard-1")
	a.Put(rec)
	a.SetRefreshing(5)
	sec := a.reopenSection()
	inner(sec)["fields"] = []any{
		map[string]any{"param": "name", "selector": "#name"},
		map[string]any{"param": "amount", "selector": "#amount"},
	}
	c := client(t, request(t, sec, params(rec)))
	before := pageTargets(t, a)

	start := time.Now()
	var (
		mu       sync.Mutex
		problems []string
		usable   int
	)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range reads {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// Every third read has a deadline that ends it part-way: at
			// the tab's opening, the guards' installation, the page load
			// or the wait for the record.
			timeout := 30 * time.Second
			if i%3 == 2 {
				timeout = time.Duration(100+(i*37)%900) * time.Millisecond
			}
			r, err := tryCapture(c, timeout)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && timeout < time.Second:
				// A read cut off by its caller's deadline.
			case err != nil:
				problems = append(problems, fmt.Sprintf("read %d: %v", i, err))
			case r.Reachable:
				usable++
			case timeout >= time.Second && !strings.Contains(r.Reason, "non-read request"):
				problems = append(problems, fmt.Sprintf("read %d: reason %q; want the refused POST named", i, r.Reason))
			}
		})
	}
	wg.Wait()
	// The tabs close in the background: wait until every one is gone.
	waitNoReadTabs(t, a, before)
	t.Logf("%d reads in %v", reads, time.Since(start).Round(time.Millisecond))
	for _, p := range problems {
		t.Error(p)
	}
	if usable > 0 {
		t.Errorf("%d reads of a page that posted were usable", usable)
	}
	if n := a.Posts(); n != 0 {
		t.Errorf("the application received %d refused POST(s) from %d reads; the guards must stop every one in the browser", n, reads)
	}

	// The control: the same page in the automation's own tab, unguarded,
	// posts.
	ctx, cancel := context.WithTimeout(a.tab, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(a.URL+"/records/"+rec.Ref)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.Posts() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.Posts() == 0 {
		t.Error("the refreshing page never posted without the guards; the count above proves nothing")
	}
	a.SetRefreshing(0)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(a.URL+"/new")); err != nil {
		t.Fatal(err)
	}
}

// pageTargets lists the browser's tabs: id -> address.
func pageTargets(t *testing.T, a *app) map[string]string {
	t.Helper()
	targets, err := chromedp.Targets(a.tab)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tg := range targets {
		if tg.Type == "page" {
			out[string(tg.TargetID)] = tg.URL
		}
	}
	return out
}

// waitNoReadTabs waits until the browser shows no tab but those it had
// before the reads (the read-backs' tabs are closed in the background),
// and a little longer.
func waitNoReadTabs(t *testing.T, a *app, before map[string]string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var extra []string
		for id, url := range pageTargets(t, a) {
			if _, ok := before[id]; !ok {
				extra = append(extra, url)
			}
		}
		if len(extra) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("read-back tabs still open 30s after the reads ended: %q", extra)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}

// tryCapture is one CaptureAfter within timeout, for goroutines other than
// the test's.
func tryCapture(c *adaptertest.Instance, timeout time.Duration) (captured, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	capt, err := c.CaptureAfter(ctx, sdk.CaptureRequest{CaptureID: "guard", IdentityField: "id", Timeout: timeout, EffectKind: "record_written"})
	if err != nil {
		return captured{}, err
	}
	recs, err := capt.Records()
	if err != nil {
		return captured{}, err
	}
	return captured{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}, nil
}
