package bolt

import (
	"bytes"
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// orphanBatch bounds the sessions removed in one write transaction, so that
// a cleanup never holds the store's writer lock for long.
const orphanBatch = 16

// RemoveOrphans removes, in small transactions:
//
//   - baseline chunks whose session was never committed. The chunks of a
//     Begin still in progress in this process are kept: NewBaseline
//     registers its session until CreateSession or DropBaseline ends it.
//     A registration older than retainUnfinished is taken as abandoned. At
//     start-up nothing is in flight, so every uncommitted chunk goes.
//   - sessions begun before now-retainUnfinished and never verified,
//     together with their baselines (retainUnfinished <= 0 keeps them).
//
// It stops early, with what it removed so far, when ctx ends.
func (s *Store) RemoveOrphans(ctx context.Context, now time.Time, retainUnfinished time.Duration) (store.Stats, error) {
	var st store.Stats
	cutoff := now.Add(-retainUnfinished)
	inFlight := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		started, ok := s.inflight[id]
		return ok && (retainUnfinished <= 0 || started.After(cutoff))
	}

	// Uncommitted baselines.
	n, err := s.removeBatches(ctx, bucketBaselines, func(tx *bbolt.Tx, id, _ []byte) bool {
		return tx.Bucket(bucketSessions).Get(id) == nil && !inFlight(string(id))
	}, func(tx *bbolt.Tx, id []byte) error {
		return tx.Bucket(bucketBaselines).DeleteBucket(id)
	})
	st.OrphanBaselines = n
	if err != nil || retainUnfinished <= 0 {
		return st, err
	}

	// Unfinished sessions past the retention.
	limit := beginStamp(cutoff)
	n, err = s.removeBatches(ctx, bucketBegun, func(tx *bbolt.Tx, id, begun []byte) bool {
		return len(begun) == 8 && bytes.Compare(begun, limit) < 0 && tx.Bucket(bucketResults).Get(id) == nil && !heldAfter(tx, id, limit)
	}, func(tx *bbolt.Tx, id []byte) error {
		if err := tx.Bucket(bucketBegun).Delete(id); err != nil {
			return err
		}
		if holds := tx.Bucket(bucketRunHolds); holds != nil {
			if err := holds.Delete(id); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketSessions).Delete(id); err != nil {
			return err
		}
		if tx.Bucket(bucketBaselines).Bucket(id) != nil {
			return tx.Bucket(bucketBaselines).DeleteBucket(id)
		}
		return nil
	})
	st.UnfinishedSessions = n
	return st, err
}

// removeBatches walks the keys of bucket in order, orphanBatch keys per
// write transaction, and calls remove for each key for which match holds
// (match is evaluated inside the same transaction). It returns how many it
// removed.
func (s *Store) removeBatches(ctx context.Context, bucket []byte, match func(tx *bbolt.Tx, k, v []byte) bool, remove func(tx *bbolt.Tx, k []byte) error) (int, error) {
	removed := 0
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		done := false
		err := s.update(ctx, func(tx *bbolt.Tx) error {
			var ids [][]byte
			c := tx.Bucket(bucket).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			seen := 0
			for ; k != nil && seen < 4*orphanBatch && len(ids) < orphanBatch; k, v = c.Next() {
				seen++
				after = append(after[:0], k...)
				if match(tx, k, v) {
					ids = append(ids, append([]byte(nil), k...))
				}
			}
			done = k == nil
			for _, id := range ids {
				if err := remove(tx, id); err != nil {
					return err
				}
			}
			removed += len(ids)
			return nil
		})
		if err != nil || done {
			return removed, err
		}
	}
}
