package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/store"
)

// Values checked on read, as in the embedded store (internal/store,
// integrity.go): every meta, result, re-verification, baseline chunk and
// reward value ends with its tag; verifierd_store_keys records the key ids
// of the store's first writer and the sealed mark.

// lockKeys serializes Bind across replicas starting together.
const lockKeys int64 = 0x7665726966000004

// openSession checks a session's record and result.
func (s *Store) openSession(id string, meta, result []byte) ([]byte, []byte, error) {
	m, ok := s.seal.Open(store.PlaceSession(id), meta)
	if !ok {
		return nil, nil, &store.IntegrityError{Session: id, What: "record"}
	}
	if result == nil {
		return m, nil, nil
	}
	r, ok := s.seal.Open(store.PlaceResult(id), result)
	if !ok {
		return nil, nil, &store.IntegrityError{Session: id, What: "result"}
	}
	return m, r, nil
}

// readKeys reads the recorded key ids and the sealed mark.
func readKeys(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (store.Keys, bool, error) {
	rows, err := q.Query(ctx, "SELECT name, value FROM verifierd_store_keys")
	if err != nil {
		return store.Keys{}, false, err
	}
	kv, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var p [2]string
		return p, r.Scan(&p[0], &p[1])
	})
	if err != nil {
		return store.Keys{}, false, err
	}
	var k store.Keys
	sealed := false
	for _, p := range kv {
		switch p[0] {
		case "evidence_key_id":
			k.EvidenceKeyID = p[1]
		case "signing_key_id":
			k.SigningKeyID = p[1]
		case "sealed":
			sealed = p[1] == store.SealVersion
		}
	}
	return k, sealed, nil
}

