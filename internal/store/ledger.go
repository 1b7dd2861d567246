package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/receipt"
)

var (
	// bucketLedger holds the hash-chained ledger: seq (big-endian uint64)
	// -> the entry's canonical JSON, exactly the bytes the next entry's
	// prev hashes.
	bucketLedger = []byte("ledger")
	// bucketReverified holds the results of Reverify: "<session>/<attempt,
	// 8 digits>" -> result JSON. The first result stays in bucketResults.
	bucketReverified = []byte("reverified")
	// bucketReceipts holds receipts that belong to no session result: a
	// refused Begin, an artifact verification. key -> envelope JSON.
	bucketReceipts = []byte("receipts")
	// bucketCheckpoints holds the signed ledger checkpoints: seq
	// (big-endian uint64) -> the DSSE envelope JSON of the checkpoint of
	// the ledger ending at that seq (receipt.PayloadTypeCheckpoint).
	bucketCheckpoints = []byte("checkpoints")
)

// ledgerBuckets are created at open with the session buckets.
var ledgerBuckets = [][]byte{bucketLedger, bucketReverified, bucketReceipts, bucketCheckpoints}

// Ledger appends entries inside one store transaction. bbolt runs one
// writing transaction at a time, so seq assignment is serialized and an
// entry commits together with the result it records, or not at all.
type Ledger struct {
	tx  *bolt.Tx
	now func() time.Time
	ext LedgerTx // another backend's handle (see NewLedger)
	cp  *Checkpointing
}

func (s *Store) newLedger(tx *bolt.Tx) *Ledger {
	return &Ledger{tx: tx, now: func() time.Time { return time.Now().UTC() }, cp: s.checkpointing.Load()}
}

// CheckpointSigner signs a checkpoint of the ledger whose entry seq hashes
// to head (receipt.Entry.Hash) and returns the DSSE envelope JSON.
type CheckpointSigner func(seq uint64, head string) ([]byte, error)

// Checkpointing makes every Every-th entry carry a signed checkpoint,
// written in the transaction that appends the entry: a ledger never runs
// more than Every entries past its newest checkpoint (the daemon signs
// further ones on a timer and at shutdown).
type Checkpointing struct {
	Every uint64
	Sign  CheckpointSigner
}

// CheckpointTx is implemented by another backend's ledger handle that
// stores checkpoints inside its transaction.
type CheckpointTx interface {
	PutCheckpoint(seq uint64, envelope []byte) error
}

// WithCheckpoints makes l sign checkpoints as c says (nil: none).
func (l *Ledger) WithCheckpoints(c *Checkpointing) *Ledger {
	l.cp = c
	return l
}

// Next is the position the next Append takes: its seq and the head (the
// digest of the newest entry, or receipt.Genesis) it chains onto.
func (l *Ledger) Next() receipt.Position {
	if l.ext != nil {
		return l.ext.Next()
	}
	k, v := l.tx.Bucket(bucketLedger).Cursor().Last()
	if k == nil {
		return receipt.Position{Seq: 1, Head: receipt.Genesis}
	}
	return receipt.Position{Seq: binary.BigEndian.Uint64(k) + 1, Head: digestOf(v)}
}

// Append adds one entry at Next and returns it.
func (l *Ledger) Append(typ, session, digest string) (receipt.Entry, error) {
	var e receipt.Entry
	if l.ext != nil {
		var err error
		if e, err = l.ext.Append(typ, session, digest); err != nil {
			return e, err
		}
	} else {
		pos := l.Next()
		e = receipt.Entry{Seq: pos.Seq, Prev: pos.Head, Type: typ, Session: session, Digest: digest, At: l.now()}
		if err := l.tx.Bucket(bucketLedger).Put(binary.BigEndian.AppendUint64(nil, e.Seq), e.Canonical()); err != nil {
			return e, err
		}
	}
	if c := l.cp; c != nil && c.Every > 0 && e.Seq%c.Every == 0 {
		env, err := c.Sign(e.Seq, e.Hash())
		if err != nil {
			return e, fmt.Errorf("signing the ledger checkpoint at seq %d: %w", e.Seq, err)
		}
		if err := l.putCheckpoint(e.Seq, env); err != nil {
			return e, err
		}
	}
	return e, nil
}

func (l *Ledger) putCheckpoint(seq uint64, env []byte) error {
	if l.ext != nil {
		ct, ok := l.ext.(CheckpointTx)
		if !ok {
			return fmt.Errorf("this store keeps no ledger checkpoints (seq %d)", seq)
		}
		return ct.PutCheckpoint(seq, env)
	}
	return putCheckpoint(l.tx, seq, env)
}

