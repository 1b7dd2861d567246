package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/store"
)

// Every daemon serving a store holds the replica lease: a session-level
// PostgreSQL advisory lock (lockReplicas) on a connection of its own, held
// shared while it serves and released when its process or connection ends.
// --rotate-keys takes it exclusively for its Bind, so it refuses while
// another replica runs, and a replica that starts during a rotation waits
// for it and then binds against the new keys. Between starts, RecheckKeys
// (on a timer) and every ledger append (in its transaction) compare the
// key ids the store records with the ones this daemon bound it with.

// lockReplicas is the replica lease.
const lockReplicas int64 = 0x7665726966000005

// unlockTimeout bounds the statement that releases the lease before its
// connection closes (dropLease); the close releases it in any case.
const unlockTimeout = 10 * time.Second

// ErrReplicaRunning says that --rotate-keys found another replica holding
// the lease.
var ErrReplicaRunning = errors.New("another replica is serving this store (it holds the replica lease): keys are rotated only while no other replica runs")

// takeLease takes the replica lease before Bind: exclusively for a
// rotation (ErrReplicaRunning when another replica holds it), shared
// otherwise (waiting while a rotation holds it). A lease already held is
// kept.
func (s *Store) takeLease(ctx context.Context, rotate bool) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.lease == nil {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("taking the replica lease: %w", err)
		}
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock_shared($1)", lockReplicas); err != nil {
			c.Release()
			return fmt.Errorf("taking the replica lease: %w", err)
		}
		s.lease = c
	}
	if !rotate {
		return nil
	}
	// Exclusive: held by no other session. Our own shared hold goes first,
	// or the upgrade would wait for itself.
	if _, err := s.lease.Exec(ctx, "SELECT pg_advisory_unlock_shared($1)", lockReplicas); err != nil {
		return s.dropLease(fmt.Errorf("taking the replica lease: %w", err))
	}
	var got bool
	if err := s.lease.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", lockReplicas).Scan(&got); err != nil {
		return s.dropLease(fmt.Errorf("taking the replica lease: %w", err))
	}
	if !got {
		return s.dropLease(ErrReplicaRunning)
	}
	return nil
}

// shareLease turns the exclusive lease of a finished rotation into the
// shared one every serving replica holds.
func (s *Store) shareLease(ctx context.Context) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.lease == nil {
		return nil
	}
	if _, err := s.lease.Exec(ctx, "SELECT pg_advisory_lock_shared($1)", lockReplicas); err != nil {
		return fmt.Errorf("sharing the replica lease: %w", err)
	}
	if _, err := s.lease.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockReplicas); err != nil {
		return fmt.Errorf("sharing the replica lease: %w", err)
	}
	return nil
}

// dropLease releases the lease's connection (its locks go with it) and
// returns err. The caller holds leaseMu.
func (s *Store) dropLease(err error) error {
	if s.lease != nil {
		// The locks are released by a statement first: closing the
		// connection ends its server process only some time after the
		// close returns, and until then another replica (a rotation
		// started right after this one stopped) would still find the
		// lease held. A connection that is already broken holds nothing
		// once its process ends, so the close alone does for it.
		ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		_, _ = s.lease.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		cancel()
		_ = s.lease.Conn().Close(context.Background())
		s.lease.Release()
		s.lease = nil
	}
	return err
}

// releaseLease is dropLease at Close.
func (s *Store) releaseLease() {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	_ = s.dropLease(nil)
}

// RecheckKeys reads the key ids the store records and answers a
// *store.KeyMismatchError (Running) when they are no longer those Bind
// recorded or accepted (nil before Bind).
func (s *Store) RecheckKeys(ctx context.Context) error {
	want := s.bound.Load()
	if want == nil {
		return nil
	}
	have, _, err := readKeys(ctx, s.pool)
	if err != nil {
		return err
	}
	return s.keysChanged(have)
}

// keysChanged is the error for recorded key ids have, nil when they are
// the bound ones (or nothing is bound yet).
func (s *Store) keysChanged(have store.Keys) error {
	want := s.bound.Load()
	if want == nil || have == *want {
		return nil
	}
	return &store.KeyMismatchError{Store: "postgres " + s.where, Have: have, Want: *want, Running: true}
}

var _ store.KeyWatcher = (*Store)(nil)
