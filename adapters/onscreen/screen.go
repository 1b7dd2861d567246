package onscreen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"strings"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
	"github.com/verifierd/verifierd/sdk"
)

// pollInterval is how often a wait looks at the page again.
const pollInterval = 20 * time.Millisecond

// guardQueue is how many paused requests the network guard holds for an
// answer at once; a page that makes more at once is refused.
const guardQueue = 1024

// unusableError is a read that could not finish: the reason goes into an
// unreachable capture.
type unusableError struct{ reason string }

func (e *unusableError) Error() string { return e.reason }

func unusable(format string, args ...any) error {
	return &unusableError{reason: fmt.Sprintf(format, args...)}
}

// result is one read: no records when the re-opened page says the record
// does not exist, otherwise one, or one per row on screen (row_selector).
type result struct {
	records []sdk.Record
	// raw is what each field showed before the ratio rule, for tests and
	// the accuracy measurement.
	raw map[string]string
}

// quiet drops chromedp's own log lines: they can quote page content.
func quiet(string, ...any) {}

// read does one read-back through the Chromium at s.cdpURL. Tier 3 opens a
// new tab in the browser context of the application's tab (so the same
// sign-in), re-navigates under the read-only guards and reads the fields
// there, then closes the tab. Tier 4 attaches to the application's tab,
// reads the fields as the save left them and detaches, touching nothing.
func read(ctx context.Context, s *settings) (result, error) {
	if s.display != "" {
		return readDisplay(ctx, s)
	}
	// The connection outlives ctx by the moment it takes to close the tab:
	// that is done in the background after the read, so that a read does
	// not wait for it. Every step of the read is bounded by ctx.
	base := context.WithoutCancel(ctx)
	c := &connection{}
	var allocCtx context.Context
	allocCtx, c.cancelAlloc = remote.NewAllocator(base, s.cdpURL)
	var bctx context.Context
	bctx, c.cancelBrowser = chromedp.NewContext(allocCtx, chromedp.WithLogf(quiet), chromedp.WithErrorf(quiet))
	defer c.closeLater(sdk.Logger(ctx))
	// The first call on a chromedp context ties the connection (or the
	// tab) to that context, so it gets the context itself and ctx bounds
	// the wait instead.
	targets, err := within(ctx, func() ([]*target.Info, error) { return chromedp.Targets(bctx) })
	if err != nil {
		return result{}, unusable("could not reach the application's browser over the DevTools protocol: %v", errText(err))
	}
	app, err := findApp(targets, s)
	if err != nil {
		return result{}, err
	}
	if s.tier == sdk.TierScreenConsistency {
		var tctx context.Context
		tctx, c.cancelTab = chromedp.NewContext(bctx, chromedp.WithTargetID(app.TargetID), chromedp.WithDetachOnCancel())
		if _, err := within(ctx, func() (bool, error) { return chromedp.Run(tctx, chromedp.Evaluate[bool]("true")) }); err != nil {
			return result{}, unusable("could not attach to the application's tab: %v", errText(err))
		}
		op, stop := bounded(tctx, ctx)
		defer stop()
		return readFields(op, s)
	}
	return c.readNewTab(ctx, bctx, app, s)
}

// connection is what one read opened in the browser, closed in the
// background once the read has answered.
type connection struct {
	cancelAlloc, cancelBrowser, cancelTab context.CancelFunc
	ownTab                                context.Context // the re-navigation's tab, closed under its guards
	g                                     guard
	installed                             chan struct{} // closed once the tab is open and guarded, or failed to be
}

// closeLater closes the re-navigation's tab (once its installation has
// ended, so that a read cut short cannot leave a tab opened after it was
// closed) and the connection, without the read waiting for it.
func (c *connection) closeLater(log hclog.Logger) {
	go func() {
		if c.ownTab != nil {
			select {
			case <-c.installed:
			case <-time.After(tabCloseWait):
			}
			if err := cdpguard.CloseTab(c.ownTab, c.g.Network, tabCloseWait); err != nil {
				log.Warn("on-screen read-back: the re-navigation's tab did not close cleanly", "error", err.Error())
			}
		}
		if c.cancelTab != nil {
			c.cancelTab()
		}
		c.cancelBrowser()
		c.cancelAlloc()
	}()
}

