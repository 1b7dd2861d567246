package testservers

import (
	"context"
	"sync"
	"time"
)

// Setting is one switch a test flips while its server serves (a mode, a
// fault, an outage): a value behind its own lock, read by the server's
// handlers on every request. The zero value holds T's zero value.
type Setting[T any] struct {
	mu sync.Mutex
	v  T
}

// Set replaces the value; requests that start after it see the new one.
func (s *Setting[T]) Set(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = v
}

// Get returns the value.
func (s *Setting[T]) Get() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// Hold waits d before a server answers (a slow server, a lagging replica)
// and reports whether the wait ran out; it returns false early when ctx,
// the request's context, ends because the client gave up.
func Hold(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
