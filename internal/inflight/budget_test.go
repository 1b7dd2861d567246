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
