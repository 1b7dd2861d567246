package cdpguard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Setup says how Install sets a tab's guards up.
type Setup struct {
	// AllowedPosts are the POST paths the page guard lets through
	// (PageGuardJS).
	AllowedPosts []string
	// BypassServiceWorker sends every request to the network, where the
	// network guard sees it, rather than to a service worker.
	BypassServiceWorker bool
	// NoPageGuard and NoNetworkGuard switch one guard off; only tests set
	// them, to show that the other guard alone stops a write.
	NoPageGuard, NoNetworkGuard bool
}

// Install sets the guards up in the tab t before it loads anything: the
// page guard's reporting binding and script, no HTTP cache, and every
// request paused for the network guard. It returns the page guard script's
// identifier, empty when there is none.
func (g *Guards) Install(ctx context.Context, t cdp.Session, s Setup) (page.ScriptIdentifier, error) {
	if _, err := cdp.Call(ctx, t, runtime.AddBinding, runtime.AddBindingParams{Name: g.Binding}); err != nil {
		return "", err
	}
	var script page.ScriptIdentifier
	if !s.NoPageGuard {
		var err error
		if script, err = g.PageGuard(ctx, t, s.AllowedPosts); err != nil {
			return "", err
		}
	}
	if _, err := cdp.Call(ctx, t, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return "", err
	}
	if s.BypassServiceWorker {
		if _, err := cdp.Call(ctx, t, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true}); err != nil {
			return "", err
		}
	}
	if !s.NoNetworkGuard {
		if _, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
			return "", err
		}
	}
	return script, nil
}

// PageGuard adds the page guard, reporting to g.Binding and letting through
// POSTs to allowed, to every document the tab t loads from now on.
func (g *Guards) PageGuard(ctx context.Context, t cdp.Session, allowed []string) (page.ScriptIdentifier, error) {
	r, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: PageGuardJS(g.Binding, allowed)})
	return r.Identifier, err
}

// CloseTab ends the tab of tctx, a chromedp context that opened it, while
// the guards still hold, and then stops the network guard n (nil when the
// tab was never guarded), whose Answer runs under tctx. In order, all
// within wait:
//
//   - n fails every request from now on (Finish) and every request paused
//     so far is answered (Drain);
//   - the tab leaves its page for about:blank, which cancels every request
//     the page still had under way and stops its timers and workers; what
//     the page sent while unloading is failed and drained too;
//   - the tab is closed, and CloseTab waits until the browser no longer
//     lists it.
//
// Each step is tried even when an earlier one failed; the error joins what
// went wrong. It must run before tctx is cancelled: chromedp's cancel
// detaches from a tab before closing it, and the browser lets every
// request still paused in a tab go on when the session leaves it, so a
// refused request would reach the application. A tab never opened is left
// alone.
func CloseTab(tctx context.Context, n *Network, wait time.Duration) error {
	c := chromedp.FromContext(tctx)
	if c == nil || c.Browser == nil || c.Target == nil {
		return nil
	}
	id := c.Target.TargetID
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tctx), wait)
	defer cancel()
	var errs []error
	drain := func(when string) {
		if n == nil {
			return
		}
		if err := n.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", when, err))
		}
	}
	if n != nil {
		n.Finish()
	}
	drain("failing the requests the page had paused")
	tab, cancelTab := context.WithTimeout(tctx, wait)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		errs = append(errs, fmt.Errorf("leaving the read-back's page: %w", err))
	}
	drain("failing the requests the page paused while it was left")
	if _, err := cdp.Call(ctx, c.Browser, target.CloseTarget, target.CloseTargetParams{TargetID: id}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("closing the read-back's tab: %w", err))...)
	}
	for {
		res, err := cdp.Call(ctx, c.Browser, target.GetTargets, target.GetTargetsParams{})
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("waiting for the read-back's tab to close: %w", err))...)
		}
		if !slices.ContainsFunc(res.TargetInfos, func(t *target.Info) bool { return t.TargetID == id }) {
			if n != nil {
				// Nothing is left to answer. Until the tab is gone the
				// guard answers on, up to the cancellation of tctx.
				n.Stop()
			}
			return errors.Join(errs...)
		}
		select {
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("waiting for the read-back's tab to close: %w", ctx.Err()))...)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
