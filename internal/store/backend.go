// Package store is the contract between the daemon and a session store:
// the Backend interface, the transaction handles it passes to the daemon
// (Ledger, BaselineWriter, RewardTx), the errors every backend answers
// with, and the value tags (integrity.go) every backend writes and checks.
// The implementations live beside it: internal/store/bolt (the embedded
// default, one bbolt file) and internal/store/pg (PostgreSQL, shared by
// several replicas). internal/store/storetest is the conformance suite a
// backend must pass; docs/store-backends.md describes the contract for
// someone writing one.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/receipt"
)

// ErrNotFound is returned for an unknown session (or a baseline capture
// that was never written).
var ErrNotFound = errors.New("no such session")

// ErrExists is returned when a session id is already taken.
var ErrExists = errors.New("session already exists")

// ErrRunNotFound is returned for an unknown run.
var ErrRunNotFound = errors.New("no such run")

// Backend is what the daemon needs of a session store.
//
// Every method that can touch the store takes a context first and returns
// promptly with ctx's error (context.Canceled or DeadlineExceeded, possibly
// wrapped) once ctx ends, whatever it was waiting for: a lock, the network,
// a disk. A call that returns an error has changed nothing, unless its doc
// says otherwise (the cleanups remove in batches and report what they
// removed before stopping).
//
// Stored values are tagged (see integrity.go and Bind): a value whose tag
// does not match is never returned; the read answers an *IntegrityError
// naming the session and the value instead.
//
// A backend is safe for concurrent use by many goroutines and, where it
// says so, by several daemons (replicas) at once.
type Backend interface {
	// Close releases the store's files or connections. Calls in progress
	// may fail; no call may follow.
	Close() error

	// Bind ties the store to the daemon's keys and turns on the value
	// tags; the daemon calls it once, right after opening, before any
	// other call. The first writer's key ids are recorded; a daemon with
	// other keys is refused with a *KeyMismatchError unless rotate, which
	// records its keys instead (and re-tags every value when the evidence
	// key changed). Values written before tags existed are tagged as they
	// stand. Until Bind, values are written and read untagged.
	Bind(ctx context.Context, integrityKey []byte, keys Keys, rotate bool) (BindReport, error)

	// Session returns a session's metadata and, once verified, its first
	// result (nil before). ErrNotFound for an unknown id.
	Session(ctx context.Context, id string) (meta, result []byte, err error)

	// ForEachSession calls fn with every session's metadata and result
	// (nil until verified), in session id order. The bytes are valid only
	// during the call; an error from fn stops the walk and is returned. A
	// session whose stored record or result fails its integrity check is
	// passed with meta nil (and result nil), and the walk goes on: one
	// damaged session never hides the others (Session answers its
	// IntegrityError).
	ForEachSession(ctx context.Context, fn func(id string, meta, result []byte) error) error

	// NewBaseline starts writing capture number capture of session id
	// (CensusCapture numbers a census). Nothing is visible to readers
	// until CreateSessionLedger commits the session with the writer; a
	// writer never handed to it is removed by DropBaseline or, later, by
	// RemoveOrphans. It does no I/O: the writer's Add and Close do.
	NewBaseline(id string, capture int) BaselineWriter

	// ReadBaseline calls fn for every record of a capture of a committed
	// session, in the order written. The bytes passed to fn are valid
	// only during the call. ErrNotFound when the session has no such
	// capture; an error from fn stops the read and is returned.
	ReadBaseline(ctx context.Context, id string, capture int, fn func(rec []byte) error) error

	// DropBaseline removes every baseline capture written for a session
	// that was never created (a Begin refused part-way). The baseline of a
	// committed session stays.
	DropBaseline(ctx context.Context, id string) error

	// CreateSessionLedger records a new session's metadata, commits the
	// baselines' pending records and runs fn (which appends the session's
	// ledger entries) in one transaction: all of it is stored, or none.
	// ErrExists when the id is taken. fn may run more than once (a backend
	// may retry or group transactions): it must do nothing outside the
	// transaction but assign its results. An error from fn is returned.
	CreateSessionLedger(ctx context.Context, id string, meta []byte, fn func(Ledger) error, baselines ...BaselineWriter) error

	// FinishSessionLedger stores a session's first result once, built by
	// build inside the transaction that appends its ledger entries, so
	// that the result can name them. The first writer, on any replica,
	// wins: when a result is already stored, build is not called and the
	// stored result is returned with built false. built is true only
	// when the stored result is the one this call's build returned.
	// Unless build asks to keep the baseline (keepBaseline, for a later
	// re-verification), it is removed in the same transaction.
	// ErrNotFound for an unknown id. build may run more than once (see
	// CreateSessionLedger).
	FinishSessionLedger(ctx context.Context, id string, build func(Ledger) (result []byte, keepBaseline bool, err error)) (stored []byte, built bool, err error)

	// AddReverification stores a further result of a finished session,
	// built by build with its attempt number (1 for the first
	// re-verification) inside the transaction that appends its ledger
	// entries; attempts of one session are serialized. The first result is
	// never touched; the baseline is removed unless build keeps it.
	// ErrNotFound for an unknown id, an error for a session with no first
	// result.
	AddReverification(ctx context.Context, id string, build func(l Ledger, attempt int) (result []byte, keepBaseline bool, err error)) ([]byte, error)

	// Reverifications returns a session's further results, oldest first
	// (none for an unknown session).
	Reverifications(ctx context.Context, id string) ([][]byte, error)

	// PutReceipt stores a receipt that belongs to no session result (a
	// refused Begin, an artifact verification) under key, built by build
	// inside the transaction that appends its ledger entries. A receipt
	// stored under the same key is replaced.
	PutReceipt(ctx context.Context, key string, build func(Ledger) ([]byte, error)) ([]byte, error)

	// AppendLedger runs fn in a transaction of its own.
	AppendLedger(ctx context.Context, fn func(Ledger) error) error

	// LedgerHead is the position the next ledger entry would take.
	LedgerHead(ctx context.Context) (receipt.Position, error)

	// ExportLedger calls fn with each ledger entry from seq from on,
	// oldest first, with its canonical bytes. fn runs outside any store
	// transaction (entries are read in batches), so a slow reader holds
	// nothing; an error from fn stops the export and is returned.
	ExportLedger(ctx context.Context, from uint64, fn func(e receipt.Entry, canonical []byte) error) error

	// SignCheckpoints makes every later ledger append sign checkpoints as
	// c says (nil: none). No I/O.
	SignCheckpoints(c *Checkpointing)

	// PutCheckpoint stores a signed checkpoint of the ledger ending at seq
	// (the DSSE envelope JSON); one already stored at seq stays.
	PutCheckpoint(ctx context.Context, seq uint64, envelope []byte) error

	// LatestCheckpoint is the stored checkpoint of the highest seq (seq 0
	// and a nil envelope when there is none).
	LatestCheckpoint(ctx context.Context) (seq uint64, envelope []byte, err error)

	// RewardUpdate runs fn in one writing transaction, serialized with
	// every other RewardUpdate of the store (on every replica), so that a
	// value fn reads is the newest; an error from fn (or from a read fn
	// made) rolls everything back, ledger entries included.
	RewardUpdate(ctx context.Context, fn func(RewardTx) error) error

	// RewardGet reads one value of a reward bucket (nil when absent).
	RewardGet(ctx context.Context, b RewardBucket, key string) ([]byte, error)

	// RemoveOrphans removes baseline chunks whose session was never
	// committed (keeping those a Begin may still be writing), and, when
	// retainUnfinished > 0, sessions begun before now-retainUnfinished and
	// never verified, with their baselines. It works in small
	// transactions and, when ctx ends, stops with what it removed so far
	// and ctx's error.
	RemoveOrphans(ctx context.Context, now time.Time, retainUnfinished time.Duration) (Stats, error)

	// RemoveExpired removes every session whose first result was stored
	// before now-retain, with its results and baselines; ledger entries
	// and stand-alone receipts stay, so the hash chain remains verifiable.
	// retain <= 0 keeps everything. It returns how many sessions it
	// removed, in small transactions, stopping early (with ctx's error)
	// when ctx ends.
	RemoveExpired(ctx context.Context, now time.Time, retain time.Duration) (int, error)

	// Size is the store's size in bytes (0 when it cannot be read), for
	// the daemon's store size gauge.
	Size(ctx context.Context) int64

	// CreateRun records a new run under id with its first ledger entries
	// (fn) in one transaction, and returns the stored record with created
	// true. When a run id is taken, nothing is written, fn is not called
	// and the record already stored is returned with created false (an
	// idempotent create: the caller compares it). fn may run more than
	// once (see CreateSessionLedger).
	CreateRun(ctx context.Context, id string, rec []byte, fn func(Ledger) error) (stored []byte, created bool, err error)

	// Run returns a run's record; ErrRunNotFound for an unknown id.
	Run(ctx context.Context, id string) ([]byte, error)

	// UpdateRun reads a run's record and stores what fn makes of it, with
	// fn's ledger entries, in one transaction. Updates of one run are
	// serialized across every writer of the store (every replica), so
	// fn always sees the newest record. A nil record from fn leaves the
	// stored one (ledger entries fn appended still commit); an error
	// from fn changes nothing and is returned. change says what else the
	// update does (RunChange). It returns the record stored after the
	// call. ErrRunNotFound for an unknown id. fn may run more than once.
	UpdateRun(ctx context.Context, id string, fn func(l Ledger, rec []byte) (next []byte, change RunChange, err error)) ([]byte, error)

	// ForEachRun calls fn with every run's record, in run id order; an
	// error from fn stops the walk and is returned.
	ForEachRun(ctx context.Context, fn func(id string, rec []byte) error) error
}

