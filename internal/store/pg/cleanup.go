package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/store"
)

// RemoveOrphans removes, in small transactions:
//
//   - baseline chunks whose session was never committed and whose newest
//     chunk is older than retainUnfinished (24h when that is 0): another
//     replica may still be streaming a younger one, so, unlike the embedded
//     store, a start-up does not remove every uncommitted chunk;
//   - sessions begun before now-retainUnfinished and never verified, with
//     their baselines (retainUnfinished <= 0 keeps them).
//
// Rows another transaction holds (a Verify in progress) are skipped.
func (s *Store) RemoveOrphans(ctx context.Context, now time.Time, retainUnfinished time.Duration) (store.Stats, error) {
	var st store.Stats
	grace := retainUnfinished
	if grace <= 0 {
		grace = orphanGrace
	}
	n, err := s.removeBatches(ctx, func(ctx context.Context, tx pgx.Tx) (int, error) {
		rows, err := tx.Query(ctx, `SELECT c.session_id FROM verifierd_baseline_chunks c
			WHERE NOT EXISTS (SELECT 1 FROM verifierd_sessions s WHERE s.id = c.session_id)
			GROUP BY c.session_id HAVING max(c.written_at) < $1 LIMIT $2`, now.Add(-grace), batch)
		if err != nil {
			return 0, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return 0, err
		}
		_, err = tx.Exec(ctx, `DELETE FROM verifierd_baseline_chunks c WHERE c.session_id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM verifierd_sessions s WHERE s.id = c.session_id)`, ids)
		return len(ids), err
	})
	st.OrphanBaselines = n
	if err != nil || retainUnfinished <= 0 {
		return st, err
	}
	n, err = s.removeBatches(ctx, func(ctx context.Context, tx pgx.Tx) (int, error) {
		return removeSessions(ctx, tx, `SELECT id FROM verifierd_sessions
			WHERE finished_at IS NULL AND begun_at < $1 AND `+notHeld+` ORDER BY begun_at LIMIT $2 FOR UPDATE SKIP LOCKED`, now.Add(-retainUnfinished))
	})
	st.UnfinishedSessions = n
	return st, err
}

// RemoveExpired removes, in small transactions, every session whose first
// result was stored before now-retain, with its results and baselines.
// Ledger entries and stand-alone receipts stay: the hash chain must remain
// verifiable. retain <= 0 keeps everything.
func (s *Store) RemoveExpired(ctx context.Context, now time.Time, retain time.Duration) (int, error) {
	if retain <= 0 {
		return 0, nil
	}
	return s.removeBatches(ctx, func(ctx context.Context, tx pgx.Tx) (int, error) {
		return removeSessions(ctx, tx, `SELECT id FROM verifierd_sessions
			WHERE finished_at IS NOT NULL AND finished_at < $1 AND `+notHeld+` ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`, now.Add(-retain))
	})
}

// notHeld keeps a session a run holds (RunChange.Hold) while the run is
// open, or was last sealed at or after the cutoff ($1).
const notHeld = `NOT EXISTS (SELECT 1 FROM verifierd_run_holds h WHERE h.session_id = verifierd_sessions.id AND (h.sealed_at IS NULL OR h.sealed_at >= $1))`

// removeSessions locks the sessions query selects (at most batch) and
// removes them with everything stored for them.
func removeSessions(ctx context.Context, tx pgx.Tx, query string, cutoff time.Time) (int, error) {
	rows, err := tx.Query(ctx, query, cutoff, batch)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	for _, q := range []string{
		"DELETE FROM verifierd_baseline_chunks WHERE session_id = ANY($1)",
		"DELETE FROM verifierd_reverifications WHERE session_id = ANY($1)",
		"DELETE FROM verifierd_sessions WHERE id = ANY($1)",
		"DELETE FROM verifierd_run_holds WHERE session_id = ANY($1)",
	} {
		if _, err := tx.Exec(ctx, q, ids); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// removeBatches runs step in a transaction of its own until it removes
// nothing, and returns the total.
func (s *Store) removeBatches(ctx context.Context, step func(context.Context, pgx.Tx) (int, error)) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var n int
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			n, err = step(ctx, tx)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}
