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

// Adapter reads marked fields off the application's screen.
type Adapter struct {
	settings sdk.Settings[settings]
	// Binding binds a call's run parameters into the re-navigation and the
	// fields (bound), and answers CheckParams with it.
	sdk.Binding[*settings]
}

var _ sdk.Adapter = (*Adapter)(nil)

// New returns an unconfigured adapter; it is the factory for plugin.Serve.
func New() sdk.Adapter {
	a := &Adapter{}
	a.Binding = a.bound
	return a
}

// Info declares the mechanism. Before Configure it claims the strongest
// tier an on-screen read can have (3, the kind's floor); after Configure it
// reports the tier the configuration's mechanism gives, 3 or 4, and the
// daemon keeps the weaker of the two. Absence is not proof: a screen can
// fail to show a record that exists.
func (a *Adapter) Info() sdk.Info {
	tier := sdk.TierReacquiredState
	if s, err := a.settings.Load(); err == nil {
		tier = s.tier
	}
	return sdk.Info{Kind: Kind, Tier: tier, AbsenceNotProof: true, Description: Description}
}

// Configure checks the section; each call binds its run parameters into the
// re-navigation and the fields. It opens nothing.
func (a *Adapter) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	s, err := parseSettings(req)
	if err != nil {
		return err
	}
	if _, err := modelPath(); err != nil && hasRegion(s) {
		return &sdk.ConfigError{Path: Kind + ".fields", Message: err.Error()}
	}
	if s.display != "" {
		if _, err := xwdPath(); err != nil {
			return &sdk.ConfigError{Path: Kind + ".screen.display", Message: err.Error()}
		}
	}
	a.settings.Store(s)
	return nil
}

func hasRegion(s *settings) bool {
	for _, f := range s.fields {
		if f.region != nil {
			return true
		}
	}
	return false
}

// bound is the configuration with one call's run parameters bound.
func (a *Adapter) bound(params map[string]string) (*settings, error) {
	_, s, err := sdk.Bound(&a.settings, params, (*settings).bind)
	return s, err
}

// TestConnection reaches the application's browser. For tier 3 it does one
// read-back (re-navigation under the read-only guards); for tier 4 it only
// finds the application's tab, since the screen the save will leave does
// not exist yet.
func (a *Adapter) TestConnection(ctx context.Context, req sdk.TestRequest) (sdk.TestResult, error) {
	return a.Test(ctx, req, a.test)
}

// test is TestConnection with the run parameters bound into s.
func (a *Adapter) test(ctx context.Context, s *settings) (sdk.TestResult, error) {
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
	res, err := a.readBack(ctx, s)
	latency := time.Since(start)
	if err != nil {
		return sdk.TestResult{}, err
	}
	if res.unusable != "" {
		return sdk.TestResult{Message: "on-screen read-back unusable: " + res.unusable, Latency: latency}, nil
	}
	what := "read the screen the save left (tier 4, screen consistency only)"
	if s.tier == sdk.TierReacquiredState {
		what = fmt.Sprintf("re-opened the record in %d actions and read it (tier 3, reacquired state)", len(s.actions))
	}
	return sdk.TestResult{Reachable: true, Latency: latency,
		Message: fmt.Sprintf("reached the application's browser, %s: %d record(s); an on-screen read is a consistency check, not a read of the system of record", what, len(res.records))}, nil
}

// CaptureBefore reads the record as the screen shows it before the step.
// A tier-4 read has no before state: the screen the save will leave does
// not exist yet, and the form before it shows nothing of the record, so
// the baseline is unreachable and a contract that needs one (a change
// claim, count_new_only) is refused at Begin.
func (a *Adapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	s, err := a.bound(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	if s.tier == sdk.TierScreenConsistency {
		return sdk.Unreachable("on-screen read-back of the save's own surface (tier 4) has no before state: a screen shows state, not a change; a contract that needs a baseline cannot be judged on it"), nil
	}
	return a.capture(ctx, req, s)
}

// CaptureAfter reads the record again.
func (a *Adapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	s, err := a.bound(req.Params)
	if err != nil {
		return sdk.Capture{}, err
	}
	return a.capture(ctx, req, s)
}

func (a *Adapter) capture(ctx context.Context, req sdk.CaptureRequest, s *settings) (sdk.Capture, error) {
	return cdpguard.Capture(ctx, req, "on-screen read-back", func(ctx context.Context) ([]sdk.Record, string, time.Time, error) {
		res, err := a.readBack(ctx, s)
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
func (a *Adapter) readBack(ctx context.Context, s *settings) (readOutcome, error) {
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
