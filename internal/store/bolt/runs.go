package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

var (
	// bucketRuns holds each run's record (sealed for store.PlaceRun).
	bucketRuns = []byte("runs")
	// bucketRunHolds holds, per session a run holds, the run's last seal
	// (unix nanoseconds, big-endian; 0 while the run is open) followed by
	// the run id: the retention cleanups keep such a session (held).
	bucketRunHolds = []byte("run_holds")
)

// runBuckets are created at open with the session buckets.
var runBuckets = [][]byte{bucketRuns, bucketRunHolds}

func (s *Store) openRun(id string, sealed []byte) ([]byte, error) {
	v, ok := s.seal.Open(store.PlaceRun(id), sealed)
	if !ok {
		return nil, &store.IntegrityError{What: "run " + id}
	}
	return bytes.Clone(v), nil
}

// CreateRun records a new run with fn's ledger entries, or returns the
// record stored under id (created false).
func (s *Store) CreateRun(ctx context.Context, id string, rec []byte, fn func(store.Ledger) error) (stored []byte, created bool, err error) {
	err = s.batch(ctx, func(tx *bbolt.Tx) error {
		created = false
		b := tx.Bucket(bucketRuns)
		if have := b.Get([]byte(id)); have != nil {
			v, err := s.openRun(id, have)
			stored = v
			return err
		}
		if err := fn(s.newLedger(tx)); err != nil {
			return err
		}
		stored, created = rec, true
		return b.Put([]byte(id), s.seal.Seal(store.PlaceRun(id), rec))
	})
	return stored, created, err
}

// Run returns a run's record.
func (s *Store) Run(ctx context.Context, id string) (rec []byte, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		have := tx.Bucket(bucketRuns).Get([]byte(id))
		if have == nil {
			return store.ErrRunNotFound
		}
		rec, err = s.openRun(id, have)
		return err
	})
	return rec, err
}

// UpdateRun stores what fn makes of a run's record, in the store's single
// writing transaction (which serializes every update).
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error)) (out []byte, err error) {
	err = s.batch(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		have := b.Get([]byte(id))
		if have == nil {
			return store.ErrRunNotFound
		}
		cur, err := s.openRun(id, have)
		if err != nil {
			return err
		}
		next, change, err := fn(s.newLedger(tx), cur)
		if err != nil {
			return err
		}
		out = cur
		if next != nil {
			out = next
			if err := b.Put([]byte(id), s.seal.Seal(store.PlaceRun(id), next)); err != nil {
				return err
			}
		}
		return holdSessions(tx, id, change, time.Now())
	})
	return out, err
}

// holdSessions records the sessions a run holds and, when the run was
// sealed, stamps every one it holds with the seal's time.
func holdSessions(tx *bbolt.Tx, run string, change store.RunChange, now time.Time) error {
	holds := tx.Bucket(bucketRunHolds)
	for _, sid := range change.Hold {
		if holds.Get([]byte(sid)) != nil {
			continue
		}
		if err := holds.Put([]byte(sid), append(make([]byte, 8), run...)); err != nil {
			return err
		}
	}
	if !change.Sealed {
		return nil
	}
	stamp := beginStamp(now)
	var mine [][]byte
	if err := holds.ForEach(func(k, v []byte) error {
		if len(v) > 8 && string(v[8:]) == run {
			mine = append(mine, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range mine {
		if err := holds.Put(k, append(bytes.Clone(stamp), run...)); err != nil {
			return err
		}
	}
	return nil
}

// heldAfter reports whether a run holds session id past limit: its run is
// open, or was last sealed at or after limit.
func heldAfter(tx *bbolt.Tx, id, limit []byte) bool {
	holds := tx.Bucket(bucketRunHolds)
	if holds == nil {
		return false
	}
	v := holds.Get(id)
	if len(v) < 8 {
		return false
	}
	sealed := v[:8]
	return binary.BigEndian.Uint64(sealed) == 0 || bytes.Compare(sealed, limit) >= 0
}

// ForEachRun calls fn with every run's record, in run id order.
func (s *Store) ForEachRun(ctx context.Context, fn func(id string, rec []byte) error) error {
	return s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, err := s.openRun(string(k), v)
			if err != nil {
				return err
			}
			return fn(string(k), rec)
		})
	})
}
