package bolt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/verifierd/verifierd/internal/store"
)

func addRecords(t *testing.T, w store.BaselineWriter, n int) {
	t.Helper()
	for i := range n {
		if err := w.Add(t.Context(), fmt.Appendf(nil, `{"id":%d,"note":"%0200d"}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
}

func hasBaseline(s *Store, id string) bool {
	return !errors.Is(s.ReadBaseline(context.Background(), id, 0, func([]byte) error { return nil }), store.ErrNotFound)
}

// TestOrphanChunksRemovedAtStart: a Begin killed after some chunks were
// flushed and before CreateSession leaves chunks of a session that does not
// exist; the next start removes them and keeps committed sessions.
func TestOrphanChunksRemovedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := s.NewBaseline("kept", 0)
	addRecords(t, kept, 100)
	if err := s.CreateSession(t.Context(), "kept", []byte(`{}`), kept); err != nil {
		t.Fatal(err)
	}
	dead := s.NewBaseline("killed", 0)
	addRecords(t, dead, 30_000) // more than one chunk: flushed on its own
	if !hasBaseline(s, "killed") {
		t.Fatal("no chunk flushed before the kill")
	}
	// While the Begin is in flight its chunks are kept.
	st, err := s.RemoveOrphans(context.Background(), time.Now(), 24*time.Hour)
	if err != nil || st.OrphanBaselines != 0 || !hasBaseline(s, "killed") {
		t.Fatalf("in-flight Begin: %+v %v; its chunks must stay", st, err)
	}
	s.Close() // the kill: no CreateSession, no DropBaseline

	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err = s.RemoveOrphans(context.Background(), time.Now(), 24*time.Hour)
	if err != nil || st.OrphanBaselines != 1 {
		t.Fatalf("at start: %+v %v, want 1 orphan baseline removed", st, err)
	}
	if hasBaseline(s, "killed") {
		t.Error("orphan chunks still there")
	}
	if !hasBaseline(s, "kept") {
		t.Error("a committed session's baseline was removed")
	}
}

// TestInFlightBeginSurvivesCleanup: chunks written by a Begin still in
// progress survive a periodic cleanup and are committed with the session.
func TestInFlightBeginSurvivesCleanup(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.NewBaseline("begin", 0)
	addRecords(t, w, 30_000)
	if _, err := s.RemoveOrphans(context.Background(), time.Now(), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	addRecords(t, w, 10)
	if err := s.CreateSession(t.Context(), "begin", []byte(`{}`), w); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.ReadBaseline(t.Context(), "begin", 0, func([]byte) error { n++; return nil }); err != nil || n != 30_010 {
		t.Fatalf("baseline after cleanup: %d records, %v; want 30010", n, err)
	}
	// A refused Begin's chunks are dropped and nothing is left in flight.
	w2 := s.NewBaseline("refused", 0)
	addRecords(t, w2, 30_000)
	if err := s.DropBaseline(t.Context(), "refused"); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.RemoveOrphans(context.Background(), time.Now(), 24*time.Hour); st.OrphanBaselines != 0 || hasBaseline(s, "refused") {
		t.Errorf("refused Begin: %+v", st)
	}
}

// TestUnfinishedSessionsExpire: a session begun and never verified is
// removed with its baseline once older than the retention; a finished or a
// recent one is kept.
func TestUnfinishedSessionsExpire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"old", "done"} {
		w := s.NewBaseline(id, 0)
		addRecords(t, w, 100)
		if err := s.CreateSession(t.Context(), id, []byte(`{}`), w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.FinishSession(t.Context(), "done", []byte("result")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st, err := s.RemoveOrphans(context.Background(), now.Add(23*time.Hour), 24*time.Hour)
	if err != nil || st.UnfinishedSessions != 0 {
		t.Fatalf("recent session: %+v %v; must be kept", st, err)
	}
	// Two days later "old" has expired; "recent", begun now, has not.
	w := s.NewBaseline("recent", 0)
	addRecords(t, w, 10)
	if err := s.CreateSession(t.Context(), "recent", []byte(`{}`), w); err != nil {
		t.Fatal(err)
	}
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketBegun).Put([]byte("old"), beginStamp(now.Add(-48*time.Hour)))
	}); err != nil {
		t.Fatal(err)
	}
	st, err = s.RemoveOrphans(context.Background(), time.Now(), 24*time.Hour)
	if err != nil || st.UnfinishedSessions != 1 {
		t.Fatalf("expired session: %+v %v, want 1 removed", st, err)
	}
	if _, _, err := s.Session(t.Context(), "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired session still there: %v", err)
	}
	if hasBaseline(s, "old") {
		t.Error("expired session's baseline still there")
	}
	if _, r, err := s.Session(t.Context(), "done"); err != nil || string(r) != "result" {
		t.Errorf("finished session: %s %v", r, err)
	}
	if _, _, err := s.Session(t.Context(), "recent"); err != nil || !hasBaseline(s, "recent") {
		t.Errorf("recent session: %v", err)
	}
	// A store from before begin stamps: its unfinished sessions count as
	// begun at the upgrade, so none expires at once.
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error { return tx.DeleteBucket(bucketBegun) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.RemoveOrphans(context.Background(), time.Now(), time.Hour); st.UnfinishedSessions != 0 {
		t.Errorf("upgrade: %+v, want nothing removed", st)
	}
	if st, _ := s.RemoveOrphans(context.Background(), time.Now().Add(2*time.Hour), time.Hour); st.UnfinishedSessions != 1 {
		t.Errorf("upgrade, later: %+v, want the recent session removed", st)
	}
}
