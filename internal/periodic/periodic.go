// Package periodic runs the daemon's background jobs (orphan cleanup, the
// store's health watch, ledger checkpoints) on a ticker until the daemon
// stops. A leaf: standard library only.
package periodic

import (
	"context"
	"time"
)

// Every calls job every interval until ctx ends, first one interval after
// it is called, and returns when ctx ends. The runs happen on the caller's
// goroutine one after another, so they never overlap; a run that outlasts
// the interval is followed at once by the next, and the ticks it missed
// are dropped (as a time.Ticker drops them). interval must be positive.
func Every(ctx context.Context, interval time.Duration, job func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		job(ctx)
	}
}