// readNewTab is the tier 3 read: a new tab beside the application's,
// guarded read-only, re-navigated to the record, its fields read. Any
// request the guards refused during the read makes it unusable.
func (c *connection) readNewTab(ctx, bctx context.Context, app *target.Info, s *settings) (res result, err error) {
	log := sdk.Logger(ctx)
	// A tab in the application's window, not a window of its own: opening
	// a window costs about as much as the rest of the read. The tab is
	// closed when the read ends and the window returns to the tab before it.
	opts := []chromedp.ContextOption{chromedp.WithNewWindow(false)}
	if app.BrowserContextID != "" {
		// The same browser context as the application's tab: the same
		// sign-in, so the record page opens as the automation sees it.
		opts = append(opts, chromedp.WithExistingBrowserContext(app.BrowserContextID))
	}
	g := newGuard(s)
	c.g = g
	opts = append(opts, chromedp.WithListener(g.Listen))
	var tctx context.Context
	tctx, c.cancelTab = chromedp.NewContext(bctx, opts...)
	c.ownTab = tctx
	// The network guard answers for the life of the tab, not of the read
	// (cdpguard.Network); the read ends only once every request paused
	// during it has been answered, the refused ones failed.
	go g.Network.Answer(tctx)
	defer func() {
		if derr := g.Network.EndRead(ctx); derr != nil {
			log.Warn("on-screen read-back: a request the guards refused may not have been failed", "error", derr.Error())
			if err == nil {
				res, err = result{}, unusable("%v", derr)
			}
		}
		if gerr := g.err(); err == nil && gerr != nil {
			// A request refused after the fields were read still means
			// the page tried to write while it was being read.
			res, err = result{}, gerr
		}
	}()
	// The installation opens the tab; the close waits for it, so that a
	// read cut short cannot leave a tab opened after it was closed.
	installed := make(chan struct{})
	c.installed = installed
	var installErr error
	go func() {
		defer close(installed)
		installErr = g.install(tctx)
	}()
	select {
	case <-installed:
		if installErr != nil {
			return result{}, unusable("could not install the read-only guards in a new tab: %v", errText(installErr))
		}
	case <-ctx.Done():
		return result{}, unusable("could not install the read-only guards in a new tab: %v", errText(ctx.Err()))
	}
	op, stop := bounded(tctx, ctx)
	defer stop()

	absent, err := renavigate(op, s, g.err)
	if gerr := g.err(); gerr != nil {
		// A refused request explains a wait that then timed out.
		err = gerr
	}
	if err != nil {
		return result{}, err
	}
	if absent {
		return result{raw: map[string]string{}}, nil
	}
	res, err = readFields(op, s)
	if gerr := g.err(); gerr != nil {
		err = gerr
	}
	return res, err
}

// findApp picks the application's tab: the first page whose address begins
// with screen.page_url_prefix, or the first page.
func findApp(targets []*target.Info, s *settings) (*target.Info, error) {
	for _, t := range targets {
		if t.Type == "page" && (s.pageURLPrefix == "" || strings.HasPrefix(t.URL, s.pageURLPrefix)) {
			return t, nil
		}
	}
	if s.pageURLPrefix != "" {
		return nil, unusable("the application's browser has no tab whose address begins with screen.page_url_prefix")
	}
	return nil, unusable("the application's browser has no open tab")
}

// reach connects to the application's browser and finds its tab, and
// touches nothing: the preflight of a read of the save's own screen, which
// before the save shows no record to read.
func reach(ctx context.Context, s *settings) error {
	if s.display != "" {
		return reachDisplay(ctx, s)
	}
	allocCtx, cancelAlloc := remote.NewAllocator(context.WithoutCancel(ctx), s.cdpURL)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(quiet), chromedp.WithErrorf(quiet))
	defer func() { go func() { cancelBrowser(); cancelAlloc() }() }()
	targets, err := within(ctx, func() ([]*target.Info, error) { return chromedp.Targets(bctx) })
	if err != nil {
		return unusable("could not reach the application's browser over the DevTools protocol: %v", errText(err))
	}
	_, err = findApp(targets, s)
	return err
}

