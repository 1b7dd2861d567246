package store

import (
	"context"
	"time"

	"github.com/verifierd/verifierd/receipt"
)

// Backend is what the daemon needs of a session store. *Store (embedded
// bbolt, the default) implements it; so does internal/store/pgstore
// (PostgreSQL, shared by several daemon replicas). The ledger, baseline and
// reward handles stay the concrete *Ledger, *BaselineWriter and *RewardTx
// types: another backend builds them over its own transaction with
// NewLedger, NewBaselineWriter and NewRewardTx.
type Backend interface {
	Close() error
	Session(id string) (meta, result []byte, err error)
	NewBaseline(id string, capture int) *BaselineWriter
	ReadBaseline(id string, capture int, fn func(rec []byte) error) error
	DropBaseline(id string) error
	CreateSessionLedger(id string, meta []byte, fn func(*Ledger) error, baselines ...*BaselineWriter) error
	FinishSessionLedger(id string, build func(*Ledger) (result []byte, keepBaseline bool, err error)) ([]byte, error)
	AddReverification(id string, build func(l *Ledger, attempt int) (result []byte, keepBaseline bool, err error)) ([]byte, error)
	Reverifications(id string) ([][]byte, error)
	PutReceipt(key string, build func(*Ledger) ([]byte, error)) ([]byte, error)
	AppendLedger(fn func(*Ledger) error) error
	LedgerHead() (receipt.Position, error)
	ExportLedger(from uint64, fn func(receipt.Entry, []byte) error) error
	SignCheckpoints(c *Checkpointing)
	PutCheckpoint(seq uint64, envelope []byte) error
	LatestCheckpoint() (seq uint64, envelope []byte, err error)
	RewardUpdate(fn func(*RewardTx) error) error
	RewardGet(b RewardBucket, key string) ([]byte, error)
	RemoveOrphans(ctx context.Context, now time.Time, retainUnfinished time.Duration) (Stats, error)
	RemoveExpired(ctx context.Context, now time.Time, retain time.Duration) (int, error)
	Size() int64
	ForEachSession(fn func(id string, meta, result []byte) error) error
	// Bind ties the store to the daemon's keys and turns on the value
	// checks (integrity.go); the daemon calls it once, right after opening.
	Bind(integrityKey []byte, keys Keys, rotate bool) (BindReport, error)
}

var _ Backend = (*Store)(nil)

// LedgerTx is a ledger handle of another backend, inside one of its
// transactions: appends are serialized across every writer of the store and
// commit with the transaction or not at all.
type LedgerTx interface {
	Next() receipt.Position
	Append(typ, session, digest string) (receipt.Entry, error)
}

// NewLedger wraps another backend's ledger handle.
func NewLedger(lt LedgerTx) *Ledger { return &Ledger{ext: lt} }

// BaselineSink is another backend's baseline writer.
type BaselineSink interface {
	Add(rec []byte) error
	Close() error
}

// NewBaselineWriter wraps another backend's baseline writer.
func NewBaselineWriter(sink BaselineSink) *BaselineWriter { return &BaselineWriter{ext: sink} }

// Sink is the backend writer behind w (nil for the embedded store's).
func (w *BaselineWriter) Sink() BaselineSink { return w.ext }

// RewardKV reads and writes the reward buckets of another backend inside
// one of its transactions. A read error is kept and fails the transaction.
type RewardKV interface {
	Get(b RewardBucket, key string) []byte
	Put(b RewardBucket, key string, value []byte) error
}

// NewRewardTx wraps another backend's reward transaction.
func NewRewardTx(kv RewardKV, l *Ledger) *RewardTx { return &RewardTx{ext: kv, Ledger: l} }

// String is the bucket's name, as the embedded store names it.
func (b RewardBucket) String() string { return string(b.name()) }
