// Package inflight bounds the bytes of requests the daemon holds at once.
//
// Every authenticated gRPC call and HTTP request body holds its bytes from
// one Budget before anything decodes them (an HTTP body as it arrives, a
// gRPC message its method's bound while it arrives: Hold), and gives them
// back when the call ends.
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
	h, err := b.Hold(ctx, n)
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}

// Hold is a reservation whose size may change while a request arrives:
// a body draws on the budget as its bytes come in (Resize), and gives
// back what it no longer needs. A Hold of a nil Budget holds nothing.
type Hold struct {
	b        *Budget
	mu       sync.Mutex
	n        int64
	released bool
}

// Hold takes n bytes (n may be 0) as Reserve does, as a Hold.
func (b *Budget) Hold(ctx context.Context, n int64) (*Hold, error) {
	h := &Hold{b: b}
	if err := h.Resize(ctx, n); err != nil {
		return nil, err
	}
	return h, nil
}

// TryHold takes n bytes now or not at all: it never waits, for a caller
// that must not block (gRPC's tap handler runs on the connection's reading
// goroutine). A spent budget is ResourceExhausted at once.
func (b *Budget) TryHold(n int64) (*Hold, error) {
	h := &Hold{b: b}
	if b == nil || n <= 0 {
		return h, nil
	}
	if err := b.take(context.Background(), n, n, false); err != nil {
		return nil, err
	}
	h.n = n
	return h, nil
}

// Budget is the budget h holds from (nil for no budget).
func (h *Hold) Budget() *Budget { return h.b }

// Size is the bytes the hold has now.
func (h *Hold) Size() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Resize makes the hold n bytes: growing waits for room as Reserve does
// (the same errors), shrinking gives bytes back at once. A released hold
// stays released.
func (h *Hold) Resize(ctx context.Context, n int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b == nil || h.released {
		return nil
	}
	n = max(n, 0)
	switch {
	case n > h.n:
		if err := h.b.take(ctx, n-h.n, n, true); err != nil {
			return err
		}
	case n < h.n:
		h.b.give(h.n - n)
	}
	h.n = n
	return nil
}

// Release gives every held byte back; later calls do nothing.
func (h *Hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b == nil || h.released {
		return
	}
	h.released = true
	if h.n > 0 {
		h.b.give(h.n)
	}
	h.n = 0
}

// take adds n bytes to the budget's use for a request that will then hold
// total bytes, waiting while the budget is spent when wait says so.
func (b *Budget) take(ctx context.Context, n, total int64, wait bool) error {
	if total > b.limit {
		return status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"the request's %d bytes are more than the daemon's budget of %d bytes in flight (--max-inflight-bytes); send a smaller request", total, b.limit))
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
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		if !wait {
			return b.spent()
		}
		if timer == nil {
			timer = time.NewTimer(MaxWait)
			defer timer.Stop() //nolint:gocritic // runs once: the timer is made on the first wait only
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-timer.C:
			return b.spent()
		}
	}
}

func (b *Budget) spent() error {
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(
		"the daemon is holding its budget of %d bytes of requests in flight (--max-inflight-bytes); retry shortly", b.limit))
}

func (b *Budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
