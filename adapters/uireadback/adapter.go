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

// info declares the mechanism: tier 2, and absence is not proof, because a
// record page can hide rows (paging, filters, a display limit), so the
// daemon never ends a step as HALTED_BEFORE_EFFECT on what this adapter
// does not see.
var info = sdk.Info{
	Kind:            Kind,
	Tier:            sdk.TierIndependentSession,
	AbsenceNotProof: true,
	Description:     Description,
}

// processBrowser is the one headless Chromium of a plugin process, shared
// by every configured instance; each read-back runs in a fresh context of
// it. It starts on the first read.
var processBrowser = sync.OnceValue(func() *Browser { return NewBrowser(BrowserOptions{}) })

// New returns an unconfigured adapter on the process's shared browser; it
// is the factory for plugin.Serve. Configure checks the section and takes
// the read-back account; each call binds its run parameters into the record
// URL and the identity. Configure opens no browser.
var New = define(processBrowser, hooks{})

// NewWithBrowser returns a factory whose adapters share b (a test package,
// or a process serving several adapters, keeps one browser process). The
// adapters never close b; its owner does.
func NewWithBrowser(b *Browser) func() sdk.Adapter {
	return define(func() *Browser { return b }, hooks{})
}

// hooks switch off one of the two read-only guards, for the package's tests
// that show each one alone stops a write.
type hooks struct {
	noPageGuard, noNetworkGuard bool
}

// define is the adapter built with sdk.Define, reading through the browser
// that browser returns (asked at Configure, which starts no process).
func define(browser func() *Browser, h hooks) func() sdk.Adapter {
	return sdk.Define(info, func(_ context.Context, cfg config, req sdk.ConfigureRequest) (*settings, error) {
		s, err := resolve(cfg, req)
		if err != nil {
			return nil, err
		}
		s.browser, s.hooks = browser(), h
		return s, nil
	})
}

// TestConnection is a complete read-back: sign in with the read-back
// account in a fresh context, open the record page, check the identity and
// read the rows. It writes nothing (the sign-in is the one request that
// posts).
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	b, err := s.bind(req.Params)
	if err != nil {
		return sdk.TestResult{}, err
	}
	start := time.Now()
	res, err := b.readBack(ctx)
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{}, err
	}
	var warnings []string
	if b.emptySelector == "" {
		warnings = append(warnings, "no empty_selector: a record page with no rows will read as unusable, never as empty")
	}
	if len(b.truncation) == 0 {
		warnings = append(warnings, "truncation_markers is empty: a value the page shortens with a marker is read as it is shown")
	}
	if res.unusable != "" {
		return sdk.TestResult{Message: "the record page read in a separate session is unusable: " + res.unusable, Warnings: warnings, Latency: latency}, nil
	}
	return sdk.TestResult{
		Reachable: true,
		Message:   fmt.Sprintf("signed in as the read-back account in a fresh browser context, opened %s and read %d rows of the record it names (a record page read in a separate session, not the system of record)", b.recordURL, len(res.records)),
		Warnings:  warnings,
		Latency:   latency,
	}, nil
}

// Read reads the record page, before the automation acts and after it,
// each time in another fresh browser context.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	b, err := s.bind(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	b.spell.selector = req.Selector
	b.spell.daemon, b.spell.expected = len(req.ReadFields) > 0, req.ExpectedValues
	b.read = readFields(b, req.ReadFields)
	b.idIsIdentity = req.IdentityField != "" && req.IdentityField == b.identity.field
	for _, f := range b.fields {
		if f.casefold && f.name == req.IdentityField {
			b.foldedIdentity = f.name
		}
	}
	rejected := false
	capt, err := cdpguard.Capture(ctx, req, "record page read in a separate session", func(ctx context.Context) ([]sdk.Record, string, time.Time, error) {
		res, err := b.readBack(ctx)
		rejected = res.rejected
		return res.records, res.unusable, res.at, err
	})
	if err == nil && !capt.Reachable && rejected {
		// The daemon reads no more for the effect: a credential the
		// application rejects is not tried again.
		capt.Code = sdk.CodeAccessRejected
	}
	return capt, err
}

// CheckParams binds a session's run parameters into the record URL and the
// identity without opening anything.
func (s *settings) CheckParams(_ context.Context, params map[string]string) error {
	_, err := s.bind(params)
	return err
}

// readBack runs one read-back of s (bound to a call's parameters) in a
// fresh browser context. The error is for the adapter's own faults (no
// Chromium to start); everything the page or the application does is in
// the result.
func (s *settings) readBack(ctx context.Context) (readResult, error) {
	if why := s.gate.admit(); why != "" {
		// A credential the application rejected is not tried again yet:
		// answered at once, without a browser.
		return readResult{unusable: why, at: time.Now(), rejected: true}, nil
	}
	deadline := readDeadline(ctx, s)
	// Starting Chromium is bounded by the read's deadline, inside the
	// caller's: on a loaded machine a start that ran to the caller's own
	// deadline answered too late, and the call failed instead of reporting
	// the timeout.
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t, release, err := s.browser.acquire(actx)
	if err != nil {
		if actx.Err() != nil {
			return readResult{unusable: "timed out starting the browser: the effect's deadline passed", at: time.Now()}, nil
		}
		return readResult{}, err
	}
	defer release()
	rb := newReadback(s)
	rb.noPageGuard, rb.noNetworkGuard = s.hooks.noPageGuard, s.hooks.noNetworkGuard
	return rb.read(ctx, t, deadline), nil
}

// readDeadline bounds a whole read-back: three navigation waits and the
// extraction, and always a little inside the caller's deadline.
func readDeadline(ctx context.Context, s *settings) time.Time {
	return cdpguard.ReadDeadline(ctx, 3*s.navTimeout+5*time.Second)
}
