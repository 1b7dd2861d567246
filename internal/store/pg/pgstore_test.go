package pg

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// One PostgreSQL server for the package; each test gets a database of its
// own.
var server struct {
	once sync.Once
	dir  string
	pg   *sqlservers.Postgres
	err  error
	n    atomic.Int64
}

// passwordEnv is the variable the tests pass the admin password in.
const passwordEnv = "PGSTORE_TEST_PASSWORD"

func TestMain(m *testing.M) {
	code := m.Run()
	if server.pg != nil {
		server.pg.Close()
	}
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
	os.Exit(code)
}

// newDatabase creates an empty database and returns its DSN (without the
// password, which is in passwordEnv).
func newDatabase(t testing.TB) string {
	t.Helper()
	server.once.Do(func() {
		server.dir, server.err = os.MkdirTemp("", "pgstore-")
		if server.err != nil {
			return
		}
		if server.err = os.Chmod(server.dir, 0o755); server.err != nil { // the server runs as its own user
			return
		}
		server.pg, server.err = sqlservers.StartPostgres(server.dir)
	})
	if errors.Is(server.err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if server.err != nil {
		log := ""
		if server.pg != nil {
			log = server.pg.Log()
		}
		t.Fatalf("PostgreSQL (Debian package postgresql) could not start: %v\n%s", server.err, log)
	}
	pg := server.pg
	name := fmt.Sprintf("store%d", server.n.Add(1))
	if err := pg.Exec(context.Background(), "postgres", "CREATE DATABASE "+name+" OWNER "+pg.Admin.User); err != nil {
		t.Fatal(err)
	}
	if err := os.Setenv(passwordEnv, pg.Admin.Password); err != nil { //nolint:usetesting // shared by parallel tests; always the same value
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pg.Admin.User, pg.Port, name)
}

func open(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{PasswordEnv: passwordEnv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsIdempotentUnderConcurrentStart(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), dsn, Options{PasswordEnv: passwordEnv}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	v, err := stores[0].SchemaVersion(context.Background())
	if err != nil || v != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", v, err, len(migrations))
	}
	var rows int
	if err := stores[0].pool.QueryRow(context.Background(), "SELECT count(*) FROM verifierd_schema").Scan(&rows); err != nil || rows != len(migrations) {
		t.Fatalf("verifierd_schema holds %d rows (%v), want one per migration (%d)", rows, err, len(migrations))
	}
	// A further open migrates nothing and works.
	s := open(t, dsn)
	if err := s.CreateSession(t.Context(), "x", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenErrorsNeverShowThePassword: Open's errors never carry the
// password, and name no command-line flag (the store is a library; the
// daemon adds its flag names).
func TestOpenErrorsNeverShowThePassword(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	_, err := Open(context.Background(), strings.Replace(dsn, "@", ":hunter2-secret@", 1)+"&connect_timeout=bogus", Options{})
	if !errors.Is(err, ErrBadDSN) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "--") {
		t.Fatalf("bad DSN: %v", err)
	}
	_, err = Open(context.Background(), dsn, Options{PasswordEnv: "PGSTORE_TEST_UNSET_VARIABLE"})
	if pe, ok := errors.AsType[*PasswordEnvError](err); !ok || pe.Name != "PGSTORE_TEST_UNSET_VARIABLE" ||
		!strings.Contains(err.Error(), "PGSTORE_TEST_UNSET_VARIABLE") || strings.Contains(err.Error(), "--") {
		t.Fatalf("unset password variable: %v", err)
	}
	if err := os.Setenv("PGSTORE_TEST_WRONG", "wrong-password-value"); err != nil { //nolint:usetesting // the test is parallel
		t.Fatal(err)
	}
	_, err = Open(context.Background(), dsn, Options{PasswordEnv: "PGSTORE_TEST_WRONG"})
	if err == nil || strings.Contains(err.Error(), "wrong-password-value") || strings.Contains(err.Error(), "--") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestFinishFirstWriterWinsAcrossHandles(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	const sessions = 20
	for i := range sessions {
		if err := a.CreateSession(t.Context(), fmt.Sprintf("s%d", i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	var built atomic.Int64
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		var wg sync.WaitGroup
		got := make([][]byte, 4)
		errs := make([]error, 4)
		for j := range 4 {
			st := a
			if j%2 == 1 {
				st = b
			}
			wg.Go(func() {
				got[j], _, errs[j] = st.FinishSessionLedger(t.Context(), id, func(l store.Ledger) ([]byte, bool, error) {
					built.Add(1)
					if _, err := l.Append("verify", id, "sha256:00"); err != nil {
						return nil, false, err
					}
					time.Sleep(5 * time.Millisecond)
					return fmt.Appendf(nil, `{"writer":%d}`, j), false, nil
				})
			})
		}
		wg.Wait()
		for j := range 4 {
			if errs[j] != nil {
				t.Fatalf("%s finish %d: %v", id, j, errs[j])
			}
			if !bytes.Equal(got[j], got[0]) {
				t.Fatalf("%s: finish %d returned %s, finish 0 %s", id, j, got[j], got[0])
			}
		}
		_, stored, err := b.Session(t.Context(), id)
		if err != nil || !bytes.Equal(stored, got[0]) {
			t.Fatalf("%s: stored %s (%v), returned %s", id, stored, err, got[0])
		}
	}
	if built.Load() != sessions {
		t.Fatalf("build ran %d times for %d sessions", built.Load(), sessions)
	}
	// One ledger entry per session: the losers appended nothing.
	head, err := a.LedgerHead(t.Context())
	if err != nil || head.Seq != sessions+1 {
		t.Fatalf("ledger head %+v (%v), want seq %d", head, err, sessions+1)
	}
	if _, err := a.FinishSession(t.Context(), "unknown", []byte(`{}`)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finish of an unknown session: %v", err)
	}
}

func TestLedgerOneChainAcrossTwoHandles(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	const per = 40
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		wg.Go(func() {
			for j := range per {
				id := fmt.Sprintf("h%d-%d", i, j)
				var err error
				switch j % 3 {
				case 0:
					err = st.CreateSessionLedger(t.Context(), id, []byte(`{}`), func(l store.Ledger) error {
						_, err := l.Append("begin", id, "sha256:aa")
						return err
					})
				case 1:
					_, err = st.PutReceipt(t.Context(), "r/"+id, func(l store.Ledger) ([]byte, error) {
						pos := l.Next()
						_, err := l.Append("receipt", id, "sha256:bb")
						return fmt.Appendf(nil, `{"seq":%d}`, pos.Seq), err
					})
				default:
					err = st.RewardUpdate(t.Context(), func(tx store.RewardTx) error {
						if _, err := tx.Ledger().Append("reward", id, "sha256:cc"); err != nil {
							return err
						}
						return tx.Put(store.RewardMarks, id, []byte("1"))
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var entries []receipt.Entry
	var raw bytes.Buffer
	if err := b.ExportLedger(t.Context(), 0, func(e receipt.Entry, c []byte) error {
		entries = append(entries, e)
		raw.Write(c)
		raw.WriteByte('\n')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*per {
		t.Fatalf("%d entries, want %d", len(entries), 2*per)
	}
	parsed, err := receipt.ReadEntries(&raw)
	if err != nil {
		t.Fatal(err)
	}
	head, err := receipt.VerifyChain(parsed, false)
	if err != nil {
		t.Fatalf("chain across two handles: %v", err)
	}
	pos, err := a.LedgerHead(t.Context())
	if err != nil || pos.Seq != 2*per+1 || pos.Head != head {
		t.Fatalf("head %+v (%v), chain head %s", pos, err, head)
	}
	// From a position, as verifyctl exports a tail.
	n := 0
	if err := a.ExportLedger(t.Context(), 2*per-4, func(receipt.Entry, []byte) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("tail export: %d entries, %v", n, err)
	}
	// A failing build appends nothing.
	boom := errors.New("boom")
	if err := a.AppendLedger(t.Context(), func(l store.Ledger) error {
		if _, err := l.Append("x", "", "sha256:dd"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing append: %v", err)
	}
	if pos2, _ := b.LedgerHead(t.Context()); pos2 != pos {
		t.Fatalf("a rolled back append moved the head: %+v -> %+v", pos, pos2)
	}
}

func TestReverificationsAndRewards(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	s, other := open(t, dsn), open(t, dsn)
	if err := s.CreateSession(t.Context(), "s1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddReverification(t.Context(), "s1", func(store.Ledger, int) ([]byte, bool, error) { return nil, false, nil }); err == nil {
		t.Fatal("re-verified an unfinished session")
	}
	if _, err := s.FinishSession(t.Context(), "s1", []byte(`{"r":0}`)); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 3; want++ {
		if _, err := s.AddReverification(t.Context(), "s1", func(_ store.Ledger, attempt int) ([]byte, bool, error) {
			if attempt != want {
				t.Errorf("attempt %d, want %d", attempt, want)
			}
			return fmt.Appendf(nil, `{"r":%d}`, attempt), true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	revs, err := s.Reverifications(t.Context(), "s1")
	if err != nil || len(revs) != 3 || string(revs[2]) != `{"r":3}` {
		t.Fatalf("reverifications %q %v", revs, err)
	}
	if v, err := s.RewardGet(t.Context(), store.RewardMarks, "c1"); err != nil || v != nil {
		t.Fatalf("absent mark: %q %v", v, err)
	}
	// Concurrent read-modify-write of one mark through two handles (two
	// replicas) is serialized: no lost update.
	var wg sync.WaitGroup
	for i := range 20 {
		st := s
		if i%2 == 1 {
			st = other
		}
		wg.Go(func() {
			err := st.RewardUpdate(t.Context(), func(tx store.RewardTx) error {
				n := 0
				if v, err := tx.Get(store.RewardMarks, "c1"); err != nil {
					return err
				} else if v != nil {
					if _, err := fmt.Sscan(string(v), &n); err != nil {
						return err
					}
				}
				return tx.Put(store.RewardMarks, "c1", fmt.Append(nil, n+1))
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if v, err := s.RewardGet(t.Context(), store.RewardMarks, "c1"); err != nil || string(v) != "20" {
		t.Fatalf("mark after 20 increments: %q %v", v, err)
	}
}

func TestRetentionRemovesWhatItShouldAndNothingElse(t *testing.T) {
	t.Parallel()
	s := open(t, newDatabase(t))
	ctx := context.Background()
	mk := func(id string, finish bool) {
		w := s.NewBaseline(id, 0)
		if err := w.Add(ctx, []byte("rec")); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSessionLedger(ctx, id, []byte(`{}`), func(l store.Ledger) error {
			_, err := l.Append("begin", id, "sha256:aa")
			return err
		}, w); err != nil {
			t.Fatal(err)
		}
		if finish {
			if _, _, err := s.FinishSessionLedger(ctx, id, func(store.Ledger) ([]byte, bool, error) { return []byte(`{}`), true, nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AddReverification(ctx, id, func(store.Ledger, int) ([]byte, bool, error) { return []byte(`{}`), true, nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 40 {
		mk(fmt.Sprintf("old-finished-%02d", i), true)
	}
	for i := range 3 {
		mk(fmt.Sprintf("old-unfinished-%d", i), false)
	}
	// Back-date them: finished 10 days ago, begun 2 days ago.
	if _, err := s.pool.Exec(ctx, "UPDATE verifierd_sessions SET begun_at = now() - interval '10 days', finished_at = now() - interval '10 days' WHERE id LIKE 'old-finished-%'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE verifierd_sessions SET begun_at = now() - interval '2 days' WHERE id LIKE 'old-unfinished-%'"); err != nil {
		t.Fatal(err)
	}
	mk("new-finished", true)
	mk("new-unfinished", false)
	// An uncommitted baseline, old, and one being written now.
	for _, id := range []string{"orphan-old", "orphan-new"} {
		w := s.NewBaseline(id, 0)
		if err := w.Add(ctx, []byte("r")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "UPDATE verifierd_baseline_chunks SET written_at = now() - interval '2 days' WHERE session_id = 'orphan-old'"); err != nil {
		t.Fatal(err)
	}
	head, err := s.LedgerHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	n, err := s.RemoveExpired(ctx, time.Now(), 168*time.Hour)
	if err != nil || n != 40 {
		t.Fatalf("RemoveExpired removed %d (%v), want the 40 old finished sessions", n, err)
	}
	st, err := s.RemoveOrphans(ctx, time.Now(), 24*time.Hour)
	if err != nil || st != (store.Stats{OrphanBaselines: 1, UnfinishedSessions: 3}) {
		t.Fatalf("RemoveOrphans: %+v %v", st, err)
	}
	var ids []string
	if err := s.ForEachSession(ctx, func(id string, _, _ []byte) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "new-finished,new-unfinished" {
		t.Fatalf("sessions left: %v", ids)
	}
	count := func(q string) int {
		var c int
		if err := s.pool.QueryRow(ctx, q).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count("SELECT count(DISTINCT session_id) FROM verifierd_baseline_chunks"); c != 3 {
		t.Fatalf("baselines of %d sessions left, want 3 (new-finished kept, new-unfinished, orphan-new)", c)
	}
	if c := count("SELECT count(*) FROM verifierd_reverifications"); c != 1 {
		t.Fatalf("%d re-verifications left, want 1", c)
	}
	// The ledger is untouched and still verifies.
	if after, err := s.LedgerHead(ctx); err != nil || after != head {
		t.Fatalf("ledger head moved: %+v -> %+v (%v)", head, after, err)
	}
	var raw bytes.Buffer
	if err := s.ExportLedger(ctx, 0, func(_ receipt.Entry, c []byte) error { raw.Write(c); raw.WriteByte('\n'); return nil }); err != nil {
		t.Fatal(err)
	}
	entries, err := receipt.ReadEntries(&raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.VerifyChain(entries, false); err != nil || len(entries) != 45 {
		t.Fatalf("ledger after retention: %d entries, %v", len(entries), err)
	}
	// Zero retention keeps everything.
	if n, err := s.RemoveExpired(ctx, time.Now().Add(1000*time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("retain 0 removed %d (%v)", n, err)
	}
	if size := s.Size(ctx); size <= 0 {
		t.Fatalf("Size %d", size)
	}
}

// TestBaselineIndexRoundTrip: a baseline stored as an index (judge.RecordStream.Index
// entries: marked records kept whole or in part) comes back from the
// PostgreSQL store byte for byte, and reads back (AddEntry) into the batch
// projecting the records as they arrive gives.
func TestBaselineIndexRoundTrip(t *testing.T) {
	t.Parallel()
	s := open(t, newDatabase(t))
	c, err := judge.Bind(judge.Effect{Kind: judge.RecordWritten, Match: judge.Selector{"p": {Literal: "1"}},
		KeyField: judge.DefaultKeyField, IdentityField: judge.DefaultIdentityField, CountNewOnly: true}, nil, "effects[0]")
	if err != nil {
		t.Fatal(err)
	}
	p := judge.ProjectBaseline([]*judge.Contract{c})
	var dig bytes.Buffer
	x := judge.NewRecordStream("records", 0)
	x.Digest(&dig)
	x.Project(p)
	want := judge.NewRecordStream("records", 0)
	want.Project(p)
	w := s.NewBaseline("s1", 0)
	var entries [][]byte
	for i := range 40000 { // more than one chunk row
		rec := fmt.Appendf(nil, `{"id": %d, "p": "%d", "note": "Zo\u00eb %s", "n": 1.50}`, i, i%3, strings.Repeat("x", i%40))
		if i%17 == 0 {
			rec = fmt.Appendf(nil, `{"p": "1", "n": %d, "note": "%s"}`, i, strings.Repeat("y", 300)) // no identity: kept whole
		}
		if err := want.Add(rec); err != nil {
			t.Fatal(err)
		}
		e := bytes.Clone(x.Index(rec))
		entries = append(entries, e)
		if err := w.Add(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateSession(t.Context(), "s1", []byte(`{}`), w); err != nil {
		t.Fatal(err)
	}
	var chunks int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM verifierd_baseline_chunks WHERE session_id = 's1'").Scan(&chunks); err != nil || chunks < 2 {
		t.Fatalf("%d chunk rows (%v), want more than one", chunks, err)
	}
	got := judge.NewRecordStream("records", len(entries))
	got.Project(p)
	i := 0
	if err := s.ReadBaseline(t.Context(), "s1", 0, func(e []byte) error {
		if i >= len(entries) || !bytes.Equal(e, entries[i]) {
			return fmt.Errorf("entry %d differs", i)
		}
		i++
		return got.AddEntry(e)
	}); err != nil {
		t.Fatal(err)
	}
	wb, gb := want.Batch(), got.Batch()
	marks := map[byte]int{}
	for _, e := range entries {
		marks[e[0]]++
	}
	if i != len(entries) || gb.Len() != wb.Len() || marks[judge.IndexPartial] == 0 || marks[judge.IndexWhole] == 0 {
		t.Fatalf("read %d entries (%v) into %d records, want %d", i, marks, gb.Len(), wb.Len())
	}
	for k := range wb.Len() {
		if compact.Partial(wb, k) != compact.Partial(gb, k) || compact.CanonicalRecord(wb, k) != compact.CanonicalRecord(gb, k) {
			t.Fatalf("record %d: %s (partial %v), want %s (%v)", k, compact.CanonicalRecord(gb, k), compact.Partial(gb, k), compact.CanonicalRecord(wb, k), compact.Partial(wb, k))
		}
	}
}

// TestCheckpointsAcrossHandles: two replicas on one database, both
// signing every 5th entry, leave checkpoints at 5, 10, 15, ... each of the
// entry's own hash; a rolled back append leaves none; a stored checkpoint
// is never replaced.
func TestCheckpointsAcrossHandles(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	a, b := open(t, dsn), open(t, dsn)
	if seq, env, err := a.LatestCheckpoint(t.Context()); err != nil || seq != 0 || env != nil {
		t.Fatalf("a new database has a checkpoint: %d %s %v", seq, env, err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	sign := func(seq uint64, head string) ([]byte, error) {
		env, err := receipt.SignCheckpoint(priv, seq, head, time.Now())
		if err != nil {
			return nil, err
		}
		return json.Marshal(env)
	}
	for _, st := range []*Store{a, b} {
		st.SignCheckpoints(&store.Checkpointing{Every: 5, Sign: sign})
	}
	const per = 12
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		wg.Go(func() {
			for j := range per {
				var err error
				if j%2 == 0 {
					err = st.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("begin", fmt.Sprint(i), "sha256:aa"); return err })
				} else {
					err = st.RewardUpdate(t.Context(), func(tx store.RewardTx) error {
						_, err := tx.Ledger().Append("reward", fmt.Sprint(i), "sha256:bb")
						return err
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var entries []receipt.Entry
	if err := a.ExportLedger(t.Context(), 0, func(e receipt.Entry, _ []byte) error { entries = append(entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	rows, err := a.pool.Query(context.Background(), "SELECT seq, envelope FROM verifierd_ledger_checkpoints ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			t.Fatal(err)
		}
		env, err := receipt.ParseEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := env.Open(pub)
		var c receipt.Checkpoint
		if err != nil || json.Unmarshal(payload, &c) != nil || c.Seq != uint64(seq) || c.Head != entries[seq-1].Hash() {
			t.Fatalf("checkpoint %d: %s %v", seq, payload, err)
		}
		seqs = append(seqs, uint64(seq))
	}
	rows.Close()
	if fmt.Sprint(seqs) != "[5 10 15 20]" {
		t.Fatalf("checkpoints at %v, want [5 10 15 20]", seqs)
	}
	// Entries 25 to 30 in a transaction that fails: no checkpoint 25.
	boom := errors.New("boom")
	if err := b.AppendLedger(t.Context(), func(l store.Ledger) error {
		for range 6 {
			if _, err := l.Append("x", "", "sha256:cc"); err != nil {
				return err
			}
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing append: %v", err)
	}
	if seq, _, err := b.LatestCheckpoint(t.Context()); err != nil || seq != 20 {
		t.Fatalf("latest %d (%v), want 20", seq, err)
	}
	if err := a.PutCheckpoint(t.Context(), 24, []byte(`{"n":24}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.PutCheckpoint(t.Context(), 24, []byte(`{"n":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if seq, env, err := b.LatestCheckpoint(t.Context()); err != nil || seq != 24 || string(env) != `{"n":24}` {
		t.Fatalf("latest %d %s (%v), want the first seq 24", seq, env, err)
	}
}
