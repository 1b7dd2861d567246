package bolt

import (
	"bytes"
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// bucketFinished holds, per finished session, when its first result was
// stored (unix nanoseconds, big-endian), for RemoveExpired. A result stored
// before the bucket existed is stamped by the first RemoveExpired that sees
// it (with that pass's now): such a session is kept a full retention
// from then.
var bucketFinished = []byte("finished")

// stampFinished records that session id finished now, inside tx.
func stampFinished(tx *bbolt.Tx, id string) error {
	b, err := tx.CreateBucketIfNotExists(bucketFinished)
	if err != nil {
		return err
	}
	return b.Put([]byte(id), beginStamp(time.Now()))
}

// expiredScan bounds the sessions one RemoveExpired collects; the rest go
// at the next run.
const expiredScan = 4096

// RemoveExpired removes, in small transactions, every session whose first
// result was stored before now-retain: its metadata, results (the first and
// any re-verification) and baselines. Ledger entries and stand-alone
// receipts stay: the hash chain must remain verifiable. retain <= 0 keeps
// everything. It returns how many sessions it removed, stopping early when
// ctx ends. The candidates are found in one read transaction, so a run
// that removes nothing writes nothing.
func (s *Store) RemoveExpired(ctx context.Context, now time.Time, retain time.Duration) (int, error) {
	if retain <= 0 {
		return 0, nil
	}
	limit := beginStamp(now.Add(-retain))
	var unstamped, expired [][]byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		fin := tx.Bucket(bucketFinished)
		if fin != nil {
			if err := fin.ForEach(func(k, v []byte) error {
				if len(v) == 8 && bytes.Compare(v, limit) < 0 && len(expired) < expiredScan && !heldAfter(tx, k, limit) {
					expired = append(expired, append([]byte(nil), k...))
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketResults).ForEach(func(k, _ []byte) error {
			if fin == nil || fin.Get(k) == nil {
				unstamped = append(unstamped, append([]byte(nil), k...))
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	// Results without a stamp (stored by an older daemon): stamp them with
	// this run's now.
	stamp := beginStamp(now)
	for len(unstamped) > 0 {
		n := min(len(unstamped), 16*orphanBatch)
		if err := s.update(ctx, func(tx *bbolt.Tx) error {
			fin, err := tx.CreateBucketIfNotExists(bucketFinished)
			if err != nil {
				return err
			}
			for _, id := range unstamped[:n] {
				if fin.Get(id) == nil && tx.Bucket(bucketResults).Get(id) != nil {
					if err := fin.Put(id, stamp); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return 0, err
		}
		unstamped = unstamped[n:]
	}
	removed := 0
	for len(expired) > 0 {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		n := min(len(expired), orphanBatch)
		if err := s.update(ctx, func(tx *bbolt.Tx) error {
			for _, id := range expired[:n] {
				// Again inside the writing transaction.
				if v := tx.Bucket(bucketFinished).Get(id); len(v) != 8 || bytes.Compare(v, limit) >= 0 || heldAfter(tx, id, limit) {
					continue
				}
				if err := removeSession(tx, id); err != nil {
					return err
				}
				removed++
			}
			return nil
		}); err != nil {
			return removed, err
		}
		expired = expired[n:]
	}
	return removed, nil
}

// removeSession deletes everything stored for session id but its ledger
// entries.
func removeSession(tx *bbolt.Tx, id []byte) error {
	for _, b := range [][]byte{bucketFinished, bucketSessions, bucketResults, bucketBegun} {
		if err := tx.Bucket(b).Delete(id); err != nil {
			return err
		}
	}
	if holds := tx.Bucket(bucketRunHolds); holds != nil {
		if err := holds.Delete(id); err != nil {
			return err
		}
	}
	if tx.Bucket(bucketBaselines).Bucket(id) != nil {
		if err := tx.Bucket(bucketBaselines).DeleteBucket(id); err != nil {
			return err
		}
	}
	c := tx.Bucket(bucketReverified).Cursor()
	prefix := append(append([]byte(nil), id...), '/')
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
