package pg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// ledger appends to verifierd_ledger inside one transaction. The first
// use takes the ledger lock and reads the head; an error is kept and fails
// the transaction.
type ledger struct {
	ctx    context.Context
	tx     pgx.Tx
	cp     *store.Checkpointing
	s      *Store
	locked bool
	pos    receipt.Position
	err    error
}

func (s *Store) newLedger(ctx context.Context, tx pgx.Tx) *ledger {
	return &ledger{ctx: ctx, tx: tx, cp: s.checkpointing.Load(), s: s}
}

func (l *ledger) lock() error {
	if l.locked || l.err != nil {
		return l.err
	}
	if _, err := l.tx.Exec(l.ctx, "SELECT pg_advisory_xact_lock($1)", lockLedger); err != nil {
		l.err = fmt.Errorf("taking the ledger lock: %w", err)
		return l.err
	}
	// The head, and the key ids the store records: nothing is appended
	// (and so signed) under keys the store no longer records.
	var seq *int64
	var entry []byte
	var have store.Keys
	err := l.tx.QueryRow(l.ctx, `SELECT h.seq, h.entry,
			coalesce((SELECT value FROM verifierd_store_keys WHERE name = 'evidence_key_id'), ''),
			coalesce((SELECT value FROM verifierd_store_keys WHERE name = 'signing_key_id'), '')
		FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT seq, entry FROM verifierd_ledger ORDER BY seq DESC LIMIT 1) h ON true`).
		Scan(&seq, &entry, &have.EvidenceKeyID, &have.SigningKeyID)
	switch {
	case err != nil:
		l.err = fmt.Errorf("reading the ledger head: %w", err)
		return l.err
	case seq == nil:
		l.pos = receipt.Position{Seq: 1, Head: receipt.Genesis}
	default:
		l.pos = receipt.Position{Seq: uint64(*seq) + 1, Head: digestOf(entry)}
	}
	if err := l.s.keysChanged(have); err != nil {
		l.err = err
		return l.err
	}
	l.locked = true
	return nil
}

// Next is the position the next Append takes (the zero Position once the
// handle failed).
func (l *ledger) Next() receipt.Position {
	if l.lock() != nil {
		return receipt.Position{}
	}
	return l.pos
}

// Append adds one entry at Next, with the checkpoint it calls for.
func (l *ledger) Append(typ, session, digest string) (receipt.Entry, error) {
	if err := l.lock(); err != nil {
		return receipt.Entry{}, err
	}
	e := receipt.Entry{Seq: l.pos.Seq, Prev: l.pos.Head, Type: typ, Session: session, Digest: digest, At: time.Now().UTC()}
	c := e.Canonical()
	if _, err := l.tx.Exec(l.ctx, "INSERT INTO verifierd_ledger (seq, entry) VALUES ($1, $2)", int64(e.Seq), c); err != nil {
		l.err = fmt.Errorf("appending ledger entry %d: %w", e.Seq, err)
		return receipt.Entry{}, l.err
	}
	l.pos = receipt.Position{Seq: e.Seq + 1, Head: digestOf(c)}
	if err := l.cp.After(e, func(seq uint64, env []byte) error { return putCheckpoint(l.ctx, l.tx, seq, env) }); err != nil {
		l.err = err
		return receipt.Entry{}, err
	}
	return e, nil
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func putCheckpoint(ctx context.Context, q execer, seq uint64, envelope []byte) error {
	if _, err := q.Exec(ctx, "INSERT INTO verifierd_ledger_checkpoints (seq, envelope) VALUES ($1, $2) ON CONFLICT (seq) DO NOTHING", int64(seq), envelope); err != nil {
		return fmt.Errorf("storing the ledger checkpoint at seq %d: %w", seq, err)
	}
	return nil
}

// SignCheckpoints makes every later ledger append sign checkpoints as c
// says (nil: none).
func (s *Store) SignCheckpoints(c *store.Checkpointing) { s.checkpointing.Store(c) }

// PutCheckpoint stores a signed checkpoint of the ledger ending at seq.
func (s *Store) PutCheckpoint(ctx context.Context, seq uint64, envelope []byte) error {
	return putCheckpoint(ctx, s.pool, seq, envelope)
}

// LatestCheckpoint is the stored checkpoint of the highest seq (a nil
// envelope when there is none).
func (s *Store) LatestCheckpoint(ctx context.Context) (uint64, []byte, error) {
	var seq int64
	var env []byte
	err := s.pool.QueryRow(ctx, "SELECT seq, envelope FROM verifierd_ledger_checkpoints ORDER BY seq DESC LIMIT 1").Scan(&seq, &env)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, nil
	}
	return uint64(seq), env, err
}

func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// withLedger runs fn with a ledger handle and fails when the handle failed,
// whatever fn returned.
func (s *Store) withLedger(ctx context.Context, tx pgx.Tx, fn func(store.Ledger) error) error {
	l := s.newLedger(ctx, tx)
	err := fn(l)
	if l.err != nil {
		return l.err
	}
	return err
}

// AppendLedger runs fn in a transaction of its own.
func (s *Store) AppendLedger(ctx context.Context, fn func(store.Ledger) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error { return s.withLedger(ctx, tx, fn) })
}

// LedgerHead is the position the next entry would take.
func (s *Store) LedgerHead(ctx context.Context) (receipt.Position, error) {
	var seq uint64
	var entry []byte
	err := s.pool.QueryRow(ctx, "SELECT seq, entry FROM verifierd_ledger ORDER BY seq DESC LIMIT 1").Scan(&seq, &entry)
	if errors.Is(err, pgx.ErrNoRows) {
		return receipt.Position{Seq: 1, Head: receipt.Genesis}, nil
	}
	if err != nil {
		return receipt.Position{}, err
	}
	return receipt.Position{Seq: seq + 1, Head: digestOf(entry)}, nil
}

// ExportLedger calls fn with each entry from seq from on, oldest first, in
// batches read outside any transaction.
func (s *Store) ExportLedger(ctx context.Context, from uint64, fn func(receipt.Entry, []byte) error) error {
	return store.ExportInBatches(ctx, from, fn, func(ctx context.Context, from uint64, limit int) ([]store.LedgerEntry, error) {
		rows, err := s.pool.Query(ctx, "SELECT seq, entry FROM verifierd_ledger WHERE seq >= $1 ORDER BY seq LIMIT $2", int64(from), limit)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var b []store.LedgerEntry
		for rows.Next() {
			var seq int64
			var c []byte
			if err := rows.Scan(&seq, &c); err != nil {
				return nil, err
			}
			var e receipt.Entry
			if err := json.Unmarshal(c, &e); err != nil {
				return nil, fmt.Errorf("ledger entry %d is corrupt: %w", seq, err)
			}
			b = append(b, store.LedgerEntry{Entry: e, Canonical: c})
		}
		return b, rows.Err()
	})
}
