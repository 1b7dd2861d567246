package uireadback

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
	"github.com/verifierd/verifierd/sdk"
)

// Kind is the deployment's `kind:` for this adapter.
const Kind = "ui_readback"

// Description is what the adapter says about itself, in GetInfo.
const Description = "reads the application's record page in a separate, separately signed-in, read-only headless Chromium session: a record page read (tier 2), not a read of the system of record"

// Adapter reads a record page of a GUI application in a fresh browser
// context of a shared headless Chromium.
type Adapter struct {
	settings    sdk.Settings[settings]
	browser     *Browser
	ownsBrowser bool

	// Test hooks: run with one of the two read-only guards switched off.
	noPageGuard, noNetworkGuard bool
}

var _ sdk.Adapter = (*Adapter)(nil)

// processBrowser is the one headless Chromium of a plugin process, shared
// by every configured instance; each read-back runs in a fresh context of
// it. It starts on the first read.
var processBrowser = sync.OnceValue(func() *Browser { return NewBrowser(BrowserOptions{}) })

// New returns an unconfigured adapter on the process's shared browser; it
// is the factory for plugin.Serve.
func New() sdk.Adapter {
	return &Adapter{browser: processBrowser()}
}

// NewWithBrowser returns a factory whose adapters share b (a test package,
// or a process serving several adapters, keeps one browser process). The
// adapters never close b; its owner does.
func NewWithBrowser(b *Browser) func() sdk.Adapter {
	return func() sdk.Adapter { return &Adapter{browser: b} }
}

// Close stops the adapter's own browser; a shared one is left running.
func (a *Adapter) Close() error {
	if a.ownsBrowser {
		return a.browser.Close()
	}
	return nil
}

// Info declares the mechanism: tier 2, and absence is not proof, because a
// record page can hide rows (paging, filters, a display limit), so the
// daemon never ends a step as HALTED_BEFORE_EFFECT on what this adapter
// does not see.
func (a *Adapter) Info() sdk.Info {
	return sdk.Info{
		Kind:            Kind,
		Tier:            sdk.TierIndependentSession,
		AbsenceNotProof: true,
		Description:     Description,
	}
}

// Configure checks the section and takes the read-back account; each call
// binds its run parameters into the record URL and the identity. It opens
// no browser.
func (a *Adapter) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	s, err := parseSettings(req)
	if err != nil {
		return err
	}
	a.settings.Store(s)
	return nil
}

// TestConnection is a complete read-back: sign in with the read-back
// account in a fresh context, open the record page, check the identity and
// read the rows. It writes nothing (the sign-in is the one request that
// posts).
func (a *Adapter) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	_, s, err := sdk.Bound(&a.settings, req.Params, (*settings).bind)
	if err != nil {
		return sdk.TestResult{}, err
	}
	start := time.Now()
	res, err := a.readBack(ctx, s)
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{}, err
	}
	var warnings []string
	if s.emptySelector == "" {
		warnings = append(warnings, "no empty_selector: a record page with no rows will read as unusable, never as empty")
	}
	if len(s.truncation) == 0 {
		warnings = append(warnings, "truncation_markers is empty: a value the page shortens with a marker is read as it is shown")
	}
	if res.unusable != "" {
		return sdk.TestResult{Message: "the record page read in a separate session is unusable: " + res.unusable, Warnings: warnings, Latency: latency}, nil
	}
	return sdk.TestResult{
		Reachable: true,
		Message:   fmt.Sprintf("signed in as the read-back account in a fresh browser context, opened %s and read %d rows of the record it names (a record page read in a separate session, not the system of record)", s.recordURL, len(res.records)),
		Warnings:  warnings,
		Latency:   latency,
	}, nil
}

// CaptureBefore reads the record page before the automation acts.
func (a *Adapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

// CaptureAfter reads it again, in another fresh context.
func (a *Adapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

func (a *Adapter) capture(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	_, s, err := sdk.Bound(&a.settings, req.Params, (*settings).bind)
	if err != nil {
		return sdk.Capture{}, err
	}
	return cdpguard.Capture(ctx, req, "record page read in a separate session", func(ctx context.Context) ([]sdk.Record, string, time.Time, error) {
		res, err := a.readBack(ctx, s)
		return res.records, res.unusable, res.at, err
	})
}

// readBack runs one read-back in a fresh browser context. The error is for
// the adapter's own faults (no Chromium to start); everything the page or
// the application does is in the result.
func (a *Adapter) readBack(ctx context.Context, s *settings) (readResult, error) {
	deadline := readDeadline(ctx, s)
	t, release, err := a.browser.acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return readResult{unusable: "timed out starting the browser: the effect's deadline passed", at: time.Now()}, nil
		}
		return readResult{}, err
	}
	defer release()
	rb := newReadback(s)
	rb.noPageGuard, rb.noNetworkGuard = a.noPageGuard, a.noNetworkGuard
	return rb.read(ctx, t, deadline), nil
}

// readDeadline bounds a whole read-back: three navigation waits and the
// extraction, and always a little inside the caller's deadline.
func readDeadline(ctx context.Context, s *settings) time.Time {
	return cdpguard.ReadDeadline(ctx, 3*s.navTimeout+5*time.Second)
}
