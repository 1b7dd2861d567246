package bolt

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"
)

// Group commit. bbolt runs one writing transaction at a time and, unless
// NoSync, fsyncs each one: N concurrent sessions pay N fsyncs in a row. The
// session writes (create, finish, re-verify, receipts, ledger appends) go
// through batch instead, which coalesces them: a writer that finds no
// commit running commits at once (no added latency when alone); writers
// arriving meanwhile queue, and when the running commit ends the first of
// them commits the whole queue in one transaction, so one fsync.
//
// Every function handed to batch may run more than once: when one function
// of a group returns an error the whole transaction is rolled back, the
// others run again as a group and the failing one runs alone (its error,
// or its success, is then its answer). A function must therefore do
// nothing outside the transaction but assign its results (which a later
// run overwrites); all the session paths' closures are of that kind. A
// ledger entry or a counter written inside the transaction is rolled back
// with it, so a re-run never doubles one.
type groupCommit struct {
	mu    sync.Mutex
	busy  bool
	queue []*groupCall
	// commits counts the write transactions committed through batch
	// (tests check that a group shares one).
	commits atomic.Int64
	// solo turns grouping off (each write its own transaction, as before
	// group commit): the benchmarks' point of comparison.
	solo bool
}

type groupCall struct {
	fn    func(*bbolt.Tx) error
	err   error
	done  chan struct{}
	group []*groupCall // set when this call is promoted to commit a group
}

// batch runs fn in a write transaction shared with the writers that queue
// while another commit runs. A call whose ctx ends while it is still
// queued leaves the queue with ctx's error; once its group has started it
// waits for the group's answer.
func (s *Store) batch(ctx context.Context, fn func(*bbolt.Tx) error) error {
	g := &s.group
	if g.solo {
		return s.update(ctx, fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &groupCall{fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	var calls []*groupCall
	if g.busy {
		g.queue = append(g.queue, c)
		g.mu.Unlock()
		if err := g.wait(ctx, c); err != nil {
			return err
		}
		if c.group == nil {
			return c.err // committed (or refused) by another writer's group
		}
		calls = c.group // promoted: commit the queue this call heads
	} else {
		g.busy = true
		g.mu.Unlock()
		calls = []*groupCall{c}
	}
	s.commitGroup(calls)
	for _, o := range calls[1:] {
		close(o.done)
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue
		g.queue = nil
		next[0].group = next
		g.mu.Unlock()
		close(next[0].done)
	} else {
		g.busy = false
		g.mu.Unlock()
	}
	return c.err
}

// wait waits until c is done or promoted, or until ctx ends while c is
// still in the queue, which it then leaves.
func (g *groupCommit) wait(ctx context.Context, c *groupCall) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for i, q := range g.queue {
		if q == c {
			g.queue = slices.Delete(g.queue, i, i+1)
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	g.mu.Unlock()
	<-c.done // taken by a group already: its answer comes soon
	return nil
}

// commitGroup runs calls in one transaction and sets each call's error.
func (s *Store) commitGroup(calls []*groupCall) {
	if len(calls) == 1 {
		calls[0].err = s.guarded(calls[0].fn)
		if calls[0].err == nil {
			s.group.commits.Add(1)
		}
		return
	}
	failed := -1
	err := s.guarded(func(tx *bbolt.Tx) error {
		for i, c := range calls {
			if err := c.fn(tx); err != nil {
				failed = i
				return err
			}
		}
		return nil
	})
	if failed < 0 {
		// Committed together, or the commit itself failed (and nothing of
		// the group is stored): the same answer for all.
		if err == nil {
			s.group.commits.Add(1)
		}
		for _, c := range calls {
			c.err = err
		}
		return
	}
	// One function refused and the transaction was rolled back: the others
	// commit again without it, then it runs alone for its own answer.
	rest := append(append([]*groupCall(nil), calls[:failed]...), calls[failed+1:]...)
	s.commitGroup(rest)
	s.commitGroup(calls[failed : failed+1])
}
