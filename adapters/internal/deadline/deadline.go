// Package deadline bounds an adapter's read inside its caller's deadline.
// Over the plugin protocol a capture's context carries the daemon's
// deadline for the call; a read that runs to that very instant answers
// "unreachable" just as the caller stops listening, and on a loaded
// machine the answer arrives too late, so the call fails instead of
// reporting the outage. A read therefore ends a little earlier.
package deadline

import (
	"context"
	"time"
)

// Margin is the most of the caller's deadline a read leaves for its answer
// to travel back; a read with little time left leaves a tenth of it.
const Margin = 2 * time.Second

// Inside is ctx's deadline less the margin (Margin, or a tenth of the time
// left when that is less); ok is false when ctx has no deadline.
func Inside(ctx context.Context) (d time.Time, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return dl.Add(-min(Margin, time.Until(dl)/10)), true
}

// Within is the deadline of a read that may take budget from now: budget
// from now, or Inside ctx's deadline when that comes first.
func Within(ctx context.Context, budget time.Duration) time.Time {
	d := time.Now().Add(budget)
	if inner, ok := Inside(ctx); ok && inner.Before(d) {
		return inner
	}
	return d
}
