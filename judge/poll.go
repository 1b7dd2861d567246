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

// PollOptions shape the settlement loop (JUDGE.md §6).
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
// verdict is returned, so a write that never settles is a failure. check
// performs one after read and judges it against the fixed baseline.
func Poll(ctx context.Context, clock Clock, opts PollOptions, check func(context.Context) Verdict) Verdict {
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
	var confirmed *Verdict
	var settleEnd time.Time
	for {
		v := check(ctx)
		now := clock.Now()
		if v.Decision == Confirmed {
			if opts.Settle <= 0 {
				return v
			}
			if confirmed == nil {
				settleEnd = now.Add(opts.Settle)
			}
			confirmed = &v
		} else if confirmed != nil {
			return v // a late duplicate or a vanished write inside the settle window
		}
		stop := deadline
		if confirmed != nil {
			stop = settleEnd
		}
		if !now.Before(stop) {
			return v
		}
		wait := min(interval, stop.Sub(now))
		if err := clock.Sleep(ctx, wait); err != nil {
			if confirmed != nil {
				// The settle window was not watched to its end: doubt.
				out := *confirmed
				out.Decision = Indeterminate
				out.ObservedCount, out.ExpectedCount = nil, nil
				out.Reasons = []Reason{{Code: ReasonSettleInterrupted,
					Message: "the settle window was cut short before it could rule out a late write: " + err.Error()}}
				out.Class = ClassIndeterminate
				return out
			}
			return v
		}
		interval = min(interval+interval/2, maxInterval)
	}
}