// within runs f and returns its result, or ctx's error as soon as ctx ends.
func within[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() {
		v, err := f()
		ch <- out{v, err}
	}()
	select {
	case o := <-ch:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// bounded is a child of the chromedp context c that ends when ctx does.
func bounded(c, ctx context.Context) (context.Context, context.CancelFunc) {
	op, cancel := context.WithCancel(c)
	if dl, ok := ctx.Deadline(); ok {
		op, cancel = context.WithDeadline(c, dl)
	}
	stop := context.AfterFunc(ctx, cancel)
	return op, func() { stop(); cancel() }
}

// errText shortens a browser error for a reason.
func errText(err error) string {
	if le, ok := errors.AsType[*chromedp.LoadError](err); ok {
		return le.ErrorText
	}
	return err.Error()
}

// tabCloseWait bounds closing the re-navigation's tab.
const tabCloseWait = 5 * time.Second

// guard keeps the re-navigation read-only, as ui_readback does: the page
// guard refuses non-read requests before they are sent, the network guard
// aborts any that get through, and any refusal makes the read unusable.
// The one exception is a POST to a read_post_paths target.
type guard struct {
	*cdpguard.Guards
	readPosts []string // origin+path
}

func newGuard(s *settings) guard {
	// The page guard matches origin and path; this one, which every
	// request passes, matches the query too.
	allowed := make(map[string]bool, len(s.readPostsExact))
	for _, p := range s.readPostsExact {
		allowed[p] = true
	}
	allow := func(method, rawURL string) bool {
		if cdpguard.IsRead(method) {
			return true
		}
		return strings.EqualFold(method, "POST") && allowed[postTarget(rawURL)]
	}
	return guard{Guards: cdpguard.NewGuards(allow, guardQueue), readPosts: s.readPosts}
}

func (g guard) install(ctx context.Context) error {
	return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := g.Install(ctx, t, cdpguard.Setup{AllowedPosts: g.readPosts})
		return err
	}))
}

func (g guard) err() error {
	what := g.Refused.Summary()
	if what == "" {
		return nil
	}
	return unusable("the re-navigation attempted a non-read request: %s; a read-back never submits or writes (a POST the page must make as it loads, such as a token refresh, is let through only when its path is declared in read_post_paths)", what)
}

// step runs one action under navigation_timeout_s.
func step(ctx context.Context, s *settings, a action, f func(ctx context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, s.navTimeout)
	defer cancel()
	err := f(sctx)
	var ue *unusableError
	switch {
	case err == nil || errors.As(err, &ue):
		return err
	case sctx.Err() != nil && ctx.Err() == nil:
		return unusable("timed out after %v at %s (navigation_timeout_s)", s.navTimeout, a)
	case ctx.Err() != nil:
		return unusable("the read-back's deadline passed at %s", a)
	}
	return unusable("%s failed: %s", a, errText(err))
}

