package file

import (
	"context"
	"testing"
	"time"
)

// TestWithDeadline: a read is bounded by its capture's Timeout, and always
// answers a little inside the caller's own deadline (which the plugin
// protocol hands the adapter in ctx), so that a read out of time reports
// the outage before the caller stops listening.
func TestWithDeadline(t *testing.T) {
	t.Parallel()
	within := func(t *testing.T, ctx context.Context, timeout time.Duration) (time.Time, time.Time, time.Time) {
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
	t.Run("the capture's timeout, inside a later caller deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		before, d, after := within(t, ctx, time.Minute)
		if d.Before(before.Add(time.Minute)) || d.After(after.Add(time.Minute)) {
			t.Errorf("deadline %v; want a minute from the call", d)
		}
	})
	t.Run("inside the caller's deadline when it comes first", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		dl, _ := ctx.Deadline()
		_, d, _ := within(t, ctx, time.Hour)
		if !d.Equal(dl.Add(-answerMargin)) {
			t.Errorf("deadline %v; want %v before the caller's %v", d, answerMargin, dl)
		}
	})
	t.Run("no timeout, no caller deadline", func(t *testing.T) {
		before, d, after := within(t, t.Context(), 0)
		if d.Before(before.Add(defaultTimeout)) || d.After(after.Add(defaultTimeout)) {
			t.Errorf("deadline %v; want defaultTimeout (%v) from the call", d, defaultTimeout)
		}
	})
	t.Run("no timeout, the caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		dl, _ := ctx.Deadline()
		_, d, _ := within(t, ctx, 0)
		if !d.Equal(dl.Add(-answerMargin)) {
			t.Errorf("deadline %v; want %v before the caller's %v", d, answerMargin, dl)
		}
	})
}
