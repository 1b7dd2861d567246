package store

import (
	"errors"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Reward buckets (internal/reward): registered episodes with their
// baseline and subject, issued reward receipts, and the policy-update
// high-water mark per contract. They are created on first use.
var (
	bucketRewardEpisodes = []byte("reward_episodes")
	bucketRewardReceipts = []byte("reward_receipts")
	bucketRewardMarks    = []byte("reward_marks")
)

// rewardBuckets are copied by salvage like the ledger's.
var rewardBuckets = [][]byte{bucketRewardEpisodes, bucketRewardReceipts, bucketRewardMarks}

// RewardBucket names one of the reward buckets.
type RewardBucket int

// The reward buckets.
const (
	RewardEpisodes RewardBucket = iota
	RewardReceipts
	RewardMarks
)

func (b RewardBucket) name() []byte {
	switch b {
	case RewardEpisodes:
		return bucketRewardEpisodes
	case RewardReceipts:
		return bucketRewardReceipts
	case RewardMarks:
		return bucketRewardMarks
	}
	panic("unknown reward bucket")
}

// RewardTx reads and writes the reward buckets, and appends to the ledger,
// inside one store transaction: a receipt, the scored-episode index and the
// advanced mark commit together or not at all.
type RewardTx struct {
	tx     *bolt.Tx
	seal   *Sealer
	err    error // a damaged value read by Get; fails the transaction
	Ledger *Ledger
	ext    RewardKV // another backend's (see NewRewardTx)
}

// Get returns a copy of the value under key, or nil.
func (t *RewardTx) Get(b RewardBucket, key string) []byte {
	if t.ext != nil {
		return t.ext.Get(b, key)
	}
	bk := t.tx.Bucket(b.name())
	if bk == nil {
		return nil
	}
	sealed := bk.Get([]byte(key))
	if sealed == nil {
		return nil
	}
	v, ok := t.seal.Open(PlaceReward(b, key), sealed)
	if !ok {
		if t.err == nil {
			t.err = &IntegrityError{What: "reward record " + b.String() + "/" + key}
		}
		return nil
	}
	return append([]byte(nil), v...)
}

// Put stores value under key.
func (t *RewardTx) Put(b RewardBucket, key string, value []byte) error {
	if t.ext != nil {
		return t.ext.Put(b, key, value)
	}
	bk, err := t.tx.CreateBucketIfNotExists(b.name())
	if err != nil {
		return err
	}
	return bk.Put([]byte(key), t.seal.Seal(PlaceReward(b, key), value))
}

// RewardUpdate runs fn in one writing transaction; an error from fn rolls
// everything back.
func (s *Store) RewardUpdate(fn func(*RewardTx) error) error {
	return s.update(func(tx *bolt.Tx) error {
		t := &RewardTx{tx: tx, seal: s.seal, Ledger: s.newLedger(tx)}
		err := fn(t)
		if t.err != nil {
			return t.err
		}
		return err
	})
}

// RewardGet reads one value of a reward bucket (nil when absent).
func (s *Store) RewardGet(b RewardBucket, key string) ([]byte, error) {
	var out []byte
	err := s.view(func(tx *bolt.Tx) error {
		t := &RewardTx{tx: tx, seal: s.seal}
		out = t.Get(b, key)
		return t.err
	})
	if err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil, err
	}
	return out, nil
}
