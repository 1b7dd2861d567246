package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: the job runs repeatedly, never before the first interval, and
// Every returns once the context ends, with no run after.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int32
	done := make(chan struct{})
	start := time.Now()
	var first atomic.Int64
	go func() {
		defer close(done)
		Every(ctx, 10*time.Millisecond, func(context.Context) {
			if runs.Add(1) == 1 {
				first.Store(int64(time.Since(start)))
			}
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs in 5s, want at least 3", runs.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Duration(first.Load()); d < 10*time.Millisecond {
		t.Errorf("first run after %v, want one interval (10ms) at least", d)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return within 5s of its context ending")
	}
	after := runs.Load()
	time.Sleep(50 * time.Millisecond)
	if n := runs.Load(); n != after {
		t.Errorf("%d runs after Every returned, want none", n-after)
	}
}
