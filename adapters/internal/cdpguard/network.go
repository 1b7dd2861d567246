package cdpguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Network is the network guard. With the Fetch domain enabled for every
// URL, each request the page makes pauses; Paused decides it in the tab's
// event loop, recording a refusal in Refused, and Answer, in a goroutine
// of its own, continues the allowed requests and fails the refused ones.
//
// A paused request must never outlive the guard: when the DevTools session
// leaves a tab (a detach, a lost connection), the browser lets every
// request still paused in it go on, refused or not. So the guard answers
// for the life of the tab, not of the read: Finish, at the end of a read,
// makes it fail every request from then on, allowed or not, and Drain
// waits until every request paused so far has been answered. CloseTab
// drains before and after closing the tab, and only then may the session
// leave it (Stop).
type Network struct {
	refused *Refusals
	allow   func(method, rawURL string) bool
	limit   int
	notify  chan struct{}
	stop    chan struct{}
	stopped sync.Once

	mu       sync.Mutex
	waiting  []decision
	finished bool // the read ended: every request is failed
	ended    bool // Answer returned: nothing more is answered
	// paused counts the requests handed to the guard, answered those it
	// has answered (or given up on), in the order they paused; changed
	// wakes Drain.
	paused, answered int
	changed          chan struct{}
	// failures are refused requests the browser could not be told to
	// fail, for Drain to report.
	failures []error
	// workers are the sessions of the tab's workers that are running
	// (attached and not yet detached). A worker outlives its page by a
	// moment, and a request it makes then is paused like any other: the
	// tab may close only once none is left, or that request could still be
	// paused when the browser tears the tab's session down, which lets it go.
	workers map[target.SessionID]bool
	started int // workers ever started, for Settle
}

type decision struct {
	id    fetch.RequestID
	allow bool
	what  string // for a failure's message: METHOD origin+path
}

// NewNetwork returns a network guard that lets through the requests allow
// accepts and records every other one in refused. limit bounds the
// decisions waiting for Answer (0: no bound): beyond it an allowed request
// is refused too, as "beyond the guard's queue", so that a page flooding
// the guard is never read. Every refused request is queued to be failed,
// whatever the limit: one left paused could be let go later.
func NewNetwork(refused *Refusals, allow func(method, rawURL string) bool, limit int) *Network {
	return &Network{refused: refused, allow: allow, limit: limit,
		notify: make(chan struct{}, 1), stop: make(chan struct{}), changed: make(chan struct{}),
		workers: map[target.SessionID]bool{}}
}

// worker records that the worker of session id started (running) or
// ended. It runs in the tab's event loop and never blocks.
func (n *Network) worker(id target.SessionID, running bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case running:
		n.workers[id] = true
		n.started++
	case n.workers[id]:
		delete(n.workers, id)
	default:
		return
	}
	close(n.changed)
	n.changed = make(chan struct{})
}

// Settle waits until the tab has gone quiet: no worker of its page is
// running, every request paused so far is answered (Drain), and for quiet
// afterwards nothing new paused and no worker started; or until ctx ends.
// CloseTab settles the tab after it left its page, before closing it.
func (n *Network) Settle(ctx context.Context, quiet time.Duration) error {
	for {
		n.mu.Lock()
		paused, started := n.paused, n.started
		n.mu.Unlock()
		if err := n.WaitWorkers(ctx); err != nil {
			return err
		}
		if err := n.Drain(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the page did not go quiet: %w", ctx.Err())
		case <-time.After(quiet):
		}
		n.mu.Lock()
		same := paused == n.paused && started == n.started && len(n.workers) == 0
		n.mu.Unlock()
		if same {
			return nil
		}
	}
}

// WaitWorkers waits until none of the tab's workers is running, or ctx
// ends, and returns how many still ran then with ctx's error.
func (n *Network) WaitWorkers(ctx context.Context) error {
	for {
		n.mu.Lock()
		left, changed := len(n.workers), n.changed
		n.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d worker(s) of the page still running: %w", left, ctx.Err())
		}
	}
}

// Paused decides one paused request. It runs in the tab's event loop, in
// the order events arrive, and never blocks or calls the browser: every
// decision and refusal is recorded before any later command returns, so a
// refusal caused by a page load is seen by the read that follows the load.
func (n *Network) Paused(e *fetch.EventRequestPaused) {
	refusal := Refusal{Layer: "network guard", Method: strings.ToUpper(e.Request.Method), Target: OriginPath(e.Request.URL)}
	d := decision{id: e.RequestID, what: refusal.Method + " " + refusal.Target}
	n.mu.Lock()
	finished, queued := n.finished, len(n.waiting)
	n.mu.Unlock()
	// After the read nothing is let through; what a page does then is not
	// part of the read and is not recorded.
	d.allow = !finished && n.allow(e.Request.Method, e.Request.URL)
	switch {
	case !finished && !d.allow:
		refusal.How = strings.ToLower(string(e.ResourceType)) + " request"
		n.refused.Add(refusal)
	case d.allow && n.limit > 0 && queued >= n.limit:
		d.allow = false
		refusal.How = "request beyond the guard's queue"
		n.refused.Add(refusal)
	}
	n.mu.Lock()
	n.paused++
	if n.ended {
		n.mu.Unlock()
		batch := []decision{d}
		n.answer(batch, giveUp(batch, errors.New("it paused after the guard stopped answering")))
		return
	}
	n.waiting = append(n.waiting, d)
	n.mu.Unlock()
	select {
	case n.notify <- struct{}{}:
	default:
	}
}