// putCheckpoint stores a checkpoint unless one of that seq is stored: a
// checkpoint once written is never replaced.
func putCheckpoint(tx *bolt.Tx, seq uint64, env []byte) error {
	b := tx.Bucket(bucketCheckpoints)
	k := binary.BigEndian.AppendUint64(nil, seq)
	if b.Get(k) != nil {
		return nil
	}
	return b.Put(k, env)
}

// SignCheckpoints makes every later ledger append sign checkpoints as c
// says (nil: none).
func (s *Store) SignCheckpoints(c *Checkpointing) { s.checkpointing.Store(c) }

// PutCheckpoint stores a signed checkpoint of the ledger ending at seq (the
// envelope JSON); one already stored at seq stays.
func (s *Store) PutCheckpoint(seq uint64, envelope []byte) error {
	return s.update(func(tx *bolt.Tx) error { return putCheckpoint(tx, seq, envelope) })
}

// LatestCheckpoint is the stored checkpoint of the highest seq (a nil
// envelope when there is none).
func (s *Store) LatestCheckpoint() (seq uint64, envelope []byte, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketCheckpoints).Cursor().Last()
		if k != nil {
			seq, envelope = binary.BigEndian.Uint64(k), append([]byte(nil), v...)
		}
		return nil
	})
	return seq, envelope, err
}

func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AppendLedger runs fn in a write transaction, shared with concurrent
// session writes (group commit: fn may run more than once, see batch).
func (s *Store) AppendLedger(fn func(*Ledger) error) error {
	return s.batch(func(tx *bolt.Tx) error { return fn(s.newLedger(tx)) })
}

// LedgerHead is the position the next entry would take.
func (s *Store) LedgerHead() (pos receipt.Position, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		pos = s.newLedger(tx).Next()
		return nil
	})
	return pos, err
}

// exportBatch bounds the entries read per transaction (bbolt) or query
// (PostgreSQL) by ExportLedger, so that a slow reader never holds a read
// transaction (which would stop the file from growing under writers) for
// long.
const exportBatch = 512

// ExportLedger calls fn with each entry from seq from on, oldest first. fn
// runs outside any store transaction.
func (s *Store) ExportLedger(from uint64, fn func(receipt.Entry, []byte) error) error {
	return ExportInBatches(from, fn, func(from uint64, limit int) ([]LedgerEntry, error) {
		var batch []LedgerEntry
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketLedger).Cursor()
			for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, from)); k != nil && len(batch) < limit; k, v = c.Next() {
				var e receipt.Entry
				if err := json.Unmarshal(v, &e); err != nil {
					return fmt.Errorf("ledger entry %d is corrupt: %w", binary.BigEndian.Uint64(k), err)
				}
				batch = append(batch, LedgerEntry{Entry: e, Canonical: append([]byte(nil), v...)})
			}
			return nil
		})
		return batch, err
	})
}

// LedgerEntry is one ledger entry as a backend stores it: decoded, and its
// canonical bytes.
type LedgerEntry struct {
	Entry     receipt.Entry
	Canonical []byte
}

// ExportInBatches is every backend's ExportLedger: read returns at most
// limit entries from seq from on, oldest first, and fn sees each one
// outside the read; a batch shorter than limit is the last.
func ExportInBatches(from uint64, fn func(receipt.Entry, []byte) error, read func(from uint64, limit int) ([]LedgerEntry, error)) error {
	for {
		batch, err := read(from, exportBatch)
		if err != nil {
			return err
		}
		for _, r := range batch {
			if err := fn(r.Entry, r.Canonical); err != nil {
				return err
			}
		}
		if len(batch) < exportBatch {
			return nil
		}
		from = batch[len(batch)-1].Entry.Seq + 1
	}
}

// CreateSessionLedger is CreateSession with ledger entries appended by fn in
// the same transaction. The transaction is shared with concurrent session
// writes (group commit): fn may run more than once and must do nothing
// outside the transaction but assign its results (see batch).
func (s *Store) CreateSessionLedger(id string, meta []byte, fn func(*Ledger) error, baselines ...*BaselineWriter) error {
	defer s.done(id)
	now := beginStamp(time.Now())
	err := s.batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b.Get([]byte(id)) != nil {
			return ErrExists
		}
		for _, w := range baselines {
			if err := w.commit(tx); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketBegun).Put([]byte(id), now); err != nil {
			return err
		}
		if err := fn(s.newLedger(tx)); err != nil {
			return err
		}
		return b.Put([]byte(id), s.seal.Seal(PlaceSession(id), meta))
	})
	if err == nil {
		for _, w := range baselines {
			w.advance()
		}
	}
	return err
}

