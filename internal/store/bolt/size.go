package bolt

import (
	"context"
	"os"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// Size is the store file's size in bytes (0 when it cannot be read), for
// the daemon's store size gauge.
func (s *Store) Size(context.Context) int64 {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ForEachSession calls fn with every session's metadata and result (nil
// until verified), in session id order (ids are random: not time order).
// The bytes are valid only during the call. It reads in one read
// transaction; the operator console uses it and keeps a bounded page.
func (s *Store) ForEachSession(ctx context.Context, fn func(id string, meta, result []byte) error) error {
	return s.view(ctx, func(tx *bbolt.Tx) error {
		results := tx.Bucket(bucketResults)
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			id := string(k)
			meta, ok := s.seal.Open(store.PlaceSession(id), v)
			if !ok {
				return fn(id, nil, nil)
			}
			result := results.Get(k)
			if result != nil {
				if result, ok = s.seal.Open(store.PlaceResult(id), result); !ok {
					return fn(id, nil, nil)
				}
			}
			return fn(id, meta, result)
		})
	})
}
