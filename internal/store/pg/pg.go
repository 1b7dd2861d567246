// Package pg is the session store on PostgreSQL: the same sessions,
// baselines, results, hash-chained ledger and reward marks as the embedded
// store (internal/store/bolt), in one database that several daemon
// replicas share. It implements store.Backend; the daemon selects it for a
// postgres:// store DSN.
//
// Every call runs under its context: pgx cancels a query whose context
// ends (PostgreSQL's cancel request), so a call waiting on a lock or a
// slow server returns with ctx's error and its transaction rolls back.
//
// Every write that appends to the ledger takes one transaction-scoped
// advisory lock, so that the chain stays one chain whatever replica writes;
// a session's result is written under the session row's lock, so that the
// first Verify wins and every later one returns the stored result.
package pg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/verifierd/verifierd/internal/store"
)

// Advisory lock keys (one bigint space per database).
const (
	lockMigrate int64 = 0x7665726966000001 // schema migrations, session-scoped
	lockLedger  int64 = 0x7665726966000002 // ledger appends, transaction-scoped
	lockReward  int64 = 0x7665726966000003 // reward updates, transaction-scoped
)

// chunkBytes bounds one stored baseline chunk (one row).
const chunkBytes = 1 << 20

// batch bounds the sessions removed per transaction by the cleanups.
const batch = 16

// orphanGrace is how long uncommitted baseline chunks are kept when the
// unfinished-session retention is off: another replica may still be
// streaming them.
const orphanGrace = 24 * time.Hour

// Options tune the store.
type Options struct {
	// PasswordEnv names an environment variable holding the password; it
	// overrides a password in the DSN. The value is never logged.
	PasswordEnv string
	// MaxConns bounds the connection pool (0: pgx's default).
	MaxConns int32
}

// Store is the PostgreSQL session store.
type Store struct {
	pool  *pgxpool.Pool
	where string // server:port/database, for messages
	// seal tags and checks values (nil until Bind: values pass unchecked).
	seal *store.Sealer
	// checkpointing is what SignCheckpoints set (nil: no checkpoints).
	checkpointing atomic.Pointer[store.Checkpointing]
	// bound are the key ids Bind recorded or accepted (nil before Bind):
	// every ledger append and RecheckKeys compare the store's with them.
	bound atomic.Pointer[store.Keys]
	// lease holds the replica lease (lease.go) from Bind to Close.
	leaseMu sync.Mutex
	lease   *pgxpool.Conn
}

var _ store.Backend = (*Store)(nil)

// IsDSN reports whether s names a PostgreSQL database.
func IsDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ErrBadDSN says that a DSN does not parse. pgx's own message may quote
// the DSN, password included, so it is never passed on.
var ErrBadDSN = errors.New("the PostgreSQL DSN does not parse; write it as postgres://USER@HOST:PORT/DATABASE?sslmode=… and pass the password through Options.PasswordEnv, not in the DSN")

// PasswordEnvError says that Options.PasswordEnv names an environment
// variable that is unset or empty.
type PasswordEnvError struct{ Name string }

func (e *PasswordEnvError) Error() string {
	return fmt.Sprintf("environment variable %s (the PostgreSQL password) is not set", e.Name)
}

// Open connects to the database named by dsn and runs the schema
// migrations (idempotently, under an advisory lock, so that replicas
// starting together migrate once). Errors never carry the password.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN; say only what is wrong.
		return nil, ErrBadDSN
	}
	if opts.PasswordEnv != "" {
		pw, ok := os.LookupEnv(opts.PasswordEnv)
		if !ok || pw == "" {
			return nil, &PasswordEnvError{Name: opts.PasswordEnv}
		}
		cfg.ConnConfig.Password = pw
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	cfg.MaxConns++ // the replica lease (lease.go) holds one connection
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", where(cfg), err)
	}
	s := &Store{pool: pool, where: where(cfg)}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", where(cfg), err)
	}
	return s, nil
}

// where names the server and database without the credentials.
func where(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}

