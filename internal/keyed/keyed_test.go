package keyed

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestLockIsExclusivePerKey runs many goroutines over two keys: within a
// key no two ever hold the lock together, and nothing is left behind.
func TestLockIsExclusivePerKey(t *testing.T) {
	t.Parallel()
	var k Mutex
	held := map[string]int{}
	var seen sync.Mutex
	var wg sync.WaitGroup
	for i := range 200 {
		key := []string{"a", "b"}[i%2]
		wg.Go(func() {
			unlock, err := k.Lock(context.Background(), key)
			if err != nil {
				t.Errorf("Lock: %v", err)
				return
			}
			defer unlock()
			seen.Lock()
			held[key]++
			n := held[key]
			seen.Unlock()
			if n != 1 {
				t.Errorf("%d holders of %q at once", n, key)
			}
			seen.Lock()
			held[key]--
			seen.Unlock()
		})
	}
	wg.Wait()
	if n := k.Len(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

// TestLockWaiterHonoursContext: a waiter whose context is canceled while
// another holds the key returns the context's error without the lock, and
// so does one whose context had already ended; another key is free
// meanwhile; the holder keeps the lock, the next waiter gets it once
// released, and nothing is left behind.
func TestLockWaiterHonoursContext(t *testing.T) {
	t.Parallel()
	var k Mutex
	unlock, err := k.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		u, err := k.Lock(ctx, "a")
		if u != nil {
			u()
		}
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled waiter: err %v, want context.Canceled", err)
	}
	// Another key is free meanwhile.
	ub, err := k.Lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("other key: %v", err)
	}
	ub()
	// The holder still holds "a": a waiter whose context already ended
	// cannot take it.
	expired, cancelExpired := context.WithCancel(context.Background())
	cancelExpired()
	if u, err := k.Lock(expired, "a"); !errors.Is(err, context.Canceled) || u != nil {
		t.Fatalf("waiter on a held key with an ended context: unlock %v, err %v", u != nil, err)
	}
	got := make(chan struct{})
	go func() {
		u, err := k.Lock(context.Background(), "a")
		if err != nil {
			t.Errorf("waiter after release: %v", err)
			close(got)
			return
		}
		close(got)
		u()
	}()
	unlock()
	<-got
	for k.Len() != 0 {
		// The last waiter releases right after signalling; wait for it.
		u, err := k.Lock(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		u()
	}
}
