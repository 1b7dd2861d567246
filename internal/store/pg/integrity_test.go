package pg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/storetest"
)

func readAll(s *Store) error {
	for _, id := range []string{"s1", "s2"} {
		if _, _, err := s.Session(context.Background(), id); err != nil {
			return err
		}
	}
	if _, err := s.Reverifications(context.Background(), "s1"); err != nil {
		return err
	}
	for _, c := range []int{0, store.CensusCapture(0)} {
		if err := s.ReadBaseline(context.Background(), "s1", c, func([]byte) error { return nil }); err != nil {
			return err
		}
	}
	_, err := s.RewardGet(context.Background(), store.RewardMarks, "c1")
	return err
}

func bind(t *testing.T, s *Store, evidence []byte, signing string) store.BindReport {
	t.Helper()
	rep, err := s.Bind(t.Context(), store.IntegrityKey(evidence), storetest.KeysOf(evidence, signing), false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestFlippedValuesAreDataLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newDatabase(t)
	s := open(t, dsn)
	if rep := bind(t, s, storetest.EvidenceA, "sk1"); !rep.FirstWriter {
		t.Errorf("bind of a new store: %+v", rep)
	}
	storetest.Fill(t, s)
	if err := readAll(s); err != nil {
		t.Fatalf("sound store: %v", err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE verifierd_sessions SET result = set_byte(result, position('\\x54'::bytea in result) - 1, 85) WHERE id = 's1'"); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Session(ctx, "s1")
	ie, ok := errors.AsType[*store.IntegrityError](err)
	if !ok || ie.Session != "s1" || ie.What != "result" {
		t.Fatalf("Session after a flipped byte: %v, want an IntegrityError naming s1's result", err)
	}
	if _, err := s.FinishSession(ctx, "s1", []byte(`{}`)); !errors.As(err, &ie) {
		t.Errorf("FinishSession over a damaged result: %v", err)
	}
	if _, err := s.AddReverification(ctx, "s1", func(store.Ledger, int) ([]byte, bool, error) { return []byte(`{}`), false, nil }); !errors.As(err, &ie) {
		t.Errorf("AddReverification over a damaged result: %v", err)
	}
	// The other kinds of value.
	for _, q := range []string{
		"UPDATE verifierd_baseline_chunks SET data = set_byte(data, position('\\x54'::bytea in data) - 1, 85) WHERE session_id = 's1' AND capture = -1",
		"UPDATE verifierd_reward SET value = set_byte(value, 1, 0) WHERE key = 'c1'",
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReadBaseline(ctx, "s1", store.CensusCapture(0), func([]byte) error { return nil }); !errors.As(err, &ie) || ie.What != "baseline capture -1 chunk 0" {
		t.Errorf("a damaged census: %v", err)
	}
	if _, err := s.RewardGet(ctx, store.RewardMarks, "c1"); !errors.As(err, &ie) {
		t.Errorf("a damaged reward record: %v", err)
	}
	if err := s.RewardUpdate(ctx, func(tx store.RewardTx) error { _, _ = tx.Get(store.RewardMarks, "c1"); return nil }); !errors.As(err, &ie) {
		t.Errorf("a reward update reading a damaged record: %v", err)
	}

	vr, err := s.CheckValues(ctx, storetest.EvidenceA)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Values != 7 || len(vr.Damaged) != 3 || !slices.Equal(vr.DamagedSessions(), []string{"s1"}) || vr.Keys != storetest.KeysOf(storetest.EvidenceA, "sk1") {
		t.Errorf("check: %+v, want 7 values, 3 damaged, in s1 and a reward record", vr)
	}
	if vr, _ := s.CheckValues(ctx, storetest.EvidenceB); vr == nil || !strings.Contains(vr.Problem, "not the store's") {
		t.Errorf("check with another key: %+v", vr)
	}

	dst := open(t, newDatabase(t))
	rep, err := s.SalvageInto(ctx, dst, storetest.EvidenceA)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Skipped, []string{"s1"}) || rep.Sessions != 1 || rep.RewardRecords != 0 || rep.BaselineChunks != 0 {
		t.Errorf("salvage: %+v, want s1 and the reward record left out", rep)
	}
	bind(t, dst, storetest.EvidenceA, "sk1")
	if _, _, err := dst.Session(ctx, "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("salvaged s1: %v, want NotFound", err)
	}
	if m, _, err := dst.Session(ctx, "s2"); err != nil || string(m) != `{"m":"two"}` {
		t.Errorf("salvaged s2: %q, %v", m, err)
	}
	if _, err := s.SalvageInto(ctx, dst, storetest.EvidenceA); err == nil {
		t.Error("a second salvage into the same database: no error")
	}
}

func TestBindSealsAndRefusesOtherKeys(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	s := open(t, dsn)
	storetest.Fill(t, s) // written before values carried tags
	if rep := bind(t, s, storetest.EvidenceA, "sk1"); rep.Sealed != 7 {
		t.Errorf("bind of an old store: %+v, want 7 values sealed", rep)
	}
	if err := readAll(s); err != nil {
		t.Fatal(err)
	}
	if _, r, _ := s.Session(t.Context(), "s1"); string(r) != `{"outcome":"FAILED","type":"Triage"}` {
		t.Errorf("result after sealing: %q", r)
	}

	// A second replica with another evidence key is refused.
	other := open(t, dsn)
	_, err := other.Bind(t.Context(), store.IntegrityKey(storetest.EvidenceB), storetest.KeysOf(storetest.EvidenceB, "sk1"), false)
	me, ok := errors.AsType[*store.KeyMismatchError](err)
	if !ok {
		t.Fatalf("bind with another evidence key: %v", err)
	}
	for _, want := range []string{"evidence key", store.EvidenceKeyID(storetest.EvidenceA), store.EvidenceKeyID(storetest.EvidenceB), "rotates", "postgres 127.0.0.1"} {
		if !strings.Contains(me.Error(), want) {
			t.Errorf("message %q does not name %q", me, want)
		}
	}
	if strings.Contains(me.Error(), "--") {
		t.Errorf("message %q names a flag; the daemon adds those", me)
	}
	// A rotation while the first replica serves is refused: it holds the
	// replica lease.
	if _, err := other.Bind(t.Context(), store.IntegrityKey(storetest.EvidenceB), storetest.KeysOf(storetest.EvidenceB, "sk2"), true); !errors.Is(err, ErrReplicaRunning) {
		t.Fatalf("rotation while another replica serves: %v, want ErrReplicaRunning", err)
	}
	s.Close()
	if rep, err := other.Bind(t.Context(), store.IntegrityKey(storetest.EvidenceB), storetest.KeysOf(storetest.EvidenceB, "sk2"), true); err != nil || rep.Resealed != 7 {
		t.Fatalf("rotation: %+v, %v", rep, err)
	}
	if err := readAll(other); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
	if _, err := open(t, dsn).Bind(t.Context(), store.IntegrityKey(storetest.EvidenceA), storetest.KeysOf(storetest.EvidenceA, "sk1"), false); !errors.As(err, new(*store.KeyMismatchError)) {
		t.Errorf("the old keys after the rotation: %v, want refused", err)
	}
}

// TestKeysWatchedWhileServing: a replica that serves a store whose key ids
// change under it (edited here: a rotation cannot happen while it holds
// the lease) stops signing at once (its next ledger append fails with a
// KeyMismatchError) and RecheckKeys reports it; a replica that starts
// while a rotation holds the lease exclusively waits for it.
func TestKeysWatchedWhileServing(t *testing.T) {
	dsn := newDatabase(t)
	s := open(t, dsn)
	bind(t, s, storetest.EvidenceA, "sk1")
	if err := s.RecheckKeys(t.Context()); err != nil {
		t.Fatalf("recheck of the bound keys: %v", err)
	}
	if err := s.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("tick", "", ""); return err }); err != nil {
		t.Fatalf("append under the bound keys: %v", err)
	}
	if _, err := s.pool.Exec(t.Context(), "UPDATE verifierd_store_keys SET value = 'sk_other' WHERE name = 'signing_key_id'"); err != nil {
		t.Fatal(err)
	}
	err := s.RecheckKeys(t.Context())
	if me, ok := errors.AsType[*store.KeyMismatchError](err); !ok || !me.Running || !strings.Contains(me.Error(), "changed while this daemon ran") {
		t.Fatalf("recheck after the keys changed: %v, want a running KeyMismatchError", err)
	}
	err = s.AppendLedger(t.Context(), func(l store.Ledger) error { _, err := l.Append("tick", "", ""); return err })
	if !errors.As(err, new(*store.KeyMismatchError)) {
		t.Fatalf("append after the keys changed: %v, want a KeyMismatchError (nothing signed under keys the store no longer records)", err)
	}
	var n int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM verifierd_ledger").Scan(&n); err != nil || n != 1 {
		t.Errorf("ledger entries: %d, %v; want only the first", n, err)
	}
}
