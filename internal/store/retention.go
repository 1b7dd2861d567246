package store

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketFinished holds, per finished session, when its first result was
// stored (unix nanoseconds, big-endian), for RemoveExpired. A result stored
// before the bucket existed is stamped by the first RemoveExpired that sees
// it (with that pass's now): such a session is kept a full retention
// from then.
var bucketFinished = []byte("finished")

// stampFinished records that session id finished now, inside tx.
func stampFinished(tx *bolt.Tx, id string) error {
	b, err := tx.CreateBucketIfNotExists(bucketFinished)
	if err != nil {
		return err
	}
	return b.Put([]byte(id), beginStamp(time.Now()))
}

// RemoveExpired removes, in small transactions, every session whose first
// result was stored before now-retain: its metadata, results (the first and
// any re-verification) and baselines. Ledger entries and stand-alone
// receipts stay: the hash chain must remain verifiable. retain <= 0 keeps
// everything. It returns how many sessions it removed, stopping early when
// ctx ends.
func (s *Store) RemoveExpired(ctx context.Context, now time.Time, retain time.Duration) (int, error) {
	if retain <= 0 {
		return 0, nil
	}
	if err := s.update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketFinished)
		return err
	}); err != nil {
		return 0, err
	}
	// Results without a stamp (written by an older daemon): stamp them now.
	stamp := beginStamp(now)
	if _, err := s.removeBatches(ctx, bucketResults, func(tx *bolt.Tx, id, _ []byte) bool {
		return tx.Bucket(bucketFinished).Get(id) == nil
	}, func(tx *bolt.Tx, id []byte) error {
		return tx.Bucket(bucketFinished).Put(id, stamp)
	}); err != nil {
		return 0, err
	}
	limit := beginStamp(now.Add(-retain))
	return s.removeBatches(ctx, bucketFinished, func(_ *bolt.Tx, _, finished []byte) bool {
		return len(finished) == 8 && bytes.Compare(finished, limit) < 0
	}, func(tx *bolt.Tx, id []byte) error {
		for _, b := range [][]byte{bucketFinished, bucketSessions, bucketResults} {
			if err := tx.Bucket(b).Delete(id); err != nil {
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
	})
}