// renavigate runs the declared actions in the tab. It reports absent when
// the page shows absent_selector: the re-opened record does not exist.
func renavigate(ctx context.Context, s *settings, refused func() error) (bool, error) {
	for _, a := range s.actions {
		var absent bool
		err := step(ctx, s, a, func(ctx context.Context) error {
			switch a.kind {
			case "open":
				resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(a.url))
				if err == nil && resp != nil && resp.Status >= 400 {
					return unusable("%s: the page answered HTTP %d", a, resp.Status)
				}
				return err
			case "click":
				if absent, err := waitFor(ctx, s, a.selector, "", refused); err != nil || absent {
					return err
				}
				_, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("(function(){ var e = document.querySelector("+jsString(a.selector)+"); e.click(); return true; })()"))
				return err
			case "type":
				if absent, err := waitFor(ctx, s, a.selector, "", refused); err != nil || absent {
					return err
				}
				focused, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("(function(){ var e = document.querySelector("+jsString(a.selector)+"); e.focus(); if ('value' in e) { e.value = ''; } return document.activeElement === e; })()"))
				if err != nil {
					return err
				}
				if !focused {
					return unusable("%s: the element cannot take the focus", a)
				}
				_, err = chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: a.text})
				return err
			default:
				var err error
				absent, err = waitFor(ctx, s, a.selector, a.text, refused)
				return err
			}
		})
		if err != nil {
			return false, err
		}
		if absent {
			return true, nil
		}
	}
	if s.absent != "" {
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.querySelector("+jsString(s.absent)+") !== null"))
		if err != nil {
			return false, unusable("could not look for absent_selector: %s", errText(err))
		}
		return shown, nil
	}
	return false, nil
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitFor polls until selector matches (or text is shown in the page), or
// absent_selector matches, or a guard refuses a request; it reports
// which.
func waitFor(ctx context.Context, s *settings, selector, text string, refused func() error) (bool, error) {
	want := "document.querySelector(" + jsString(selector) + ") !== null"
	if selector == "" {
		want = "(document.body && document.body.innerText.includes(" + jsString(text) + "))"
	}
	absent := "false"
	if s.absent != "" {
		absent = "document.querySelector(" + jsString(s.absent) + ") !== null"
	}
	expr := "(function(){ try { if (" + absent + ") return 'absent'; return (" + want + ") ? 'ok' : 'wait'; } catch (e) { return 'error: ' + e.message; } })()"
	for {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		switch {
		case err == nil && state == "ok":
			return false, nil
		case err == nil && state == "absent":
			return true, nil
		case err == nil && strings.HasPrefix(state, "error: "):
			return false, unusable("the page could not evaluate a configured selector: %s", strings.TrimPrefix(state, "error: "))
		}
		// A refused request ends the wait: the read is already unusable.
		if err := refused(); err != nil {
			return false, err
		}
		// An error here is most often the page between two documents.
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// captureRegions renders the smallest rectangle holding every region once,
// at ocrScale, and cuts each region out of it: one capture per read,
// whatever the number of fields.
func captureRegions(ctx context.Context, fields []field) ([]image.Image, error) {
	u := image.Rect(fields[0].region[0], fields[0].region[1], fields[0].region[0]+fields[0].region[2], fields[0].region[1]+fields[0].region[3])
	for _, f := range fields[1:] {
		r := f.region
		u = u.Union(image.Rect(r[0], r[1], r[0]+r[2], r[1]+r[3]))
	}
	shot, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format: page.CaptureScreenshotFormatPng,
		Clip:   &page.Viewport{X: float64(u.Min.X), Y: float64(u.Min.Y), Width: float64(u.Dx()), Height: float64(u.Dy()), Scale: ocrScale},
	})
	if err != nil {
		return nil, unusable("could not capture the fields' regions: %s", errText(err))
	}
	img, err := png.Decode(bytes.NewReader(shot.Data))
	if err != nil {
		return nil, unusable("the captured regions are not an image: %v", err)
	}
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		return nil, unusable("the captured regions are an image of an unexpected kind")
	}
	b := img.Bounds()
	out := make([]image.Image, len(fields))
	for i, f := range fields {
		r := f.region
		cut := image.Rect((r[0]-u.Min.X)*ocrScale, (r[1]-u.Min.Y)*ocrScale, (r[0]-u.Min.X+r[2])*ocrScale, (r[1]-u.Min.Y+r[3])*ocrScale).Add(b.Min).Intersect(b)
		if cut.Empty() {
			return nil, unusable("field %s: its region lies outside the captured screen", f.param)
		}
		out[i] = sub.SubImage(cut)
	}
	return out, nil
}

// readFields reads every marked field of the page in ctx's tab: selector
// fields from the page structure (readStructure: over every visible row
// with row_selector), region fields by OCR of the region rendered at
// ocrScale. Every field must read; one that cannot makes the read unusable.
func readFields(ctx context.Context, s *settings) (result, error) {
	var selectorFields, regionFields []field
	for _, f := range s.fields {
		if f.region == nil {
			selectorFields = append(selectorFields, f)
		} else {
			regionFields = append(regionFields, f)
		}
	}
	absent, err := awaitRendered(ctx, s)
	if err != nil {
		return result{}, err
	}
	if absent {
		return result{raw: map[string]string{}}, nil
	}
	pg, err := readStructure(ctx, s, selectorFields)
	if err != nil {
		return result{}, err
	}
	if s.rows != "" {
		return rowRecords(s, pg)
	}
	rec := sdk.Record{"id": pg.Path}
	raw := map[string]string{}
	for j, f := range selectorFields {
		shown, v, err := f.readShown(pg.Rows[0][j], 0, 0)
		if err != nil {
			return result{}, err
		}
		raw[f.param], rec[f.param] = shown, v
	}
	if len(regionFields) > 0 {
		imgs, err := captureRegions(ctx, regionFields)
		if err != nil {
			return result{}, err
		}
		regions := make([]*image.Gray, 0, len(imgs))
		for _, img := range imgs {
			regions = append(regions, binarize(img))
		}
		readings, err := recognize(ctx, regions)
		if err != nil {
			if ctx.Err() != nil {
				return result{}, unusable("the read-back's deadline passed during OCR")
			}
			return result{}, err
		}
		if err := fill(regionFields, readings, s.minConfidence, rec, raw); err != nil {
			return result{}, err
		}
	}
	return result{records: []sdk.Record{rec}, raw: raw}, nil
}
