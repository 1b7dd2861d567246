// Package inflight bounds the bytes of requests the daemon holds at once.
//
// Every gRPC call and every HTTP request body reserves its size from one
// Budget before anything decodes it, and gives it back when the call ends.
// When the budget is spent a request waits a moment for others to finish
// (at most MaxWait, and never past its own deadline), then is refused with
// ResourceExhausted (HTTP 429): excess load waits or fails, it never grows
// the heap past the budget. docs/operations.md describes the flag
// (--max-inflight-bytes) and how the budget relates to memory.
package inflight

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultBytes is the default budget: 256 MiB of requests in flight.
const DefaultBytes = 256 << 20

// MaxWait is the longest a request waits for room in the budget.
const MaxWait = time.Second

// Budget is a count of bytes reserved by requests in flight. A nil Budget
// reserves nothing (no limit).
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed and replaced whenever bytes are given back
}

// New returns a budget of limit bytes; limit <= 0 returns nil (no limit).
func New(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit, freed: make(chan struct{})}
}

// Limit is the budget's size in bytes (0 for a nil Budget).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Reserve takes n bytes from the budget, waiting while it is spent until
// ctx ends or MaxWait passes. The error is a gRPC status: ResourceExhausted
// when the budget stayed spent (or n is more than the whole budget), the
// context's code when ctx ended first. release gives the bytes back; call
// it exactly once.
func (b *Budget) Reserve(ctx context.Context, n int64) (release func(), err error) {
	if b == nil || n <= 0 {
		return func() {}, nil
	}
	if n > b.limit {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"the request's %d bytes are more than the daemon's budget of %d bytes in flight (--max-inflight-bytes); send a smaller request", n, b.limit))
	}
	var timer *time.Timer
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			var once sync.Once
			return func() { once.Do(func() { b.give(n) }) }, nil
		}
		freed := b.freed
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(MaxWait)
			defer timer.Stop() //nolint:gocritic // runs once: the timer is made on the first wait only
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf(
				"the daemon is holding its budget of %d bytes of requests in flight (--max-inflight-bytes); retry shortly", b.limit))
		}
	}
}

func (b *Budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