// migrations are applied in order, each once; the applied versions are
// recorded in verifierd_schema. Never edit one that shipped: append.
var migrations = []string{
	// 1: the session store.
	`CREATE TABLE verifierd_sessions (
		id          text PRIMARY KEY,
		meta        bytea NOT NULL,
		result      bytea,
		begun_at    timestamptz NOT NULL,
		finished_at timestamptz
	);
	CREATE INDEX verifierd_sessions_finished ON verifierd_sessions (finished_at) WHERE finished_at IS NOT NULL;
	CREATE INDEX verifierd_sessions_unfinished ON verifierd_sessions (begun_at) WHERE finished_at IS NULL;
	CREATE TABLE verifierd_baseline_chunks (
		session_id text NOT NULL,
		capture    integer NOT NULL,
		seq        integer NOT NULL,
		data       bytea NOT NULL,
		written_at timestamptz NOT NULL,
		PRIMARY KEY (session_id, capture, seq)
	);
	CREATE TABLE verifierd_reverifications (
		session_id text NOT NULL,
		attempt    integer NOT NULL,
		result     bytea NOT NULL,
		PRIMARY KEY (session_id, attempt)
	);
	CREATE TABLE verifierd_receipts (
		key      text PRIMARY KEY,
		envelope bytea NOT NULL
	);
	CREATE TABLE verifierd_ledger (
		seq   bigint PRIMARY KEY,
		entry bytea NOT NULL
	);
	CREATE TABLE verifierd_reward (
		bucket text NOT NULL,
		key    text NOT NULL,
		value  bytea NOT NULL,
		PRIMARY KEY (bucket, key)
	);`,
	// 2: the key ids of the store's first writer and the sealed mark
	// (integrity.go).
	`CREATE TABLE verifierd_store_keys (
		name  text PRIMARY KEY,
		value text NOT NULL
	);`,
	// 3: signed ledger checkpoints (seq -> DSSE envelope JSON).
	`CREATE TABLE verifierd_ledger_checkpoints (
		seq      bigint PRIMARY KEY,
		envelope bytea NOT NULL
	);`,
	// 4: runs (runs.go) and the sessions they hold from the cleanups.
	`CREATE TABLE verifierd_runs (
		id       text PRIMARY KEY,
		record   bytea NOT NULL,
		begun_at timestamptz NOT NULL
	);
	CREATE TABLE verifierd_run_holds (
		session_id text PRIMARY KEY,
		run_id     text NOT NULL,
		sealed_at  timestamptz
	);
	CREATE INDEX verifierd_run_holds_run ON verifierd_run_holds (run_id);`,
}

// tables are the store's tables, for Size.
var tables = []string{"verifierd_sessions", "verifierd_baseline_chunks", "verifierd_reverifications", "verifierd_receipts", "verifierd_ledger", "verifierd_ledger_checkpoints", "verifierd_reward", "verifierd_schema", "verifierd_store_keys", "verifierd_runs", "verifierd_run_holds"}

// migrate applies the missing migrations under a session-level advisory
// lock held on one connection.
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockMigrate); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockMigrate) //nolint:errcheck // the lock goes with the session anyway
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS verifierd_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("creating verifierd_schema: %w", err)
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM verifierd_schema").Scan(&have); err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("the database's schema is version %d, newer than this verifierd knows (%d): run the newer verifierd", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO verifierd_schema (version) VALUES ($1)", v)
			return err
		})
		if err != nil {
			return fmt.Errorf("schema migration %d: %w", v, err)
		}
	}
	return nil
}

// SchemaVersion is the newest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM verifierd_schema").Scan(&v)
	return v, err
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Close closes the connection pool.
func (s *Store) Close() error {
	s.releaseLease()
	s.pool.Close()
	return nil
}

