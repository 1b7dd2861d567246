package inflight

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestBudget(t *testing.T) {
	b := New(100)
	r1, err := b.Reserve(context.Background(), 60)
	if err != nil || b.InUse() != 60 {
		t.Fatalf("first reservation: %v, in use %d", err, b.InUse())
	}
	// More than the whole budget: refused at once.
	start := time.Now()
	if _, err := b.Reserve(context.Background(), 101); status.Code(err) != codes.ResourceExhausted || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("over the budget: %v after %v", err, time.Since(start))
	}
	// Spent: waits MaxWait, then ResourceExhausted.
	start = time.Now()
	if _, err := b.Reserve(context.Background(), 50); status.Code(err) != codes.ResourceExhausted || time.Since(start) < MaxWait {
		t.Fatalf("spent budget: %v after %v", err, time.Since(start))
	}
	// A deadline shorter than MaxWait ends the wait with its own code.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, 50); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("deadline: %v", err)
	}
	// A waiter gets in as soon as room is given back.
	done := make(chan error, 1)
	go func() {
		r, err := b.Reserve(context.Background(), 90)
		if err == nil {
			r()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	r1()
	r1() // a second release gives nothing back twice
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if b.InUse() != 0 {
		t.Fatalf("in use %d after every release", b.InUse())
	}
	// No budget: everything passes.
	var none *Budget
	if r, err := none.Reserve(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	} else {
		r()
	}
}

// A Hold grows as a request arrives (waiting like Reserve), shrinks at
// once, and gives everything back on Release, once; TryHold never waits.
func TestHold(t *testing.T) {
	b := New(100)
	h, err := b.Hold(context.Background(), 10)
	if err != nil || b.InUse() != 10 {
		t.Fatalf("hold: %v, in use %d", err, b.InUse())
	}
	if err := h.Resize(context.Background(), 70); err != nil || b.InUse() != 70 || h.Size() != 70 {
		t.Fatalf("grown: %v, in use %d, size %d", err, b.InUse(), h.Size())
	}
	if err := h.Resize(context.Background(), 101); status.Code(err) != codes.ResourceExhausted || b.InUse() != 70 {
		t.Fatalf("grown past the whole budget: %v, in use %d", err, b.InUse())
	}
	if _, err := b.TryHold(40); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("TryHold of 40 with 30 free: %v", err)
	}
	if err := h.Resize(context.Background(), 20); err != nil || b.InUse() != 20 {
		t.Fatalf("shrunk: %v, in use %d", err, b.InUse())
	}
	other, err := b.TryHold(80)
	if err != nil || b.InUse() != 100 {
		t.Fatalf("TryHold of 80 with 80 free: %v, in use %d", err, b.InUse())
	}
	h.Release()
	h.Release()
	if err := h.Resize(context.Background(), 50); err != nil || b.InUse() != 80 {
		t.Fatalf("a released hold stays released: %v, in use %d", err, b.InUse())
	}
	other.Release()
	if b.InUse() != 0 {
		t.Fatalf("in use %d after every release", b.InUse())
	}
	var none *Budget
	nh, err := none.TryHold(1 << 40)
	if err != nil || nh.Resize(context.Background(), 1<<50) != nil {
		t.Fatalf("a nil budget holds nothing and refuses nothing: %v", err)
	}
	nh.Release()
}
