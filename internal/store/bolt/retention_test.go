package bolt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

// TestRemoveExpired: finished sessions past the retention go with their
// results, re-verifications and baselines; younger finished sessions,
// unfinished ones and the ledger stay.
func TestRemoveExpired(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(id string, finish bool) {
		w := s.NewBaseline(id, 0)
		addRecords(t, w, 3)
		if err := s.CreateSessionLedger(t.Context(), id, []byte(`{}`), func(l store.Ledger) error {
			_, err := l.Append("begin", id, "sha256:aa")
			return err
		}, w); err != nil {
			t.Fatal(err)
		}
		if finish {
			if _, _, err := s.FinishSessionLedger(t.Context(), id, func(store.Ledger) ([]byte, bool, error) { return []byte(`{}`), true, nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AddReverification(t.Context(), id, func(store.Ledger, int) ([]byte, bool, error) { return []byte(`{}`), true, nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 40 {
		mk(fmt.Sprintf("old-%02d", i), true)
	}
	mk("old-unfinished", false)
	now := time.Now()
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		for i := range 40 {
			if err := tx.Bucket(bucketFinished).Put(fmt.Appendf(nil, "old-%02d", i), beginStamp(now.Add(-200*time.Hour))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mk("new", true)
	head, err := s.LedgerHead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.RemoveExpired(context.Background(), time.Now(), 168*time.Hour)
	if err != nil || n != 40 {
		t.Fatalf("removed %d (%v), want 40", n, err)
	}
	var ids []string
	if err := s.ForEachSession(t.Context(), func(id string, _, _ []byte) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "new,old-unfinished" {
		t.Fatalf("sessions left: %v", ids)
	}
	if hasBaseline(s, "old-07") || !hasBaseline(s, "new") || !hasBaseline(s, "old-unfinished") {
		t.Fatal("baselines: want old-07's removed, new and old-unfinished kept")
	}
	if revs, _ := s.Reverifications(t.Context(), "old-07"); len(revs) != 0 {
		t.Fatalf("re-verifications of a removed session: %d", len(revs))
	}
	if revs, _ := s.Reverifications(t.Context(), "new"); len(revs) != 1 {
		t.Fatalf("re-verifications of a kept session: %d", len(revs))
	}
	if after, err := s.LedgerHead(t.Context()); err != nil || after != head {
		t.Fatalf("the ledger changed: %+v -> %+v (%v)", head, after, err)
	}
	if _, _, err := s.Session(t.Context(), "old-07"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed session: %v", err)
	}
	// A result stored without a stamp (an older daemon) is stamped now and
	// kept a full retention from the pass that stamped it.
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error { return tx.Bucket(bucketFinished).Delete([]byte("new")) }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RemoveExpired(context.Background(), time.Now().Add(time.Hour), time.Hour/2); err != nil || n != 0 {
		t.Fatalf("unstamped result: removed %d (%v), want 0", n, err)
	}
	if n, err := s.RemoveExpired(context.Background(), time.Now().Add(time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("retain 0: removed %d (%v)", n, err)
	}
	if n, err := s.RemoveExpired(context.Background(), time.Now().Add(2*time.Hour), time.Hour/2); err != nil || n != 1 {
		t.Fatalf("stamped result past the retention: removed %d, want 1", n)
	}
}
