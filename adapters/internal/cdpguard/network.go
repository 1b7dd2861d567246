package cdpguard

import (
	"context"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Network is the network guard. With the Fetch domain enabled for every
// URL, each request the page makes pauses; Paused decides it in the tab's
// event loop, recording a refusal in Refused, and Answer, in a goroutine
// of its own, continues the allowed requests and fails the refused ones.
// A request the browser could not be told about stays paused until the
// read's deadline, which fails the read.
type Network struct {
	refused *Refusals
	allow   func(method, rawURL string) bool
	limit   int

	mu      sync.Mutex
	waiting []decision
	notify  chan struct{}
}

type decision struct {
	id    fetch.RequestID
	allow bool
}

// NewNetwork returns a network guard that lets through the requests allow
// accepts and records every other one in refused. limit bounds the
// decisions waiting for Answer (0: no bound): beyond it a request stays
// paused unanswered, and one allow accepted is refused as "beyond the
// guard's queue", so that a page flooding the guard is never read.
func NewNetwork(refused *Refusals, allow func(method, rawURL string) bool, limit int) *Network {
	return &Network{refused: refused, allow: allow, limit: limit, notify: make(chan struct{}, 1)}
}

// Paused decides one paused request. It runs in the tab's event loop, in
// the order events arrive, and never blocks or calls the browser: every
// decision and refusal is recorded before any later command returns, so a
// refusal caused by a page load is seen by the read that follows the load.
func (n *Network) Paused(e *fetch.EventRequestPaused) {
	refusal := Refusal{Layer: "network guard", Method: strings.ToUpper(e.Request.Method), Target: OriginPath(e.Request.URL)}
	allow := n.allow(e.Request.Method, e.Request.URL)
	if !allow {
		refusal.How = strings.ToLower(string(e.ResourceType)) + " request"
		n.refused.Add(refusal)
	}
	n.mu.Lock()
	full := n.limit > 0 && len(n.waiting) >= n.limit
	if !full {
		n.waiting = append(n.waiting, decision{id: e.RequestID, allow: allow})
	}
	n.mu.Unlock()
	if full {
		if allow {
			refusal.How = "request beyond the guard's queue"
			n.refused.Add(refusal)
		}
		return
	}
	select {
	case n.notify <- struct{}{}:
	default:
	}
}

// Answer continues the allowed requests and fails the refused ones until
// ctx ends.
func (n *Network) Answer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.notify:
		}
		n.mu.Lock()
		waiting := n.waiting
		n.waiting = nil
		n.mu.Unlock()
		for _, d := range waiting {
			if d.allow {
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: d.id})
			} else {
				_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: d.id, ErrorReason: network.ErrorReasonBlockedByClient})
			}
		}
	}
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
	case *runtime.EventBindingCalled:
		if e.Name == g.Binding {
			g.Refused.Add(ParsePageReport(e.Payload))
		}
	}
}