// Bind ties the store to this daemon's keys (see store.Backend): under an
// advisory lock, so that replicas starting together bind one after the
// other, it records the first writer's key ids, refuses other keys unless
// rotate, and seals the values of a store written before tags existed, in
// one transaction.
func (s *Store) Bind(ctx context.Context, integrityKey []byte, keys store.Keys, rotate bool) (store.BindReport, error) {
	seal := store.NewSealer(integrityKey)
	if err := s.takeLease(ctx, rotate); err != nil {
		return store.BindReport{}, err
	}
	var rep store.BindReport
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rep = store.BindReport{}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKeys); err != nil {
			return fmt.Errorf("taking the key lock: %w", err)
		}
		have, sealed, err := readKeys(ctx, tx)
		if err != nil {
			return err
		}
		if have == (store.Keys{}) {
			rep.FirstWriter = true
		} else {
			rotated, err := store.CheckKeys("postgres "+s.where, have, keys, rotate)
			if err != nil {
				return err
			}
			rep.Rotated = rotated
			if rotated && sealed && have.EvidenceKeyID != keys.EvidenceKeyID {
				n, err := eachValue(ctx, tx, func(place string, _ store.Damage, v []byte) []byte { return seal.Seal(place, store.Strip(v)) })
				if err != nil {
					return err
				}
				rep.Resealed = n
			}
		}
		if !sealed {
			n, err := eachValue(ctx, tx, func(place string, _ store.Damage, v []byte) []byte { return seal.Seal(place, v) })
			if err != nil {
				return err
			}
			rep.Sealed = n
		}
		for name, value := range map[string]string{"evidence_key_id": keys.EvidenceKeyID, "signing_key_id": keys.SigningKeyID, "sealed": store.SealVersion} {
			if _, err := tx.Exec(ctx, `INSERT INTO verifierd_store_keys (name, value) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, name, value); err != nil {
				return fmt.Errorf("recording the store's keys: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return store.BindReport{}, err
	}
	s.seal = seal
	s.bound.Store(&keys)
	if rotate {
		if err := s.shareLease(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// CheckValues checks every tagged value under the evidence key and lists
// the damaged ones; the store is only read.
func (s *Store) CheckValues(ctx context.Context, evidenceKey []byte) (*store.ValueReport, error) {
	rep := &store.ValueReport{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		if rep.Keys, rep.Sealed, err = readKeys(ctx, tx); err != nil {
			return err
		}
		seal := store.CheckSealer(rep, evidenceKey)
		if rep.Problem != "" {
			return nil
		}
		_, err = eachValue(ctx, tx, func(place string, d store.Damage, v []byte) []byte {
			rep.Check(seal, place, d, v)
			return nil
		})
		if err != nil {
			return err
		}
		rep.Ledger, err = checkLedger(ctx, tx, rep.Keys.SigningKeyID)
		return err
	})
	return rep, err
}

// checkLedger checks the ledger's chain and signed checkpoints in tx,
// reading the entries a batch at a time.
func checkLedger(ctx context.Context, tx pgx.Tx, signingKeyID string) (store.LedgerReport, error) {
	c := store.NewLedgerChecker(signingKeyID)
	rows, err := tx.Query(ctx, "SELECT seq, envelope FROM verifierd_ledger_checkpoints ORDER BY seq")
	if err != nil {
		return store.LedgerReport{}, err
	}
	var seq int64
	var v []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &v}, func() error {
		c.Checkpoint(uint64(seq), v)
		return nil
	})
	if err != nil {
		return store.LedgerReport{}, err
	}
	rows, err = tx.Query(ctx, "SELECT seq, entry FROM verifierd_ledger ORDER BY seq")
	if err != nil {
		return store.LedgerReport{}, err
	}
	_, err = pgx.ForEachRow(rows, []any{&seq, &v}, func() error {
		c.Entry(uint64(seq), v)
		return nil
	})
	return c.Report(), err
}

// eachValue calls fn with every tagged value of the store; a non-nil
// answer replaces the value (in tx). It returns how many it replaced.
func eachValue(ctx context.Context, tx pgx.Tx, fn func(place string, d store.Damage, v []byte) []byte) (int, error) {
	n := 0
	type row struct {
		keys  []any
		place string
		d     store.Damage
		v     []byte
	}
	scan := func(sel, upd string, read func(pgx.CollectableRow) (row, error)) error {
		rows, err := tx.Query(ctx, sel)
		if err != nil {
			return err
		}
		all, err := pgx.CollectRows(rows, read)
		if err != nil {
			return err
		}
		for _, r := range all {
			nv := fn(r.place, r.d, r.v)
			if nv == nil {
				continue
			}
			if _, err := tx.Exec(ctx, upd, append(r.keys, nv)...); err != nil {
				return err
			}
			n++
		}
		return nil
	}
	err := scan("SELECT id, meta FROM verifierd_sessions ORDER BY id",
		"UPDATE verifierd_sessions SET meta = $2 WHERE id = $1",
		func(c pgx.CollectableRow) (row, error) {
			var id string
			var v []byte
			err := c.Scan(&id, &v)
			return row{keys: []any{id}, place: store.PlaceSession(id), d: store.Damage{Session: id, What: "record"}, v: v}, err
		})
	if err == nil {
		err = scan("SELECT id, result FROM verifierd_sessions WHERE result IS NOT NULL ORDER BY id",
			"UPDATE verifierd_sessions SET result = $2 WHERE id = $1",
			func(c pgx.CollectableRow) (row, error) {
				var id string
				var v []byte
				err := c.Scan(&id, &v)
				return row{keys: []any{id}, place: store.PlaceResult(id), d: store.Damage{Session: id, What: "result"}, v: v}, err
			})
	}
	if err == nil {
		err = scan("SELECT session_id, attempt, result FROM verifierd_reverifications ORDER BY session_id, attempt",
			"UPDATE verifierd_reverifications SET result = $3 WHERE session_id = $1 AND attempt = $2",
			func(c pgx.CollectableRow) (row, error) {
				var id string
				var attempt int
				var v []byte
				err := c.Scan(&id, &attempt, &v)
				return row{keys: []any{id, attempt}, place: store.PlaceReverification(id, attempt),
					d: store.Damage{Session: id, What: fmt.Sprintf("re-verification %d", attempt)}, v: v}, err
			})
	}
	if err == nil {
		err = scan("SELECT session_id, capture, seq, data FROM verifierd_baseline_chunks ORDER BY session_id, capture, seq",
			"UPDATE verifierd_baseline_chunks SET data = $4 WHERE session_id = $1 AND capture = $2 AND seq = $3",
			func(c pgx.CollectableRow) (row, error) {
				var id string
				var capture, seq int
				var v []byte
				err := c.Scan(&id, &capture, &seq, &v)
				return row{keys: []any{id, capture, seq}, place: store.PlaceBaseline(id, capture, uint64(seq)),
					d: store.Damage{Session: id, What: fmt.Sprintf("baseline capture %d chunk %d", capture, seq)}, v: v}, err
			})
	}
	if err == nil {
		err = scan("SELECT bucket, key, value FROM verifierd_reward ORDER BY bucket, key",
			"UPDATE verifierd_reward SET value = $3 WHERE bucket = $1 AND key = $2",
			func(c pgx.CollectableRow) (row, error) {
				var bucket, key string
				var v []byte
				err := c.Scan(&bucket, &key, &v)
				return row{keys: []any{bucket, key}, place: store.PlaceRewardNamed(bucket, key),
					d: store.Damage{What: "reward record " + bucket + "/" + key}, v: v}, err
			})
	}
	if err == nil {
		err = scan("SELECT id, record FROM verifierd_runs ORDER BY id",
			"UPDATE verifierd_runs SET record = $2 WHERE id = $1",
			func(c pgx.CollectableRow) (row, error) {
				var id string
				var v []byte
				err := c.Scan(&id, &v)
				return row{keys: []any{id}, place: store.PlaceRun(id), d: store.Damage{What: "run " + id}, v: v}, err
			})
	}
	if err != nil {
		return 0, fmt.Errorf("reading the store's values: %w", err)
	}
	return n, nil
}

// ErrTargetNotEmpty refuses a salvage into a database that holds a store.
var ErrTargetNotEmpty = errors.New("the salvage target is not empty")

// SalvageReport says what SalvageInto copied and what it left out.
type SalvageReport struct {
	Sessions, Results, Reverifications, BaselineChunks, LedgerEntries, Receipts, RewardRecords, Runs int
	// Skipped are the sessions left out whole because a value of theirs
	// fails its integrity check; Damaged names every such value (reward
	// records included, which are left out alone).
	Skipped []string
	Damaged []store.Damage
}

// SalvageInto copies this store into dst, an empty store in another
// database, leaving out every session with a damaged value (its record,
// results, re-verifications and baseline) and every damaged reward record
// or run record.
// The ledger, stand-alone receipts and the recorded key ids are copied as
// they are, and the copied values keep their tags, so the daemon runs on
// dst with the same keys. Tables are read whole into memory.
func (s *Store) SalvageInto(ctx context.Context, dst *Store, evidenceKey []byte) (*SalvageReport, error) {
	vr, err := s.CheckValues(ctx, evidenceKey)
	if err != nil {
		return nil, err
	}
	if vr.Problem != "" {
		return nil, fmt.Errorf("%w%s", store.ErrEvidenceKey, strings.TrimPrefix(vr.Problem, store.ErrEvidenceKey.Error()))
	}
	var n int
	if err := dst.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM verifierd_sessions) + (SELECT count(*) FROM verifierd_ledger) + (SELECT count(*) FROM verifierd_store_keys)").Scan(&n); err != nil {
		return nil, fmt.Errorf("reading the salvage target at %s: %w", dst.where, err)
	}
	if n > 0 {
		return nil, fmt.Errorf("%w: the database at %s already holds a store; salvage into an empty database", ErrTargetNotEmpty, dst.where)
	}
	rep := &SalvageReport{Damaged: vr.Damaged, Skipped: vr.DamagedSessions()}
	skip, skipReward := map[string]bool{}, map[string]bool{}
	for _, id := range rep.Skipped {
		skip[id] = true
	}
	for _, d := range vr.Damaged {
		if d.Session == "" {
			skipReward[d.What] = true
		}
	}
	sessionOK := func(v []any) bool { id, _ := v[0].(string); return !skip[id] }
	all := func([]any) bool { return true }
	tables := []struct {
		name  string
		cols  string
		keep  func([]any) bool
		count *int
	}{
		{"verifierd_store_keys", "name, value", all, nil},
		{"verifierd_sessions", "id, meta, result, begun_at, finished_at", sessionOK, &rep.Sessions},
		{"verifierd_baseline_chunks", "session_id, capture, seq, data, written_at", sessionOK, &rep.BaselineChunks},
		{"verifierd_reverifications", "session_id, attempt, result", sessionOK, &rep.Reverifications},
		{"verifierd_receipts", "key, envelope", all, &rep.Receipts},
		{"verifierd_ledger", "seq, entry", all, &rep.LedgerEntries},
		{"verifierd_ledger_checkpoints", "seq, envelope", all, nil},
		{"verifierd_reward", "bucket, key, value", func(v []any) bool {
			b, _ := v[0].(string)
			k, _ := v[1].(string)
			return !skipReward["reward record "+b+"/"+k]
		}, &rep.RewardRecords},
		{"verifierd_runs", "id, record, begun_at", func(v []any) bool {
			id, _ := v[0].(string)
			return !skipReward["run "+id]
		}, &rep.Runs},
		{"verifierd_run_holds", "session_id, run_id, sealed_at", all, nil},
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(src pgx.Tx) error {
		return pgx.BeginFunc(ctx, dst.pool, func(out pgx.Tx) error {
			for _, t := range tables {
				rows, err := src.Query(ctx, "SELECT "+t.cols+" FROM "+t.name)
				if err != nil {
					return err
				}
				vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
				if err != nil {
					return fmt.Errorf("reading %s: %w", t.name, err)
				}
				ph := make([]string, len(strings.Split(t.cols, ",")))
				for i := range ph {
					ph[i] = fmt.Sprintf("$%d", i+1)
				}
				insert := "INSERT INTO " + t.name + " (" + t.cols + ") VALUES (" + strings.Join(ph, ", ") + ")"
				for _, v := range vals {
					if !t.keep(v) {
						continue
					}
					if _, err := out.Exec(ctx, insert, v...); err != nil {
						return fmt.Errorf("writing %s: %w", t.name, err)
					}
					if t.count != nil {
						*t.count++
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var results int
	if err := dst.pool.QueryRow(ctx, "SELECT count(*) FROM verifierd_sessions WHERE result IS NOT NULL").Scan(&results); err == nil {
		rep.Results = results
	}
	return rep, nil
}

// Where names the server and database (no credentials).
func (s *Store) Where() string { return s.where }
