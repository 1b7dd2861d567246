package file

import (
	"context"
	"testing"
	"time"

	"github.com/verifierd/verifierd/adapters/internal/deadline"
)

// TestWithDeadline: a read runs to a little inside the caller's deadline
// (which the plugin protocol hands the adapter in ctx), so that a read out
// of time reports the outage before the caller stops listening; without
// one, to the capture's Timeout or defaultTimeout.
func TestWithDeadline(t *testing.T) {
	t.Parallel()
	bounded := func(t *testing.T, ctx context.Context, timeout time.Duration) (time.Time, time.Time, time.Time) {
		t.Helper()
		before := time.Now()
		c, cancel := withDeadline(ctx, timeout)
		defer cancel()
		after := time.Now()
		d, ok := c.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		return before, d, after
	}
	t.Run("inside the caller's deadline", func(t *testing.T) {
		for _, timeout := range []time.Duration{0, time.Second, time.Hour} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			dl, _ := ctx.Deadline()
			if _, d, _ := bounded(t, ctx, timeout); !d.Equal(dl.Add(-deadline.Margin)) {
				t.Errorf("timeout %v: deadline %v; want %v before the caller's %v", timeout, d, deadline.Margin, dl)
			}
			cancel()
		}
	})
	t.Run("the capture's timeout without a caller deadline", func(t *testing.T) {
		before, d, after := bounded(t, t.Context(), time.Minute)
		if d.Before(before.Add(time.Minute)) || d.After(after.Add(time.Minute)) {
			t.Errorf("deadline %v; want a minute from the call", d)
		}
	})
	t.Run("no timeout, no caller deadline", func(t *testing.T) {
		before, d, after := bounded(t, t.Context(), 0)
		if d.Before(before.Add(defaultTimeout)) || d.After(after.Add(defaultTimeout)) {
			t.Errorf("deadline %v; want defaultTimeout (%v) from the call", d, defaultTimeout)
		}
	})
}
