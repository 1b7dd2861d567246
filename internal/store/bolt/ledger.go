package bolt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
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

// ledger appends entries inside one store transaction. bbolt runs one
// writing transaction at a time, so seq assignment is serialized and an
// entry commits together with the result it records, or not at all.
type ledger struct {
	tx  *bbolt.Tx
	now func() time.Time
	cp  *store.Checkpointing
}

func (s *Store) newLedger(tx *bbolt.Tx) *ledger {
	return &ledger{tx: tx, now: func() time.Time { return time.Now().UTC() }, cp: s.checkpointing.Load()}
}

// Next is the position the next Append takes.
func (l *ledger) Next() receipt.Position {
	k, v := l.tx.Bucket(bucketLedger).Cursor().Last()
	if k == nil {
		return receipt.Position{Seq: 1, Head: receipt.Genesis}
	}
	return receipt.Position{Seq: binary.BigEndian.Uint64(k) + 1, Head: digestOf(v)}
}

// Append adds one entry at Next, with the checkpoint it calls for.
func (l *ledger) Append(typ, session, digest string) (receipt.Entry, error) {
	pos := l.Next()
	e := receipt.Entry{Seq: pos.Seq, Prev: pos.Head, Type: typ, Session: session, Digest: digest, At: l.now()}
	if err := l.tx.Bucket(bucketLedger).Put(binary.BigEndian.AppendUint64(nil, e.Seq), e.Canonical()); err != nil {
		return e, err
	}
	return e, l.cp.After(e, func(seq uint64, env []byte) error { return putCheckpoint(l.tx, seq, env) })
}

// putCheckpoint stores a checkpoint unless one of that seq is stored: a
// checkpoint once written is never replaced.
func putCheckpoint(tx *bbolt.Tx, seq uint64, env []byte) error {
	b := tx.Bucket(bucketCheckpoints)
	k := binary.BigEndian.AppendUint64(nil, seq)
	if b.Get(k) != nil {
		return nil
	}
	return b.Put(k, env)
}

// SignCheckpoints makes every later ledger append sign checkpoints as c
// says (nil: none).
func (s *Store) SignCheckpoints(c *store.Checkpointing) { s.checkpointing.Store(c) }

// PutCheckpoint stores a signed checkpoint of the ledger ending at seq (the
// envelope JSON); one already stored at seq stays.
func (s *Store) PutCheckpoint(ctx context.Context, seq uint64, envelope []byte) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return putCheckpoint(tx, seq, envelope) })
}

// LatestCheckpoint is the stored checkpoint of the highest seq (a nil
// envelope when there is none).
func (s *Store) LatestCheckpoint(ctx context.Context) (seq uint64, envelope []byte, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
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
func (s *Store) AppendLedger(ctx context.Context, fn func(store.Ledger) error) error {
	return s.batch(ctx, func(tx *bbolt.Tx) error { return fn(s.newLedger(tx)) })
}

// LedgerHead is the position the next entry would take.
func (s *Store) LedgerHead(ctx context.Context) (pos receipt.Position, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		pos = s.newLedger(tx).Next()
		return nil
	})
	return pos, err
}

// ExportLedger calls fn with each entry from seq from on, oldest first. fn
// runs outside any store transaction: entries are read store.ExportBatch
// per read transaction, so that a slow reader never holds one (which would
// stop the file from growing under writers) for long.
func (s *Store) ExportLedger(ctx context.Context, from uint64, fn func(receipt.Entry, []byte) error) error {
	return store.ExportInBatches(ctx, from, fn, func(ctx context.Context, from uint64, limit int) ([]store.LedgerEntry, error) {
		var batch []store.LedgerEntry
		err := s.view(ctx, func(tx *bbolt.Tx) error {
			c := tx.Bucket(bucketLedger).Cursor()
			for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, from)); k != nil && len(batch) < limit; k, v = c.Next() {
				var e receipt.Entry
				if err := json.Unmarshal(v, &e); err != nil {
					return fmt.Errorf("ledger entry %d is corrupt: %w", binary.BigEndian.Uint64(k), err)
				}
				batch = append(batch, store.LedgerEntry{Entry: e, Canonical: append([]byte(nil), v...)})
			}
			return nil
		})
		return batch, err
	})
}