// RunChange is what a run update does besides storing the record.
type RunChange struct {
	// Hold names sessions the run holds (added to those held already): a
	// held session is kept by RemoveExpired and RemoveOrphans while its
	// run is open, and from the run's last seal on for as long as the
	// retention keeps a session finished then.
	Hold []string
	// Sealed: the run is sealed (again) now; the retention of its held
	// sessions counts from this moment.
	Sealed bool
}

// Ledger appends to the hash-chained ledger inside one store transaction:
// appends are serialized across every writer of the store (every replica),
// and an entry commits with the transaction or not at all. A Ledger is
// valid only inside the function it was passed to, and uses that call's
// context. When an append fails the handle keeps the error, fails the
// transaction whatever the function returns, and Next answers the zero
// Position.
type Ledger interface {
	// Next is the position the next Append takes: its seq and the head
	// (the digest of the newest entry, or receipt.Genesis) it chains onto.
	Next() receipt.Position
	// Append adds one entry at Next and returns it. When the store signs
	// checkpoints (SignCheckpoints) and the entry's seq calls for one, the
	// checkpoint is signed and stored in the same transaction
	// (Checkpointing.After).
	Append(typ, session, digest string) (receipt.Entry, error)
}

// BaselineWriter appends one capture's records to a session's baseline. A
// backend may store full chunks as they fill (so that a large baseline is
// never held whole); what is pending commits with the session
// (CreateSessionLedger) or with Close.
type BaselineWriter interface {
	// Add appends one record (its JSON bytes); it may store a full chunk.
	Add(ctx context.Context, rec []byte) error
	// Close stores what is pending in a transaction of its own. A writer
	// handed to CreateSessionLedger needs no Close.
	Close(ctx context.Context) error
}

