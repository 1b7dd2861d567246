package uireadback

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard/guardtest"
	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// TestRefusedRequestsNeverArrive: the record page POSTs as it loads, every
// 5 ms after that for as long as it is open, and from a dedicated worker
// (the page is ready only once the worker's POST settled); when its POST
// on load fails it loads itself again, as an app that signs in again
// does, so that its own navigations race the tab's close. Many
// read-backs, four at a time, alternately with both guards and with the
// network guard alone (every POST then reaches the network guard), some
// cut short by their deadline at any step: every read is unusable, and
// not one refused POST reaches the application, during the read or while
// its tab closes. The unguarded control in TestPagePostRefused shows the
// same page's POSTs do arrive without the guards.
func TestRefusedRequestsNeverArrive(t *testing.T) {
	reads := guardtest.Reads(t, 24)
	a := startApp(t)
	signInActor(t, a).save(intended("g1"))
	a.SetFaults(recordapp.Faults{PostOnLoad: true, PostEveryMS: 5, PostFromWorker: true, ReloadOnFailure: true})
	defer a.SetFaults(recordapp.Faults{})
	a.ClearRequests()
	guarded := adapterClient(t, request(t, a.section(), "g1", recordapp.ReaderPassword))
	networkOnly := adapterClientWith(t, request(t, a.section(), "g1", recordapp.ReaderPassword),
		withHooks(hooks{noPageGuard: true}))

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
			c := guarded
			if i%2 == 1 {
				c = networkOnly
			}
			// Every third read has a deadline that ends it part-way.
			timeout := 30 * time.Second
			if i%3 == 2 {
				timeout = time.Duration(100+(i*37)%900) * time.Millisecond
			}
			// A read with the long deadline must name the refused POST; on
			// a loaded machine one that timed out first (the safe answer)
			// is made again with more time. The short ones are cut off.
			readOnce := tryCapture
			if timeout >= time.Second {
				readOnce = func(c *adaptertest.Instance, after bool, timeout time.Duration) (read, error) {
					return patientCapture(t, c, after, timeout)
				}
			}
			r, err := readOnce(c, true, timeout)
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
	waitTabsClosed(t)
	t.Logf("%d reads in %v", reads, time.Since(start).Round(time.Millisecond))
	for _, p := range problems {
		t.Error(p)
	}
	if usable > 0 {
		t.Errorf("%d reads of a page that posted were usable", usable)
	}
	arrived := 0
	for _, req := range a.Requests() {
		if req.Method != "GET" && req.Path != "/login" {
			arrived++
			t.Logf("arrived: %s %s", req.Method, req.Path)
		}
	}
	if arrived != 0 {
		t.Errorf("%d refused request(s) reached the application from %d reads; the guards must stop every one in the browser", arrived, reads)
	}
}

// waitTabsClosed waits until the shared browser has no tab open but the
// spare (the read-backs' tabs are closed in the background), and a little
// longer.
func waitTabsClosed(t *testing.T) {
	t.Helper()
	shared.mu.Lock()
	p := shared.proc
	shared.mu.Unlock()
	if p == nil {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		targets, err := chromedp.Targets(p.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var open []string
		for _, tg := range targets {
			if tg.Type == "page" && tg.URL != "about:blank" {
				open = append(open, tg.URL)
			}
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("read-back tabs still open 30s after the reads ended: %q", open)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}
