package onscreen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
	"github.com/verifierd/verifierd/sdk"
)

// Kind is the deployment's `kind:` for this adapter.
const Kind = "onscreen"

// Description is what the adapter says about itself, in GetInfo.
const Description = "reads the acting application's own screen (a Chromium the automation drives): tier 3 when it re-opens the record by a declared re-navigation, tier 4 when it reads the screen the save left; a consistency check, never a read of the system of record"

// Adapter is the onscreen adapter as Define builds it; its tests Load the
// settings Configure stored.
type Adapter = sdk.Defined[settings]

// info is what the adapter says about itself before Configure: the
// strongest tier an on-screen read can have (3, the kind's floor). Its
// settings report the tier their mechanism gives (Tier), 3 or 4, and the
// daemon keeps the weaker. Absence is not proof: a screen can fail to show
// a record that exists.
var info = sdk.Info{Kind: Kind, Tier: sdk.TierReacquiredState, AbsenceNotProof: true, Description: Description}

// New returns an unconfigured adapter; it is the factory for plugin.Serve.
// Configure checks the section and opens nothing; each call binds its run
// parameters into the re-navigation and the fields.
var New = sdk.Define(info, configure)

// The settings take up Define's optional parts: a tier of their own, a
// check of a session's parameters at Begin, and an after-read that differs
// from the baseline read (a tier-4 baseline is unreachable).
var (
	_ sdk.TierReporter = (*settings)(nil)
	_ sdk.ParamChecker = (*settings)(nil)
	_ sdk.AfterReader  = (*settings)(nil)
)

// Tier is the tier of the configured mechanism: 3 when the read re-opens
// the record, 4 when it reads the screen the save left.
func (s *settings) Tier() sdk.Tier { return s.tier }

// CheckParams binds params as a call would, without reading: a run
// parameter the re-navigation or a field needs and the run does not
// supply, or one that cannot stand where it goes, is refused at Begin.
func (s *settings) CheckParams(_ context.Context, params map[string]string) error {
	_, err := s.bind(params)
	return err
}

// TestConnection reaches the application's browser. For tier 3 it does one
// read-back (re-navigation under the read-only guards); for tier 4 it only
// finds the application's tab, since the screen the save will leave does
// not exist yet.
func (s *settings) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	b, err := s.bind(req.Params)
	if err != nil {
		return sdk.TestResult{}, err
	}
	return b.test(ctx)
}

// test is TestConnection with the run parameters bound into s.
func (s *settings) test(ctx context.Context) (sdk.TestResult, error) {
	start := time.Now()
	if s.tier == sdk.TierScreenConsistency {
		// Before the save the screen shows the form, not the record:
		// reach the browser and the application's tab, read nothing.
		err := reach(ctx, s)
		latency := time.Since(start)
		if ue, ok := errors.AsType[*unusableError](err); ok {
			return sdk.TestResult{Message: "on-screen read-back unusable: " + ue.reason, Latency: latency}, nil
		}
		if err != nil {
			// An unusable surface is the preflight's answer, not a failure.
			return sdk.TestResult{Message: "on-screen read-back unusable: " + err.Error(), Latency: latency}, nil //nolint:nilerr // data, not an error
		}
		return sdk.TestResult{Reachable: true, Latency: latency,
			Message: "reached the application's browser and its tab; the fields are read from the screen the save leaves (tier 4, screen consistency only), not the system of record"}, nil
	}
	res, err := s.readBack(ctx)
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{}, err
	}
	if res.unusable != "" {
		return sdk.TestResult{Message: "on-screen read-back unusable: " + res.unusable, Latency: latency}, nil
	}
	return sdk.TestResult{Reachable: true, Latency: latency,
		Message: fmt.Sprintf("reached the application's browser, re-opened the record in %d actions and read it (tier 3, reacquired state): %d record(s); an on-screen read is a consistency check, not a read of the system of record", len(s.actions), len(res.records))}, nil
}

// Read answers CaptureBefore: the record as the screen shows it before the
// step. A tier-4 read has no before state: the screen the save will leave
// does not exist yet, and the form before it shows nothing of the record,
// so the baseline is unreachable and a contract that needs one (a change
// claim, count_new_only) is refused at Begin. So is a tier-3 baseline of a
// list (row_selector) that shows rows: every row carries the page's
// address as its id, so no after row could be told new, nor a vanished row
// lost (a save that replaced another record's row would pass
// forbid_collateral_loss); only a list in its empty state is a baseline.
func (s *settings) Read(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	b, err := s.bind(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	if b.tier == sdk.TierScreenConsistency {
		return sdk.Unreachable("on-screen read-back of the save's own surface (tier 4) has no before state: a screen shows state, not a change; a contract that needs a baseline cannot be judged on it"), nil
	}
	if b.rows == "" {
		return b.capture(ctx, req)
	}
	return cdpguard.Capture(ctx, req, "on-screen read-back", func(ctx context.Context) ([]sdk.Record, string, time.Time, error) {
		res, err := b.readBack(ctx)
		if err == nil && res.unusable == "" && len(res.records) > 0 {
			return nil, fmt.Sprintf("the list shows %d row(s) before the step, and every row of a list carries the page's address as its id: no row after the step can be told new, nor a vanished row lost, so a contract that needs a baseline (count_new_only, forbid_collateral_loss, new_only, exact_new_set) cannot be judged on it; check values with forbid_collateral_loss: false, or re-open a page that shows the record alone", len(res.records)), res.at, nil
		}
		return res.records, res.unusable, res.at, err
	})
}

// ReadAfter answers CaptureAfter: the record read again, at either tier.
func (s *settings) ReadAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	b, err := s.bind(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	return b.capture(ctx, req)
}

// capture is one read of s, bound to the call's run parameters.
func (s *settings) capture(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return cdpguard.Capture(ctx, req, "on-screen read-back", func(ctx context.Context) ([]sdk.Record, string, time.Time, error) {
		res, err := s.readBack(ctx)
		return res.records, res.unusable, res.at, err
	})
}

// readOutcome is one read-back: records, or why it is unusable.
type readOutcome struct {
	records  []sdk.Record
	raw      map[string]string
	unusable string
	at       time.Time
}

// readBack runs one read. The error is for the adapter's own faults (no
// Tesseract); everything the screen shows is in the outcome.
func (s *settings) readBack(ctx context.Context) (readOutcome, error) {
	rctx, cancel := context.WithDeadline(ctx, readDeadline(ctx, s))
	defer cancel()
	res, err := read(rctx, s)
	at := time.Now()
	var ue *unusableError
	switch {
	case errors.As(err, &ue):
		return readOutcome{unusable: ue.reason, at: at}, nil
	case err != nil && rctx.Err() != nil:
		return readOutcome{unusable: "the read-back's deadline passed", at: at}, nil
	case err != nil:
		return readOutcome{}, err
	}
	return readOutcome{records: res.records, raw: res.raw, at: at}, nil
}

// readDeadline bounds one read: every action's wait and the reading, and a
// little inside the caller's deadline.
func readDeadline(ctx context.Context, s *settings) time.Time {
	return cdpguard.ReadDeadline(ctx, time.Duration(len(s.actions)+1)*s.navTimeout+5*time.Second)
}