// tx runs fn in one transaction under ctx: when ctx ends, the statement
// in progress is cancelled and the transaction rolls back.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// Session returns a session's metadata and, once verified, its result.
func (s *Store) Session(ctx context.Context, id string) (meta, result []byte, err error) {
	err = s.pool.QueryRow(ctx, "SELECT meta, result FROM verifierd_sessions WHERE id = $1", id).Scan(&meta, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, store.ErrNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	return s.openSession(id, meta, result)
}

// baselineWriter streams one capture into chunk rows: every full chunk is
// its own insert; the last one commits with the session (CreateSession).
type baselineWriter struct {
	s       *Store
	id      string
	capture int
	pending []byte
	n       int
	seq     int
}

// NewBaseline starts writing capture number capture of session id.
func (s *Store) NewBaseline(id string, capture int) store.BaselineWriter {
	return &baselineWriter{s: s, id: id, capture: capture}
}

func (w *baselineWriter) Add(ctx context.Context, rec []byte) error {
	w.pending = binary.AppendUvarint(w.pending, uint64(len(rec)))
	w.pending = append(w.pending, rec...)
	w.n++
	if len(w.pending) >= chunkBytes {
		if err := w.commit(ctx, w.s.pool); err != nil {
			return err
		}
		w.advance()
	}
	return nil
}

func (w *baselineWriter) Close(ctx context.Context) error {
	if err := w.commit(ctx, w.s.pool); err != nil {
		return err
	}
	w.advance()
	return nil
}

// commit writes the pending chunk (an empty one for an empty baseline, so
// that the capture exists). It changes nothing in w, so that a transaction
// rolled back can write the same chunk again; advance moves on once it is
// committed.
func (w *baselineWriter) commit(ctx context.Context, db execer) error {
	if w.n == 0 && w.seq > 0 {
		return nil
	}
	chunk := w.s.seal.Seal(store.PlaceBaseline(w.id, w.capture, uint64(w.seq)), w.pending)
	if chunk == nil {
		chunk = []byte{}
	}
	if _, err := db.Exec(ctx, "INSERT INTO verifierd_baseline_chunks (session_id, capture, seq, data, written_at) VALUES ($1, $2, $3, $4, $5)",
		w.id, w.capture, w.seq, chunk, time.Now()); err != nil {
		return fmt.Errorf("writing baseline chunk %d of session %s: %w", w.seq, w.id, err)
	}
	return nil
}

// advance forgets the chunk commit wrote, once it is committed.
func (w *baselineWriter) advance() {
	if w.n == 0 && w.seq > 0 {
		return
	}
	w.pending, w.n = nil, 0
	w.seq++
}

// ReadBaseline calls fn for every record of capture number capture of
// session id, in the order written, streaming chunk rows.
func (s *Store) ReadBaseline(ctx context.Context, id string, capture int, fn func(rec []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT seq, data FROM verifierd_baseline_chunks WHERE session_id = $1 AND capture = $2 ORDER BY seq", id, capture)
	if err != nil {
		return err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		found = true
		var seq int64
		var chunk []byte
		if err := rows.Scan(&seq, &chunk); err != nil {
			return err
		}
		chunk, ok := s.seal.Open(store.PlaceBaseline(id, capture, uint64(seq)), chunk)
		if !ok {
			return &store.IntegrityError{Session: id, What: fmt.Sprintf("baseline capture %d chunk %d", capture, seq)}
		}
		for len(chunk) > 0 {
			n, k := binary.Uvarint(chunk)
			if k <= 0 || uint64(len(chunk)-k) < n {
				return fmt.Errorf("baseline %s/%d is corrupt", id, capture)
			}
			if err := fn(chunk[k : k+int(n)]); err != nil {
				return err
			}
			chunk = chunk[k+int(n):]
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !found {
		return store.ErrNotFound
	}
	return nil
}

// DropBaseline removes the baseline chunks of a session that was never
// created (a Begin refused part-way).
func (s *Store) DropBaseline(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM verifierd_baseline_chunks WHERE session_id = $1
		AND NOT EXISTS (SELECT 1 FROM verifierd_sessions WHERE id = $1)`, id)
	return err
}

// CreateSessionLedger records a new session, commits the baselines' last
// chunks and runs fn's ledger appends in one transaction.
func (s *Store) CreateSessionLedger(ctx context.Context, id string, meta []byte, fn func(store.Ledger) error, baselines ...store.BaselineWriter) error {
	ws, err := store.OwnWriters(id, baselines, func(w *baselineWriter) bool { return w.s == s })
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO verifierd_sessions (id, meta, begun_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING", id, s.seal.Seal(store.PlaceSession(id), meta), time.Now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrExists
		}
		for _, w := range ws {
			if err := w.commit(ctx, tx); err != nil {
				return err
			}
		}
		return s.withLedger(ctx, tx, fn)
	})
	if err == nil {
		for _, w := range ws {
			w.advance()
		}
	}
	return err
}

// CreateSession records a new session without ledger entries.
func (s *Store) CreateSession(ctx context.Context, id string, meta []byte, baselines ...store.BaselineWriter) error {
	return s.CreateSessionLedger(ctx, id, meta, func(store.Ledger) error { return nil }, baselines...)
}

// lockResult locks the session's row until tx ends and returns its stored
// result (nil before the first), or store.ErrNotFound.
func (s *Store) lockResult(ctx context.Context, tx pgx.Tx, id string) ([]byte, error) {
	var have []byte
	err := tx.QueryRow(ctx, "SELECT result FROM verifierd_sessions WHERE id = $1 FOR UPDATE", id).Scan(&have)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil || have == nil {
		return have, err
	}
	v, ok := s.seal.Open(store.PlaceResult(id), have)
	if !ok {
		return nil, &store.IntegrityError{Session: id, What: "result"}
	}
	return v, nil
}

// FinishSessionLedger stores a session's result once, under the session
// row's lock: the first writer (on any replica) stores its result, every
// later or concurrent one gets that stored result back (built false) and
// build is not called.
func (s *Store) FinishSessionLedger(ctx context.Context, id string, build func(store.Ledger) (result []byte, keepBaseline bool, err error)) ([]byte, bool, error) {
	var stored []byte
	var built bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		have, err := s.lockResult(ctx, tx, id)
		if err != nil {
			return err
		}
		if have != nil {
			stored = have
			return nil
		}
		var keep bool
		err = s.withLedger(ctx, tx, func(l store.Ledger) error {
			var err error
			stored, keep, err = build(l)
			return err
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE verifierd_sessions SET result = $2, finished_at = $3 WHERE id = $1", id, s.seal.Seal(store.PlaceResult(id), stored), time.Now()); err != nil {
			return err
		}
		built = true
		return dropBaselineUnless(ctx, tx, id, keep)
	})
	if err != nil {
		return nil, false, err
	}
	return stored, built, nil
}

// dropBaselineUnless removes a session's baseline chunks in tx unless the
// result asked to keep them (for a later re-verification).
func dropBaselineUnless(ctx context.Context, tx pgx.Tx, id string, keep bool) error {
	if keep {
		return nil
	}
	_, err := tx.Exec(ctx, "DELETE FROM verifierd_baseline_chunks WHERE session_id = $1", id)
	return err
}

// FinishSession stores a session's result once and returns the stored one.
func (s *Store) FinishSession(ctx context.Context, id string, result []byte) ([]byte, error) {
	stored, _, err := s.FinishSessionLedger(ctx, id, func(store.Ledger) ([]byte, bool, error) { return result, false, nil })
	return stored, err
}

// AddReverification stores a further result of a finished session with its
// attempt number, under the session row's lock.
func (s *Store) AddReverification(ctx context.Context, id string, build func(l store.Ledger, attempt int) (result []byte, keepBaseline bool, err error)) ([]byte, error) {
	var out []byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		have, err := s.lockResult(ctx, tx, id)
		if err != nil {
			return err
		}
		if have == nil {
			return fmt.Errorf("session %s has no first result to re-verify", id)
		}
		var attempt int
		if err := tx.QueryRow(ctx, "SELECT count(*) + 1 FROM verifierd_reverifications WHERE session_id = $1", id).Scan(&attempt); err != nil {
			return err
		}
		var keep bool
		err = s.withLedger(ctx, tx, func(l store.Ledger) error {
			var err error
			out, keep, err = build(l, attempt)
			return err
		})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO verifierd_reverifications (session_id, attempt, result) VALUES ($1, $2, $3)", id, attempt, s.seal.Seal(store.PlaceReverification(id, attempt), out)); err != nil {
			return err
		}
		return dropBaselineUnless(ctx, tx, id, keep)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Reverifications returns a session's further results, oldest first.
func (s *Store) Reverifications(ctx context.Context, id string) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, "SELECT attempt, result FROM verifierd_reverifications WHERE session_id = $1 ORDER BY attempt", id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var attempt int
		var v []byte
		if err := rows.Scan(&attempt, &v); err != nil {
			return nil, err
		}
		v, ok := s.seal.Open(store.PlaceReverification(id, attempt), v)
		if !ok {
			return nil, &store.IntegrityError{Session: id, What: fmt.Sprintf("re-verification %d", attempt)}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// PutReceipt stores a receipt that belongs to no session result under key,
// built by build inside the transaction that appends its ledger entries.
func (s *Store) PutReceipt(ctx context.Context, key string, build func(store.Ledger) ([]byte, error)) ([]byte, error) {
	var out []byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := s.withLedger(ctx, tx, func(l store.Ledger) error {
			var err error
			out, err = build(l)
			return err
		})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO verifierd_receipts (key, envelope) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET envelope = EXCLUDED.envelope`, key, out)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rewardTx is the reward buckets and the ledger inside one transaction.
// An error is kept and fails the transaction.
type rewardTx struct {
	ctx    context.Context
	tx     pgx.Tx
	seal   *store.Sealer
	ledger *ledger
	err    error
}

func (r *rewardTx) Get(b store.RewardBucket, key string) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	var v []byte
	err := r.tx.QueryRow(r.ctx, "SELECT value FROM verifierd_reward WHERE bucket = $1 AND key = $2", b.String(), key).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		r.err = fmt.Errorf("reading %s/%s: %w", b, key, err)
		return nil, r.err
	}
	if v == nil {
		return nil, nil
	}
	v, ok := r.seal.Open(store.PlaceReward(b, key), v)
	if !ok {
		r.err = &store.IntegrityError{What: "reward record " + b.String() + "/" + key}
		return nil, r.err
	}
	return v, nil
}

func (r *rewardTx) Put(b store.RewardBucket, key string, value []byte) error {
	if r.err != nil {
		return r.err
	}
	_, err := r.tx.Exec(r.ctx, `INSERT INTO verifierd_reward (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`, b.String(), key, r.seal.Seal(store.PlaceReward(b, key), value))
	if err != nil {
		r.err = fmt.Errorf("writing %s/%s: %w", b, key, err)
	}
	return r.err
}

func (r *rewardTx) Ledger() store.Ledger { return r.ledger }

// RewardUpdate runs fn in one transaction that holds the reward lock, so
// that reward updates are serialized across replicas as the embedded
// store's single writer serializes them: a mark read in fn is the newest.
func (s *Store) RewardUpdate(ctx context.Context, fn func(store.RewardTx) error) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockReward); err != nil {
			return fmt.Errorf("taking the reward lock: %w", err)
		}
		t := &rewardTx{ctx: ctx, tx: tx, seal: s.seal, ledger: s.newLedger(ctx, tx)}
		err := fn(t)
		if t.err != nil {
			return t.err
		}
		if t.ledger.err != nil {
			return t.ledger.err
		}
		return err
	})
}