// OwnWriters is baselines as the backend's own writer type W, for
// CreateSessionLedger: a writer of another type, or one that mine says
// another store made, refuses the session id.
func OwnWriters[W BaselineWriter](id string, baselines []BaselineWriter, mine func(W) bool) ([]W, error) {
	ws := make([]W, len(baselines))
	for i, b := range baselines {
		w, ok := b.(W)
		if !ok || !mine(w) {
			return nil, fmt.Errorf("session %s: a baseline writer of another store", id)
		}
		ws[i] = w
	}
	return ws, nil
}

// RewardTx reads and writes the reward buckets, and appends to the ledger,
// inside one RewardUpdate transaction: a receipt, the scored-episode index
// and the advanced mark commit together or not at all. Valid only inside
// the function it was passed to.
type RewardTx interface {
	// Get returns the value under key (nil when absent); a damaged value
	// is an *IntegrityError, and fails the transaction.
	Get(b RewardBucket, key string) ([]byte, error)
	// Put stores value under key.
	Put(b RewardBucket, key string, value []byte) error
	// Ledger appends to the ledger in the same transaction.
	Ledger() Ledger
}

// RewardBucket names one of the reward buckets (internal/reward):
// registered episodes with their baseline and subject, issued reward
// receipts, and the policy-update high-water mark per contract; and the
// write set's holds (internal/session), which need the same serialized,
// shared read-modify-write.
type RewardBucket int

// The reward buckets.
const (
	RewardEpisodes RewardBucket = iota
	RewardReceipts
	RewardMarks
	// WriteSetHolds holds, per replication slot, the Begin positions of
	// the open sessions of every replica (docs/adapters/sql.md, "The write
	// set"): the slot is never advanced past one.
	WriteSetHolds
)

// String is the bucket's name, the same in every backend (it is part of
// the place a reward value is tagged for).
func (b RewardBucket) String() string {
	switch b {
	case RewardEpisodes:
		return "reward_episodes"
	case RewardReceipts:
		return "reward_receipts"
	case RewardMarks:
		return "reward_marks"
	case WriteSetHolds:
		return "write_set_holds"
	}
	panic("unknown reward bucket")
}

// RewardBuckets are the reward buckets, for a backend that walks them.
var RewardBuckets = []RewardBucket{RewardEpisodes, RewardReceipts, RewardMarks, WriteSetHolds}

// CensusCapture is the capture number that holds the census of capture n
// (a candidate's whole-collection read, taken with its baseline). It is
// stored, read and dropped as a baseline capture is, under a number no
// baseline takes: captures count up from 0, censuses down from -1.
func CensusCapture(n int) int { return -1 - n }

// Stats counts what RemoveOrphans removed.
type Stats struct {
	// OrphanBaselines is the number of sessions whose baseline chunks were
	// removed because the session was never committed (a Begin killed or
	// crashed mid-capture).
	OrphanBaselines int
	// UnfinishedSessions is the number of sessions begun but never verified
	// within the retention, removed with their baselines.
	UnfinishedSessions int
}
