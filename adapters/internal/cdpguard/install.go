package cdpguard

import (
	"context"
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
// the guards still hold: it first leaves the page for about:blank, which
// cancels every request the page had under way (paused ones included) and
// stops its timers and workers, then closes the tab and waits until the
// browser no longer lists it, all within wait. It must run before tctx is
// cancelled: chromedp's cancel detaches from a tab before closing it, and
// detaching ends the Fetch domain, so a request still paused would go on,
// and the page could send new ones unguarded until the tab was gone. A tab
// never opened is left alone.
func CloseTab(tctx context.Context, wait time.Duration) error {
	c := chromedp.FromContext(tctx)
	if c == nil || c.Browser == nil || c.Target == nil {
		return nil
	}
	id := c.Target.TargetID
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tctx), wait)
	defer cancel()
	tab, cancelTab := context.WithTimeout(tctx, wait)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		return fmt.Errorf("leaving the read-back's page: %w", err)
	}
	if _, err := cdp.Call(ctx, c.Browser, target.CloseTarget, target.CloseTargetParams{TargetID: id}); err != nil {
		return fmt.Errorf("closing the read-back's tab: %w", err)
	}
	for {
		res, err := cdp.Call(ctx, c.Browser, target.GetTargets, target.GetTargetsParams{})
		if err != nil {
			return fmt.Errorf("waiting for the read-back's tab to close: %w", err)
		}
		if !slices.ContainsFunc(res.TargetInfos, func(t *target.Info) bool { return t.TargetID == id }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the read-back's tab to close: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
