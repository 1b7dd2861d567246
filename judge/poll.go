package judge

import (
	"context"
	"time"
)

// Clock is the time source of Poll, injected so that tests and the daemon
// decide what time is.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, returning ctx's error in that case.
	Sleep(ctx context.Context, d time.Duration) error
}

// PollOptions shape the settlement loop (docs/contracts.md §6).
type PollOptions struct {
	// Timeout is the effect's settlement deadline (timeout_s).
	Timeout time.Duration
	// Settle, when positive, keeps reading for this long after the first
	// CONFIRMED and returns the first non-confirmed verdict seen.
	Settle time.Duration
	// Interval is the first wait between reads (default 50ms); each wait
	// grows by half up to MaxInterval (default 1s).
	Interval    time.Duration
	MaxInterval time.Duration
}

// Poll reads and judges until the verdict settles: at least one read; the
// first CONFIRMED is returned (or, with Settle, watched for Settle longer);
// otherwise reads repeat with a growing interval until Timeout and the last
// verdict is returned, so a write that never settles is a failure; a read
// whose system of record rejected the reader's credential
// (ReasonAccessRejected) ends the loop at once. check
// performs one after read and judges it against the fixed baseline.
func Poll(ctx context.Context, clock Clock, opts PollOptions, check func(context.Context) Verdict) Verdict {
	return PollGroup(ctx, clock, opts, func(ctx context.Context) []Verdict {
		return []Verdict{check(ctx)}
	})[0]
}

// PollGroup is Poll for effects that share every after read (one adapter):
// check judges one read for all of them and returns their verdicts; the
// group counts as CONFIRMED only when every verdict is. With Settle, the
// first read in the window where any verdict is not CONFIRMED is returned;
// a window cut short demotes the CONFIRMED verdicts to INDETERMINATE
// (SETTLE_INTERRUPTED).
func PollGroup(ctx context.Context, clock Clock, opts PollOptions, check func(context.Context) []Verdict) []Verdict {
	interval := opts.Interval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	maxInterval := opts.MaxInterval
	if maxInterval <= 0 {
		maxInterval = time.Second
	}
	start := clock.Now()
	deadline := start.Add(opts.Timeout)
	var confirmed []Verdict
	var settleEnd time.Time
	for {
		vs := check(ctx)
		if accessRejected(vs) {
			// Reading again would sign in again with a credential the
			// system of record rejects (and may lock the account).
			return vs
		}
		now := clock.Now()
		if allConfirmed(vs) {
			if opts.Settle <= 0 {
				return vs
			}
			if confirmed == nil {
				settleEnd = now.Add(opts.Settle)
			}
			confirmed = vs
		} else if confirmed != nil {
			return vs // a late duplicate or a vanished write inside the settle window
		}
		stop := deadline
		if confirmed != nil {
			stop = settleEnd
		}
		if !now.Before(stop) {
			return vs
		}
		wait := min(interval, stop.Sub(now))
		if err := clock.Sleep(ctx, wait); err != nil {
			if confirmed != nil {
				// The settle window was not watched to its end: doubt.
				out := make([]Verdict, len(confirmed))
				for i, v := range confirmed {
					v.Decision = Indeterminate
					v.ObservedCount, v.ExpectedCount = nil, nil
					v.Reasons = []Reason{{Code: ReasonSettleInterrupted,
						Message: "the settle window was cut short before it could rule out a late write: " + err.Error()}}
					v.Class = ClassIndeterminate
					out[i] = v
				}
				return out
			}
			return vs
		}
		interval = min(interval+interval/2, maxInterval)
	}
}

// accessRejected reports whether a verdict says the system of record
// rejected the reader's credential (ReasonAccessRejected).
func accessRejected(vs []Verdict) bool {
	for _, v := range vs {
		if v.Decision == Indeterminate && len(v.Reasons) > 0 && v.Reasons[0].Code == ReasonAccessRejected {
			return true
		}
	}
	return false
}

func allConfirmed(vs []Verdict) bool {
	for _, v := range vs {
		if v.Decision != Confirmed {
			return false
		}
	}
	return true
}