// RewardGet reads one value of a reward bucket (nil when absent).
func (s *Store) RewardGet(ctx context.Context, b store.RewardBucket, key string) ([]byte, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM verifierd_reward WHERE bucket = $1 AND key = $2", b.String(), key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, ok := s.seal.Open(store.PlaceReward(b, key), v)
	if !ok {
		return nil, &store.IntegrityError{What: "reward record " + b.String() + "/" + key}
	}
	return v, nil
}

// sizeTimeout bounds Size's query: a gauge must not wait on a slow server.
const sizeTimeout = 5 * time.Second

// Size is the sum of pg_total_relation_size over the store's tables (0
// when it cannot be read), for the store size gauge.
func (s *Store) Size(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, sizeTimeout)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = ANY($1) AND n.nspname = current_schema()`, tables).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}

// ForEachSession calls fn with every session's metadata and result (nil
// until verified), in session id order, streaming rows.
func (s *Store) ForEachSession(ctx context.Context, fn func(id string, meta, result []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT id, meta, result FROM verifierd_sessions ORDER BY id")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var meta, result []byte
		if err := rows.Scan(&id, &meta, &result); err != nil {
			return err
		}
		meta, result, err := s.openSession(id, meta, result)
		if _, damaged := errors.AsType[*store.IntegrityError](err); damaged {
			meta, result, err = nil, nil, nil
		}
		if err != nil {
			return err
		}
		if err := fn(id, meta, result); err != nil {
			return err
		}
	}
	return rows.Err()
}
