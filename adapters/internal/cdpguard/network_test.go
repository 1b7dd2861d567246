package cdpguard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
)

func paused(id, method, rawURL string) *fetch.EventRequestPaused {
	return &fetch.EventRequestPaused{RequestID: fetch.RequestID(id), ResourceType: network.ResourceTypeXHR,
		Request: &network.Request{Method: method, URL: rawURL}}
}

// TestNetworkDecides shows the guard's decisions before any answer: a
// refused request is recorded, an allowed one is not, and with a limit an
// allowed request beyond the waiting decisions is refused too and still
// queued, to be failed rather than left paused.
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
	if len(n.waiting) != 3 || !n.waiting[0].allow || n.waiting[1].allow || n.waiting[2].allow {
		t.Errorf("waiting decisions = %+v; want the first GET allowed, the POST and the GET beyond the limit queued to be failed", n.waiting)
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

// TestDrain shows the guard's bookkeeping without a browser: Drain waits
// for every request paused before it was called, reports a refused request
// the browser could not be told to fail (here: no browser at all) and not
// an allowed one, reports what is still unanswered when its context ends,
// and after Finish even an allowed request is failed, unrecorded.
func TestDrain(t *testing.T) {
	var refused Refusals
	n := NewNetwork(&refused, func(method, _ string) bool { return IsRead(method) }, 0)
	n.Paused(paused("1", "POST", "http://127.0.0.1/save"))
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.Drain(short); err == nil || !strings.Contains(err.Error(), "1 paused request(s) not answered") {
		t.Fatalf("Drain with no Answer running = %v; want the paused request reported", err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() { n.Answer(ctx); close(done) }()
	n.Paused(paused("2", "GET", "http://127.0.0.1/page"))
	err := n.Drain(context.Background())
	if err == nil || !strings.Contains(err.Error(), "POST http://127.0.0.1/save could not be failed") || strings.Contains(err.Error(), "GET") {
		t.Errorf("Drain = %v; want only the refused POST reported as not failed", err)
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Errorf("a second Drain with nothing new = %v", err)
	}

	n.Finish()
	n.Paused(paused("3", "GET", "http://127.0.0.1/late"))
	if err := n.Drain(context.Background()); err == nil || !strings.Contains(err.Error(), "GET http://127.0.0.1/late could not be failed") {
		t.Errorf("Drain after Finish = %v; want the late GET failed (and, with no browser, reported)", err)
	}
	if got := len(refused.Snapshot()); got != 1 {
		t.Errorf("%d refusals recorded; want only the POST made during the read", got)
	}
	n.Stop()
	<-done
	n.Paused(paused("4", "POST", "http://127.0.0.1/after"))
	if err := n.Drain(context.Background()); err == nil || !strings.Contains(err.Error(), "after the guard stopped answering") {
		t.Errorf("Drain after Stop = %v; want the request paused after the guard stopped reported", err)
	}
}

// TestEndRead shows the end of a read: EndRead finishes the read (a request
// paused afterwards is failed, allowed or not), drains even under a
// context that has already ended, gives up within its bound on a request
// nobody answers, and says the failure as a read-back's reason.
func TestEndRead(t *testing.T) {
	var refused Refusals
	n := NewNetwork(&refused, func(string, string) bool { return true }, 0)
	done := make(chan struct{})
	go func() { n.Answer(t.Context()); close(done) }()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.EndRead(ended); err != nil {
		t.Fatalf("EndRead with nothing paused = %v", err)
	}
	n.Paused(paused("1", "GET", "http://127.0.0.1/late"))
	err := n.EndRead(ended)
	if err == nil || !strings.HasPrefix(err.Error(), "a request the read-only guards refused could not be failed in the browser: ") ||
		!strings.Contains(err.Error(), "GET http://127.0.0.1/late could not be failed") {
		t.Errorf("EndRead after a late GET = %v; want it failed after the read ended (and, with no browser, reported)", err)
	}
	n.Stop()
	<-done

	idle := NewNetwork(&refused, func(string, string) bool { return true }, 0)
	idle.Paused(paused("2", "GET", "http://127.0.0.1/a"))
	start := time.Now()
	err = idle.EndRead(ended)
	if err == nil || !strings.Contains(err.Error(), "1 paused request(s) not answered") {
		t.Errorf("EndRead with no Answer running = %v; want the paused request reported", err)
	}
	if took := time.Since(start); took < drainWait || took > drainWait+time.Second {
		t.Errorf("EndRead waited %v; want its bound, %v", took, drainWait)
	}
}

// TestSettle shows the guard waiting for the workers of a left page: Settle
// returns only once every worker that started has ended and what was
// paused meanwhile is answered, and reports a worker that never ends.
func TestSettle(t *testing.T) {
	var refused Refusals
	g := &Guards{Network: NewNetwork(&refused, func(method, _ string) bool { return IsRead(method) }, 0)}
	go g.Network.Answer(t.Context())
	g.Listen(&target.EventAttachedToTarget{SessionID: "w1", TargetInfo: &target.Info{Type: "worker"}})
	g.Listen(&target.EventAttachedToTarget{SessionID: "p1", TargetInfo: &target.Info{Type: "iframe"}})

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.Network.Settle(short, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "1 worker(s) of the page still running") {
		t.Fatalf("Settle with a worker running = %v; want it reported", err)
	}

	done := make(chan error, 1)
	go func() { done <- g.Network.Settle(context.Background(), 50*time.Millisecond) }()
	time.Sleep(20 * time.Millisecond)
	g.Network.Finish()
	g.Listen(paused("9", "POST", "http://127.0.0.1/renew"))
	g.Listen(&target.EventDetachedFromTarget{SessionID: "w1"})
	g.Listen(&target.EventDetachedFromTarget{SessionID: "p1"})
	select {
	case err := <-done:
		// With no browser the POST cannot be failed: Drain says so, and
		// Settle passes it on rather than calling the tab quiet.
		if err == nil || !strings.Contains(err.Error(), "POST http://127.0.0.1/renew could not be failed") {
			t.Errorf("Settle after the worker ended = %v; want the unfailed POST reported", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Settle did not return after the worker ended")
	}
	if err := g.Network.Settle(context.Background(), 10*time.Millisecond); err != nil {
		t.Errorf("Settle on a quiet tab = %v", err)
	}
}
