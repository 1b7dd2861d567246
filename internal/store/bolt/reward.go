package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// rewardBuckets are the reward buckets' bbolt names (store.RewardBucket's
// String), created on first use; salvage copies them like the ledger's.
var rewardBuckets = func() [][]byte {
	var out [][]byte
	for _, b := range store.RewardBuckets {
		out = append(out, []byte(b.String()))
	}
	return out
}()

// rewardTx reads and writes the reward buckets, and appends to the ledger,
// inside one store transaction.
type rewardTx struct {
	tx     *bbolt.Tx
	seal   *store.Sealer
	err    error // a damaged value read by Get; fails the transaction
	ledger *ledger
}

// Get returns a copy of the value under key, or nil.
func (t *rewardTx) Get(b store.RewardBucket, key string) ([]byte, error) {
	bk := t.tx.Bucket([]byte(b.String()))
	if bk == nil {
		return nil, nil
	}
	sealed := bk.Get([]byte(key))
	if sealed == nil {
		return nil, nil
	}
	v, ok := t.seal.Open(store.PlaceReward(b, key), sealed)
	if !ok {
		err := &store.IntegrityError{What: "reward record " + b.String() + "/" + key}
		if t.err == nil {
			t.err = err
		}
		return nil, err
	}
	return append([]byte(nil), v...), nil
}

// Put stores value under key.
func (t *rewardTx) Put(b store.RewardBucket, key string, value []byte) error {
	bk, err := t.tx.CreateBucketIfNotExists([]byte(b.String()))
	if err != nil {
		return err
	}
	return bk.Put([]byte(key), t.seal.Seal(store.PlaceReward(b, key), value))
}

// Ledger appends to the ledger in the same transaction.
func (t *rewardTx) Ledger() store.Ledger { return t.ledger }

// RewardUpdate runs fn in one writing transaction (bbolt's single writer
// serializes them); an error from fn, or a damaged value fn read, rolls
// everything back.
func (s *Store) RewardUpdate(ctx context.Context, fn func(store.RewardTx) error) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		t := &rewardTx{tx: tx, seal: s.seal, ledger: s.newLedger(tx)}
		err := fn(t)
		if t.err != nil {
			return t.err
		}
		return err
	})
}

// RewardGet reads one value of a reward bucket (nil when absent).
func (s *Store) RewardGet(ctx context.Context, b store.RewardBucket, key string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = (&rewardTx{tx: tx, seal: s.seal}).Get(b, key)
		return err
	})
	return out, err
}
