package pg

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/storetest"
)

// conformance is the PostgreSQL store as storetest drives it: every store
// a database of its own on the package's server.
var conformance = storetest.Backend{
	Open: func(t *testing.T) store.Backend { return open(t, newDatabase(t)) },
	Damage: func(t *testing.T, b store.Backend, v storetest.Value) {
		t.Helper()
		flipped := func(col string) string { return "set_byte(" + col + ", 0, get_byte(" + col + ", 0) # 1)" }
		var q string
		var args []any
		switch v.Kind {
		case storetest.KindSession:
			q, args = "UPDATE verifierd_sessions SET meta = "+flipped("meta")+" WHERE id = $1", []any{v.Session}
		case storetest.KindResult:
			q, args = "UPDATE verifierd_sessions SET result = "+flipped("result")+" WHERE id = $1", []any{v.Session}
		case storetest.KindReverification:
			q, args = "UPDATE verifierd_reverifications SET result = "+flipped("result")+" WHERE session_id = $1 AND attempt = $2", []any{v.Session, v.Attempt}
		case storetest.KindBaseline:
			q, args = "UPDATE verifierd_baseline_chunks SET data = "+flipped("data")+" WHERE session_id = $1 AND capture = $2 AND seq = 0", []any{v.Session, v.Capture}
		case storetest.KindReward:
			q, args = "UPDATE verifierd_reward SET value = "+flipped("value")+" WHERE bucket = $1 AND key = $2", []any{v.Bucket.String(), v.Key}
		case storetest.KindRun:
			q, args = "UPDATE verifierd_runs SET record = "+flipped("record")+" WHERE id = $1", []any{v.Key}
		}
		tag, err := b.(*Store).pool.Exec(t.Context(), q, args...)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("damaging %+v: %d rows, %v", v, tag.RowsAffected(), err)
		}
	},
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, conformance)
}

// TestDeadlineStopsACallBlockedOnALock: a call waiting for a lock another
// connection holds (a session row, the ledger's advisory lock, the reward
// lock) returns DeadlineExceeded soon after its deadline, holds nothing
// afterwards, and the store stays usable.
func TestDeadlineStopsACallBlockedOnALock(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	s := open(t, dsn)
	if err := s.CreateSession(t.Context(), "s1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	verify := func(ctx context.Context) error {
		_, _, err := s.FinishSessionLedger(ctx, "s1", func(l store.Ledger) ([]byte, bool, error) {
			_, err := l.Append("verify", "s1", "sha256:00")
			return []byte(`{"r":1}`), false, err
		})
		return err
	}
	for _, c := range []struct {
		name string
		hold string // run by the other connection inside its open transaction
		call func(context.Context) error
	}{
		{"session row", "SELECT 1 FROM verifierd_sessions WHERE id = 's1' FOR UPDATE", verify},
		{"ledger lock", "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(lockLedger, 10) + ")", func(ctx context.Context) error {
			return s.AppendLedger(ctx, func(l store.Ledger) error {
				_, err := l.Append("tick", "", "sha256:00")
				return err
			})
		}},
		{"reward lock", "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(lockReward, 10) + ")", func(ctx context.Context) error {
			return s.RewardUpdate(ctx, func(tx store.RewardTx) error { return tx.Put(store.RewardMarks, "c1", []byte(`{}`)) })
		}},
		{"sessions table", "LOCK TABLE verifierd_sessions IN ACCESS EXCLUSIVE MODE", func(ctx context.Context) error {
			_, _, err := s.Session(ctx, "s1")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			holder := connect(t, dsn)
			tx, err := holder.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), c.hold); err != nil {
				t.Fatal(err)
			}
			const deadline = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			answer := make(chan error, 1)
			go func() { answer <- c.call(ctx) }()
			select {
			case err = <-answer:
			case <-time.After(deadline + 10*time.Second):
				t.Fatalf("a call blocked on the %s is still waiting %v past its deadline", c.name, 10*time.Second)
			}
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a call blocked on the %s: %v, want context.DeadlineExceeded", c.name, err)
			}
			if took < deadline || took > deadline+5*time.Second {
				t.Fatalf("a call blocked on the %s returned after %v; want soon after its %v deadline", c.name, took, deadline)
			}
			if err := tx.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The store is usable, and the cancelled call left nothing behind.
			if _, result, err := s.Session(t.Context(), "s1"); err != nil || result != nil {
				t.Fatalf("after the cancelled call: result %q, %v", result, err)
			}
			if err := s.AppendLedger(t.Context(), func(l store.Ledger) error { return nil }); err != nil {
				t.Fatalf("the store after the cancelled call: %v", err)
			}
		})
	}
	if err := verify(t.Context()); err != nil {
		t.Fatalf("a verify once the locks are gone: %v", err)
	}
	if pos, err := s.LedgerHead(t.Context()); err != nil || pos.Seq != 2 {
		t.Fatalf("ledger head %+v (%v): want the one verify entry, none from the cancelled calls", pos, err)
	}
}

// connect opens a connection of its own to the test database (the
// holder of the locks), closed when t ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = os.Getenv(passwordEnv)
	c, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
