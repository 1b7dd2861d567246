package bolt

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/storetest"
)

// readAll reads every value fill wrote and returns the first error.
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

// flip flips one byte of the stored value under key in bucket (raw, as
// rot or an editor would).
func flip(t *testing.T, s *Store, bucket []byte, key string, at byte) {
	t.Helper()
	err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		v := bytes.Clone(b.Get([]byte(key)))
		i := bytes.IndexByte(v, at)
		if i < 0 {
			t.Fatalf("%s/%s holds no %q: %q", bucket, key, at, v)
		}
		v[i] ^= 0x01
		return b.Put([]byte(key), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func bindOrFail(t *testing.T, s *Store, evidence []byte, signing string) store.BindReport {
	t.Helper()
	rep, err := s.Bind(t.Context(), store.IntegrityKey(evidence), storetest.KeysOf(evidence, signing), false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestFlippedResultIsDataLossNamingTheSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep := bindOrFail(t, s, storetest.EvidenceA, "sk1"); !rep.FirstWriter || rep.Sealed != 0 {
		t.Errorf("bind of a new store: %+v, want first writer, nothing to seal", rep)
	}
	storetest.Fill(t, s)
	if err := readAll(s); err != nil {
		t.Fatalf("sound store: %v", err)
	}
	flip(t, s, bucketResults, "s1", 'T') // "Triage" -> "Uriage"
	_, _, err = s.Session(t.Context(), "s1")
	ie, ok := errors.AsType[*store.IntegrityError](err)
	if !ok || ie.Session != "s1" || ie.What != "result" {
		t.Fatalf("Session after a flipped result byte: %v, want an store.IntegrityError naming s1's result", err)
	}
	if !strings.Contains(err.Error(), "session s1") || !strings.Contains(err.Error(), "store check") {
		t.Errorf("message %q names neither the session nor the way out", err)
	}
	// The result is also checked where Verify finds it already stored.
	if _, err := s.FinishSession(t.Context(), "s1", []byte(`{}`)); !errors.As(err, &ie) {
		t.Errorf("FinishSession over a damaged result: %v, want an store.IntegrityError", err)
	}
	if _, _, err := s.Session(t.Context(), "s2"); err != nil {
		t.Errorf("the other session: %v", err)
	}
	var damaged []string
	if err := s.ForEachSession(t.Context(), func(id string, meta, _ []byte) error {
		if meta == nil {
			damaged = append(damaged, id)
		}
		return nil
	}); err != nil || !slices.Equal(damaged, []string{"s1"}) {
		t.Errorf("ForEachSession over a damaged session: %v, damaged %v; want the walk to pass s1 with no value and go on", err, damaged)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	vr, err := CheckValues(dir, storetest.EvidenceA)
	if err != nil {
		t.Fatal(err)
	}
	if !vr.Sealed || vr.Values != 7 || len(vr.Damaged) != 1 || !slices.Equal(vr.DamagedSessions(), []string{"s1"}) {
		t.Errorf("check: %+v, want 7 values checked, s1's result damaged", vr)
	}
	if vr.Keys != storetest.KeysOf(storetest.EvidenceA, "sk1") {
		t.Errorf("recorded keys %+v", vr.Keys)
	}
	if vr, _ := CheckValues(dir, storetest.EvidenceB); vr == nil || vr.Problem == "" || !vr.Bad() {
		t.Errorf("check with another evidence key: %+v, want a problem", vr)
	}
	if vr, _ := CheckValues(dir, nil); vr == nil || !strings.HasPrefix(vr.Problem, store.ErrEvidenceKey.Error()) || strings.Contains(vr.Problem, "--") {
		t.Errorf("check without a key: %+v, want a problem saying the evidence key is needed, naming no flag", vr)
	}

	out := t.TempDir()
	if _, err := SalvageWith(dir, out, nil); err == nil {
		t.Error("salvage of a sealed store without its key: no error")
	}
	rep, err := SalvageWith(dir, out, storetest.EvidenceA)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Skipped, []string{"s1"}) || rep.Sessions != 1 {
		t.Errorf("salvage: skipped %v, %d sessions; want s1 skipped, s2 kept", rep.Skipped, rep.Sessions)
	}
	t2, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	bindOrFail(t, t2, storetest.EvidenceA, "sk1")
	if _, _, err := t2.Session(t.Context(), "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("salvaged s1: %v, want NotFound", err)
	}
	if m, _, err := t2.Session(t.Context(), "s2"); err != nil || string(m) != `{"m":"two"}` {
		t.Errorf("salvaged s2: %q, %v", m, err)
	}
	if v, err := t2.RewardGet(t.Context(), store.RewardMarks, "c1"); err != nil || string(v) != `{"mark":3}` {
		t.Errorf("salvaged reward record: %q, %v", v, err)
	}
	if vr, err := CheckValues(out, storetest.EvidenceA); err == nil {
		t.Errorf("check of a store held open: %+v, want ErrLocked", vr)
	}
}

func TestEveryKindOfValueIsChecked(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(t *testing.T, s *Store)
		what   string
	}{
		{"record", func(t *testing.T, s *Store) { flip(t, s, bucketSessions, "s1", 'o') }, "record"},
		{"re-verification", func(t *testing.T, s *Store) { flip(t, s, bucketReverified, "s1/00000001", 'F') }, "re-verification 1"},
		{"baseline chunk", func(t *testing.T, s *Store) { flipChunk(t, s, 0) }, "baseline capture 0 chunk 0"},
		{"census", func(t *testing.T, s *Store) { flipChunk(t, s, store.CensusCapture(0)) }, "baseline capture -1 chunk 0"},
		{"reward record", func(t *testing.T, s *Store) { flip(t, s, []byte(store.RewardMarks.String()), "c1", '3') }, "reward record reward_marks/c1"},
		{"moved between sessions", func(t *testing.T, s *Store) {
			if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
				b := tx.Bucket(bucketSessions)
				return b.Put([]byte("s2"), bytes.Clone(b.Get([]byte("s1"))))
			}); err != nil {
				t.Fatal(err)
			}
		}, "record"},
		{"tag cut off", func(t *testing.T, s *Store) {
			if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
				b := tx.Bucket(bucketResults)
				return b.Put([]byte("s1"), store.Strip(bytes.Clone(b.Get([]byte("s1")))))
			}); err != nil {
				t.Fatal(err)
			}
		}, "result"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			bindOrFail(t, s, storetest.EvidenceA, "sk1")
			storetest.Fill(t, s)
			c.damage(t, s)
			err = readAll(s)
			ie, ok := errors.AsType[*store.IntegrityError](err)
			if !ok || ie.What != c.what {
				t.Errorf("read: %v, want an store.IntegrityError for the %s", err, c.what)
			}
			s.Close()
			vr, err := CheckValues(dir, storetest.EvidenceA)
			if err != nil {
				t.Fatal(err)
			}
			if len(vr.Damaged) != 1 || vr.Damaged[0].What != c.what {
				t.Errorf("check found %+v, want the %s", vr.Damaged, c.what)
			}
		})
	}
}