// FinishSessionLedger stores a session's result once, built by build inside
// the transaction so that the result (and the receipt it carries) names the
// ledger entries build appends. When a result is already stored, build is
// not called and that result is returned. When build asks to keep the
// baseline (a result that Reverify may judge a later read against), it
// stays; otherwise it is removed as by FinishSession. The transaction is
// shared with concurrent session writes (group commit): build may run more
// than once and must do nothing outside the transaction but return its
// result (see batch).
func (s *Store) FinishSessionLedger(id string, build func(*Ledger) (result []byte, keepBaseline bool, err error)) (stored []byte, err error) {
	err = s.batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSessions).Get([]byte(id)) == nil {
			return ErrNotFound
		}
		b := tx.Bucket(bucketResults)
		if r := b.Get([]byte(id)); r != nil {
			v, ok := s.seal.Open(PlaceResult(id), r)
			if !ok {
				return &IntegrityError{Session: id, What: "result"}
			}
			stored = append([]byte(nil), v...)
			return nil
		}
		result, keep, err := build(s.newLedger(tx))
		if err != nil {
			return err
		}
		stored = result
		if err := b.Put([]byte(id), s.seal.Seal(PlaceResult(id), result)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketBegun).Delete([]byte(id)); err != nil {
			return err
		}
		if err := stampFinished(tx, id); err != nil {
			return err
		}
		if bb := tx.Bucket(bucketBaselines); !keep && bb.Bucket([]byte(id)) != nil {
			return bb.DeleteBucket([]byte(id))
		}
		return nil
	})
	return stored, err
}

// AddReverification stores a further result of a finished session, built
// by build with its attempt number (1 for the first re-verification) inside
// the transaction that appends its ledger entries. The first result is never
// touched. Unless build asks to keep it, the baseline is removed (the
// session is settled). Group commit: build may run more than once (see
// batch).
func (s *Store) AddReverification(id string, build func(l *Ledger, attempt int) (result []byte, keepBaseline bool, err error)) ([]byte, error) {
	var out []byte
	err := s.batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSessions).Get([]byte(id)) == nil {
			return ErrNotFound
		}
		if tx.Bucket(bucketResults).Get([]byte(id)) == nil {
			return fmt.Errorf("session %s has no first result to re-verify", id)
		}
		attempt := 1
		c := tx.Bucket(bucketReverified).Cursor()
		prefix := []byte(id + "/")
		for k, _ := c.Seek(prefix); k != nil && len(k) > len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
			attempt++
		}
		result, keep, err := build(s.newLedger(tx), attempt)
		if err != nil {
			return err
		}
		out = result
		if err := tx.Bucket(bucketReverified).Put(fmt.Appendf(nil, "%s/%08d", id, attempt), s.seal.Seal(PlaceReverification(id, attempt), result)); err != nil {
			return err
		}
		if bb := tx.Bucket(bucketBaselines); !keep && bb.Bucket([]byte(id)) != nil {
			return bb.DeleteBucket([]byte(id))
		}
		return nil
	})
	return out, err
}

// Reverifications returns a session's further results, oldest first.
func (s *Store) Reverifications(id string) ([][]byte, error) {
	var out [][]byte
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketReverified).Cursor()
		prefix := []byte(id + "/")
		for k, v := c.Seek(prefix); k != nil && len(k) > len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			v, err := s.openReverification(id, k[len(prefix):], v)
			if err != nil {
				return err
			}
			out = append(out, append([]byte(nil), v...))
		}
		return nil
	})
	return out, err
}

// PutReceipt stores a receipt that belongs to no session result under key,
// built by build inside the transaction that appends its ledger entries.
// Group commit: build may run more than once (see batch).
func (s *Store) PutReceipt(key string, build func(*Ledger) ([]byte, error)) ([]byte, error) {
	var out []byte
	err := s.batch(func(tx *bolt.Tx) error {
		env, err := build(s.newLedger(tx))
		if err != nil {
			return err
		}
		out = env
		return tx.Bucket(bucketReceipts).Put([]byte(key), env)
	})
	return out, err
}