// CreateSessionLedger is CreateSession with ledger entries appended by fn in
// the same transaction. The transaction is shared with concurrent session
// writes (group commit): fn may run more than once and must do nothing
// outside the transaction but assign its results (see batch).
func (s *Store) CreateSessionLedger(ctx context.Context, id string, meta []byte, fn func(store.Ledger) error, baselines ...store.BaselineWriter) error {
	defer s.done(id)
	ws, err := store.OwnWriters(id, baselines, func(w *baselineWriter) bool { return w.s == s })
	if err != nil {
		return err
	}
	now := beginStamp(time.Now())
	err = s.batch(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		if b.Get([]byte(id)) != nil {
			return store.ErrExists
		}
		for _, w := range ws {
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
		return b.Put([]byte(id), s.seal.Seal(store.PlaceSession(id), meta))
	})
	if err == nil {
		for _, w := range ws {
			w.advance()
		}
	}
	return err
}

// FinishSessionLedger stores a session's result once, built by build inside
// the transaction so that the result (and the receipt it carries) names the
// ledger entries build appends. When a result is already stored, build is
// not called and that result is returned with built false. When build asks to keep the
// baseline (a result that Reverify may judge a later read against), it
// stays; otherwise it is removed as by FinishSession. The transaction is
// shared with concurrent session writes (group commit): build may run more
// than once and must do nothing outside the transaction but return its
// result (see batch).
func (s *Store) FinishSessionLedger(ctx context.Context, id string, build func(store.Ledger) (result []byte, keepBaseline bool, err error)) (stored []byte, built bool, err error) {
	err = s.batch(ctx, func(tx *bbolt.Tx) error {
		built = false
		if tx.Bucket(bucketSessions).Get([]byte(id)) == nil {
			return store.ErrNotFound
		}
		b := tx.Bucket(bucketResults)
		if r := b.Get([]byte(id)); r != nil {
			v, ok := s.seal.Open(store.PlaceResult(id), r)
			if !ok {
				return &store.IntegrityError{Session: id, What: "result"}
			}
			stored = append([]byte(nil), v...)
			return nil
		}
		result, keep, err := build(s.newLedger(tx))
		if err != nil {
			return err
		}
		stored, built = result, true
		if err := b.Put([]byte(id), s.seal.Seal(store.PlaceResult(id), result)); err != nil {
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
	return stored, built, err
}

// AddReverification stores a further result of a finished session, built
// by build with its attempt number (1 for the first re-verification) inside
// the transaction that appends its ledger entries. The first result is never
// touched. Unless build asks to keep it, the baseline is removed (the
// session is settled). Group commit: build may run more than once (see
// batch).
func (s *Store) AddReverification(ctx context.Context, id string, build func(l store.Ledger, attempt int) (result []byte, keepBaseline bool, err error)) ([]byte, error) {
	var out []byte
	err := s.batch(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSessions).Get([]byte(id)) == nil {
			return store.ErrNotFound
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
		if err := tx.Bucket(bucketReverified).Put(fmt.Appendf(nil, "%s/%08d", id, attempt), s.seal.Seal(store.PlaceReverification(id, attempt), result)); err != nil {
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
func (s *Store) Reverifications(ctx context.Context, id string) ([][]byte, error) {
	var out [][]byte
	err := s.view(ctx, func(tx *bbolt.Tx) error {
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
func (s *Store) PutReceipt(ctx context.Context, key string, build func(store.Ledger) ([]byte, error)) ([]byte, error) {
	var out []byte
	err := s.batch(ctx, func(tx *bbolt.Tx) error {
		env, err := build(s.newLedger(tx))
		if err != nil {
			return err
		}
		out = env
		return tx.Bucket(bucketReceipts).Put([]byte(key), env)
	})
	return out, err
}