// Answer continues the allowed requests and fails the refused ones until
// Stop is called or ctx ends. The requests paused since the last answers
// are answered together, each in a goroutine of its own, so that a page
// that pauses requests faster than one round trip to the browser does not
// queue its own loads behind its refusals. ctx must be the tab's, not the
// read's: it is the context of the answers, and a request left unanswered
// when the read's context ends could be let go later. When Answer returns,
// any request not answered is counted as a failure Drain reports.
func (n *Network) Answer(ctx context.Context) {
	defer n.end(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		case <-n.notify:
		}
		n.mu.Lock()
		batch := n.waiting
		n.waiting = nil
		n.mu.Unlock()
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, d := range batch {
			wg.Go(func() {
				if d.allow {
					// An allowed request that cannot be continued only
					// makes the read that needed it time out.
					_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: d.id})
					return
				}
				_, errs[i] = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: d.id, ErrorReason: network.ErrorReasonBlockedByClient})
			})
		}
		wg.Wait()
		n.answer(batch, errs)
	}
}

// answer records that batch, the requests next in pause order, was
// answered; errs holds the browser's answer to each failRequest.
func (n *Network) answer(batch []decision, errs []error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, err := range errs {
		if err != nil && !requestGone(err) {
			n.failures = append(n.failures, fmt.Errorf("%s could not be failed: %w", batch[i].what, err))
		}
	}
	n.answered += len(batch)
	close(n.changed)
	n.changed = make(chan struct{})
}

// end gives up on every request still waiting when Answer returns.
func (n *Network) end(ctx context.Context) {
	n.mu.Lock()
	n.ended = true
	batch := n.waiting
	n.waiting = nil
	n.mu.Unlock()
	why := errors.New("the guard stopped answering")
	if ctx.Err() != nil {
		why = fmt.Errorf("the tab's session ended: %w", ctx.Err())
	}
	n.answer(batch, giveUp(batch, why))
}

// giveUp is the errors of a batch not answered: why for each refused
// request.
func giveUp(batch []decision, why error) []error {
	errs := make([]error, len(batch))
	for i, d := range batch {
		if !d.allow {
			errs[i] = why
		}
	}
	return errs
}

// requestGone reports whether the browser refused an answer because the
// request is no longer paused: the page that made it went away (a
// navigation, the tab's close), which cancels it before it is sent.
func requestGone(err error) bool {
	var ce *cdproto.Error
	return errors.As(err, &ce) && strings.Contains(ce.Message, "Invalid InterceptionId")
}

// Finish ends the read: from now on every request the page makes is
// failed, whatever allow says. It does not wait; Drain does.
func (n *Network) Finish() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.finished = true
}

// Drain waits until every request paused so far has been answered, or ctx
// ends, and returns every refused request the browser could not be told
// to fail (nil when none). A request still paused when ctx ends is an
// error too.
func (n *Network) Drain(ctx context.Context) error {
	n.mu.Lock()
	target := n.paused
	n.mu.Unlock()
	for {
		n.mu.Lock()
		answered, changed := n.answered, n.changed
		var failures []error
		if answered >= target {
			failures, n.failures = n.failures, nil
		}
		n.mu.Unlock()
		if answered >= target {
			return errors.Join(failures...)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			n.mu.Lock()
			failures, n.failures = n.failures, nil
			pending := target - n.answered
			n.mu.Unlock()
			return errors.Join(append(failures, fmt.Errorf("%d paused request(s) not answered: %w", pending, ctx.Err()))...)
		}
	}
}

// drainWait bounds EndRead's wait for the requests paused during a read to
// be answered; an answer takes a round trip to the browser.
const drainWait = 2 * time.Second

// EndRead ends a read: Finish, then Drain for at most two seconds, even
// when ctx has ended already (a read cut short must still fail the
// requests its guards refused). The error, nil when every refused request
// was failed, is said as a reason the read cannot be trusted.
func (n *Network) EndRead(ctx context.Context) error {
	n.Finish()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainWait)
	defer cancel()
	if err := n.Drain(dctx); err != nil {
		return fmt.Errorf("a request the read-only guards refused could not be failed in the browser: %w", err)
	}
	return nil
}

// Stop ends Answer. Call it only once the tab is gone (CloseTab), or the
// session is about to leave a tab whose requests all died with it.
func (n *Network) Stop() { n.stopped.Do(func() { close(n.stop) }) }

// isWorker reports whether a target type is a dedicated worker: one the
// page started, whose requests the tab's network guard pauses and which
// ends with the page. (The page guard refuses shared and service workers.)
func isWorker(typ string) bool {
	return typ == "worker"
}

// Guards are the read-only guards of one read of a page: the page guard's
// reporting binding (install PageGuardJS(Binding, ...) and a runtime
// binding of that name), the network guard, and what either refused.
type Guards struct {
	Binding string
	Refused Refusals
	Network *Network
}

// NewGuards returns the guards of one read, whose network guard lets
// through the requests allow accepts, holding at most limit decisions
// (NewNetwork).
func NewGuards(allow func(method, rawURL string) bool, limit int) *Guards {
	g := &Guards{Binding: NewBinding()}
	g.Network = NewNetwork(&g.Refused, allow, limit)
	return g
}

// Listen is the tab's event listener: it hands paused requests to the
// network guard and records what the page guard reports. It runs in the
// tab's event loop, in the order events arrive, and never blocks.
func (g *Guards) Listen(ev any) {
	switch e := ev.(type) {
	case *fetch.EventRequestPaused:
		g.Network.Paused(e)
	case *target.EventAttachedToTarget:
		if e.TargetInfo != nil && isWorker(e.TargetInfo.Type) {
			g.Network.worker(e.SessionID, true)
		}
	case *target.EventDetachedFromTarget:
		g.Network.worker(e.SessionID, false)
	case *runtime.EventBindingCalled:
		if e.Name == g.Binding {
			g.Refused.Add(ParsePageReport(e.Payload))
		}
	}
}
