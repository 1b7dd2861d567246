package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/store"
)

func (s *Store) openRun(id string, sealed []byte) ([]byte, error) {
	v, ok := s.seal.Open(store.PlaceRun(id), sealed)
	if !ok {
		return nil, &store.IntegrityError{What: "run " + id}
	}
	return v, nil
}

// CreateRun records a new run with fn's ledger entries, or returns the
// record stored under id (created false). Two replicas creating the same
// id at once: the second waits on the first's row and reads its record.
func (s *Store) CreateRun(ctx context.Context, id string, rec []byte, fn func(store.Ledger) error) (stored []byte, created bool, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) error {
		created = false
		tag, err := tx.Exec(ctx, "INSERT INTO verifierd_runs (id, record, begun_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
			id, s.seal.Seal(store.PlaceRun(id), rec), time.Now())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var have []byte
			if err := tx.QueryRow(ctx, "SELECT record FROM verifierd_runs WHERE id = $1", id).Scan(&have); err != nil {
				return err
			}
			stored, err = s.openRun(id, have)
			return err
		}
		if err := s.withLedger(ctx, tx, fn); err != nil {
			return err
		}
		stored, created = rec, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// Run returns a run's record.
func (s *Store) Run(ctx context.Context, id string) ([]byte, error) {
	var have []byte
	err := s.pool.QueryRow(ctx, "SELECT record FROM verifierd_runs WHERE id = $1", id).Scan(&have)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrRunNotFound
	}
	if err != nil {
		return nil, err
	}
	return s.openRun(id, have)
}

// UpdateRun stores what fn makes of a run's record under the run row's
// lock, so that updates of one run are serialized across replicas.
func (s *Store) UpdateRun(ctx context.Context, id string, fn func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error)) ([]byte, error) {
	var out []byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var have []byte
		err := tx.QueryRow(ctx, "SELECT record FROM verifierd_runs WHERE id = $1 FOR UPDATE", id).Scan(&have)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrRunNotFound
		}
		if err != nil {
			return err
		}
		cur, err := s.openRun(id, have)
		if err != nil {
			return err
		}
		var next []byte
		var change store.RunChange
		err = s.withLedger(ctx, tx, func(l store.Ledger) error {
			var err error
			next, change, err = fn(l, cur)
			return err
		})
		if err != nil {
			return err
		}
		out = cur
		if next != nil {
			out = next
			if _, err := tx.Exec(ctx, "UPDATE verifierd_runs SET record = $2 WHERE id = $1", id, s.seal.Seal(store.PlaceRun(id), next)); err != nil {
				return err
			}
		}
		if len(change.Hold) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO verifierd_run_holds (session_id, run_id)
				SELECT unnest($1::text[]), $2 ON CONFLICT (session_id) DO NOTHING`, change.Hold, id); err != nil {
				return err
			}
		}
		if change.Sealed {
			if _, err := tx.Exec(ctx, "UPDATE verifierd_run_holds SET sealed_at = $2 WHERE run_id = $1", id, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForEachRun calls fn with every run's record, in run id order, streaming
// rows.
func (s *Store) ForEachRun(ctx context.Context, fn func(id string, rec []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT id, record FROM verifierd_runs ORDER BY id")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v []byte
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		rec, err := s.openRun(id, v)
		if err != nil {
			return err
		}
		if err := fn(id, rec); err != nil {
			return err
		}
	}
	return rows.Err()
}
