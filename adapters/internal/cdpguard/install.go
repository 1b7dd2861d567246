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
// tab was never guarded), whose Answer runs under tctx. In order, the
// first three within wait and the last within closeBudget times wait:
//
//   - n fails every request from now on (Finish), the page and its
//     workers are frozen (freeze), and every request paused so far is
//     answered (Drain);
//   - the tab leaves its page for about:blank, which cancels every request
//     the page still had under way and stops its timers and workers; what
//     the page sent while unloading is failed and drained too;
//   - the page's dedicated workers, which outlive it by a moment, are
//     waited for, and what they sent meanwhile is failed and drained;
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
	tab, cancelTab := context.WithTimeout(tctx, wait)
	defer cancelTab()
	// Best effort: a tab that never loaded a page has none to freeze, and
	// the steps below stand without it.
	_ = freeze(tab)
	drain("failing the requests the page had paused")
	// Best effort too: leave works on a page that runs, and a frozen page
	// may not answer the navigation away.
	_ = thaw(tab)
	if err := leave(tab); err != nil {
		// A page still live when its tab closes can have a request paused
		// at that moment, which the close lets go: keep trying, with the
		// guards failing everything meanwhile, for as long as the close
		// itself may take, before closing the tab on a live page.
		again, cancelAgain := context.WithTimeout(context.WithoutCancel(tctx), closeBudget*wait)
		if err = leave(again); err != nil {
			errs = append(errs, fmt.Errorf("leaving the read-back's page: %w", err))
		}
		cancelAgain()
	}
	drain("failing the requests the page paused while it was left")
	if n != nil {
		// The page's workers end a moment after the page: wait for them,
		// and fail what they sent meanwhile, before the tab is closed.
		if err := n.Settle(ctx, settleQuiet); err != nil {
			errs = append(errs, fmt.Errorf("waiting for the left page's workers and requests to end: %w", err))
		}
	}
	// Closing gets a budget of its own, and a longer one: until the tab is
	// gone the guards answer for it, while the caller's cancel, which
	// follows a failed close, leaves the tab and so lets go whatever is
	// still paused in it. On a loaded machine a close can take seconds.
	closing, cancelClose := context.WithTimeout(context.WithoutCancel(tctx), closeBudget*wait)
	defer cancelClose()
	if _, err := cdp.Call(closing, c.Browser, target.CloseTarget, target.CloseTargetParams{TargetID: id}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("closing the read-back's tab: %w", err))...)
	}
	for {
		res, err := cdp.Call(closing, c.Browser, target.GetTargets, target.GetTargetsParams{})
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
		case <-closing.Done():
			return errors.Join(append(errs, fmt.Errorf("waiting for the read-back's tab to close: %w", closing.Err()))...)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// settleQuiet is how long a left tab must stay quiet (Network.Settle)
// before CloseTab closes it.
const settleQuiet = 50 * time.Millisecond

// closeBudget is how many times the budget of the other steps CloseTab
// gives the close of the tab.
const closeBudget = 4

// leave navigates the tab of ctx to about:blank and checks that it got
// there. A page can navigate itself at the same moment (a reload, a
// redirect to a sign-in), which aborts the navigation away; since every
// request is failed once the read ended, the page's own navigation fails
// and the next try wins, so leave tries until ctx ends. Each try is
// bounded on its own and waits for no load event, only for the frame tree
// to show about:blank: on a loaded machine, a navigation racing the page's
// own reload was seen to wait for its load (and a script evaluation for an
// execution context) until the whole budget was spent, with the page
// still live when the tab was closed.
func leave(ctx context.Context) error {
	for {
		try, cancel := context.WithTimeout(ctx, leaveTry)
		err := chromedp.Do(try, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			res, err := cdp.Call(ctx, t, page.Navigate, page.NavigateParams{URL: "about:blank"})
			if err == nil && res.ErrorText != "" {
				err = errors.New(res.ErrorText)
			}
			return err
		}))
		cancel()
		if err == nil {
			err = atBlank(ctx)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leaveTry bounds one try of leave.
const leaveTry = 500 * time.Millisecond

// atBlank waits a moment for the main frame of the tab of ctx to show
// about:blank. It asks the frame tree, not the page's script: a script
// evaluation waits for an execution context, which a page navigating
// itself may not offer until ctx ends.
func atBlank(ctx context.Context) error {
	var at string
	for range 10 {
		try, cancel := context.WithTimeout(ctx, leaveTry)
		err := chromedp.Do(try, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			res, err := cdp.Call(ctx, t, page.GetFrameTree, cdp.Empty{})
			if err == nil && res.FrameTree != nil && res.FrameTree.Frame != nil {
				at = res.FrameTree.Frame.URL
			}
			return err
		}))
		cancel()
		if err == nil && at == "about:blank" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("the tab is at %s, not about:blank", OriginPath(at))
}

// freeze stops the page of ctx and its dedicated workers from running
// (the page lifecycle's frozen state), so that its timers make no new
// request while the requests it made are failed.
func freeze(ctx context.Context) error { return lifecycle(ctx, page.SetWebLifecycleStateStateFrozen) }

// thaw lets the page of ctx run again, so that the navigation away does
// not wait on a page that cannot run its own unload.
func thaw(ctx context.Context) error { return lifecycle(ctx, page.SetWebLifecycleStateStateActive) }

func lifecycle(ctx context.Context, state page.SetWebLifecycleStateState) error {
	return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: state})
		return err
	}))
}