func flipChunk(t *testing.T, s *Store, capture int) {
	t.Helper()
	err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketBaselines).Bucket([]byte("s1")).Bucket(baselineKey("s1", capture))
		k, v := b.Cursor().First()
		v = bytes.Clone(v)
		v[bytes.IndexByte(v, 'T')] ^= 0x01
		return b.Put(bytes.Clone(k), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBindSealsAnOldStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Fill(t, s) // written as before values carried tags
	s.Close()
	vr, err := CheckValues(dir, storetest.EvidenceA)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Sealed || vr.Unsealed != 7 || vr.Bad() {
		t.Errorf("check of an old store: %+v, want 7 unsealed values and no damage", vr)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	if rep := bindOrFail(t, s, storetest.EvidenceA, "sk1"); rep.Sealed != 7 || !rep.FirstWriter {
		t.Errorf("bind: %+v, want 7 values sealed", rep)
	}
	if err := readAll(s); err != nil {
		t.Fatalf("after sealing: %v", err)
	}
	if _, r, _ := s.Session(t.Context(), "s1"); string(r) != `{"outcome":"FAILED","type":"Triage"}` {
		t.Errorf("result after sealing: %q", r)
	}
	// A value written without a tag after the seal is damage, not an old
	// record.
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSessions).Put([]byte("s2"), []byte(`{"m":"forged"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(t.Context(), "s2"); !errors.As(err, new(*store.IntegrityError)) {
		t.Errorf("an untagged value after the seal: %v, want an store.IntegrityError", err)
	}
	s.Close()
}

func TestBindRefusesOtherKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bindOrFail(t, s, storetest.EvidenceA, "sk1")
	storetest.Fill(t, s)
	s.Close()

	for _, c := range []struct {
		evidence []byte
		signing  string
		flags    []string
	}{
		{storetest.EvidenceB, "sk1", []string{"evidence key", store.EvidenceKeyID(storetest.EvidenceA), store.EvidenceKeyID(storetest.EvidenceB)}},
		{storetest.EvidenceA, "sk2", []string{"signing key", "sk1", "sk2"}},
	} {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Bind(t.Context(), store.IntegrityKey(c.evidence), storetest.KeysOf(c.evidence, c.signing), false)
		me, ok := errors.AsType[*store.KeyMismatchError](err)
		if !ok {
			t.Fatalf("bind with other keys: %v, want a store.KeyMismatchError", err)
		}
		for _, want := range append(c.flags, "rotates", dir) {
			if !strings.Contains(me.Error(), want) {
				t.Errorf("message %q does not name %q", me, want)
			}
		}
		if strings.Contains(me.Error(), "--") {
			t.Errorf("message %q names a flag; the daemon adds those", me)
		}
		s.Close()
	}

	// A deliberate rotation re-tags every value under the new key.
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Bind(t.Context(), store.IntegrityKey(storetest.EvidenceB), storetest.KeysOf(storetest.EvidenceB, "sk2"), true)
	if err != nil || !rep.Rotated || rep.Resealed != 7 {
		t.Fatalf("rotation: %+v, %v; want 7 values re-sealed", rep, err)
	}
	if err := readAll(s); err != nil {
		t.Errorf("after the rotation: %v", err)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Bind(t.Context(), store.IntegrityKey(storetest.EvidenceA), storetest.KeysOf(storetest.EvidenceA, "sk1"), false); !errors.As(err, new(*store.KeyMismatchError)) {
		t.Errorf("the old keys after the rotation: %v, want refused", err)
	}
}
