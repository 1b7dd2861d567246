package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/verifierd/verifierd/receipt"

	"github.com/verifierd/verifierd/internal/store"
)

// holdCommit starts a session write that blocks inside its transaction
// until release is closed, so that writers arriving meanwhile queue behind
// it; it returns once the write is running.
func holdCommit(t *testing.T, s *Store, release chan struct{}) <-chan error {
	t.Helper()
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.AppendLedger(t.Context(), func(l store.Ledger) error {
			select {
			case <-running:
			default:
				close(running)
			}
			<-release
			_, err := l.Append("hold", "", "sha256:00")
			return err
		})
	}()
	<-running
	return done
}

// waitQueued waits until n writers are queued behind the running commit.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writers queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func exportChain(t *testing.T, s *Store) []receipt.Entry {
	t.Helper()
	var entries []receipt.Entry
	if err := s.ExportLedger(t.Context(), 0, func(e receipt.Entry, _ []byte) error {
		entries = append(entries, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.VerifyChain(entries, false); err != nil {
		t.Fatalf("ledger chain: %v", err)
	}
	return entries
}

// TestGroupCommitConcurrentCreates: N sessions created while another write
// holds the store commit in one shared transaction; all N exist, each has
// exactly one ledger entry, the chain verifies, and they survive a reopen.
func TestGroupCommitConcurrentCreates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	release := make(chan struct{})
	held := holdCommit(t, s, release)
	before := s.group.commits.Load()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("s%02d", i)
			w := s.NewBaseline(id, 0)
			if err := w.Add(t.Context(), fmt.Appendf(nil, `{"id": %d}`, i)); err != nil {
				errs[i] = err
				return
			}
			errs[i] = s.CreateSessionLedger(t.Context(), id, []byte(`{}`), func(l store.Ledger) error {
				_, err := l.Append("begin", id, "sha256:aa")
				return err
			}, w)
		})
	}
	waitQueued(t, s, n)
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create s%02d: %v", i, err)
		}
	}
	if got := s.group.commits.Load() - before; got != 2 {
		t.Errorf("%d commits for the held write and %d queued creates, want 2", got, n)
	}
	check := func(s *Store) {
		entries := exportChain(t, s)
		if len(entries) != n+1 {
			t.Fatalf("%d ledger entries, want %d", len(entries), n+1)
		}
		begins := map[string]int{}
		for _, e := range entries[1:] {
			begins[e.Session]++
		}
		for i := range n {
			id := fmt.Sprintf("s%02d", i)
			if begins[id] != 1 {
				t.Errorf("%s has %d begin entries, want 1", id, begins[id])
			}
			if _, _, err := s.Session(t.Context(), id); err != nil {
				t.Errorf("session %s: %v", id, err)
			}
			var recs int
			if err := s.ReadBaseline(t.Context(), id, 0, func([]byte) error { recs++; return nil }); err != nil || recs != 1 {
				t.Errorf("baseline of %s: %d records, %v", id, recs, err)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// TestGroupCommitRerunsAfterRefusal: one write of a group refuses (a
// duplicate session id); the transaction is rolled back, the others run
// again and commit, the refused one gets its error. Functions that ran
// twice left one ledger entry each: a re-run never doubles an entry.
func TestGroupCommitRerunsAfterRefusal(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSession(t.Context(), "taken", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := holdCommit(t, s, release)
	ids := []string{"a", "b", "taken", "c", "d"}
	runs := make([]atomic.Int32, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			errs[i] = s.CreateSessionLedger(t.Context(), id, []byte(`{}`), func(l store.Ledger) error {
				runs[i].Add(1)
				_, err := l.Append("begin", id, "sha256:aa")
				return err
			})
		})
		waitQueued(t, s, i+1) // a known order in the queue
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		want := error(nil)
		if id == "taken" {
			want = store.ErrExists
		}
		if !errors.Is(errs[i], want) {
			t.Errorf("create %s: %v, want %v", id, errs[i], want)
		}
	}
	// a and b ran before the refusal and again after it; c and d never
	// ran in the failed attempt; "taken" never reaches its ledger append.
	for i, want := range []int32{2, 2, 0, 1, 1} {
		if got := runs[i].Load(); got != want {
			t.Errorf("%s ran its ledger function %d times, want %d", ids[i], got, want)
		}
	}
	entries := exportChain(t, s)
	per := map[string]int{}
	for _, e := range entries {
		per[e.Session]++
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if per[id] != 1 {
			t.Errorf("%s has %d ledger entries, want 1", id, per[id])
		}
	}
	if per["taken"] != 0 {
		t.Errorf("the refused create left %d ledger entries", per["taken"])
	}
}

// TestGroupCommitNoEarlyAck: a writer is answered only with its group's
// fate. The store is closed while a group is queued behind a running
// commit: each queued create either failed with the closed-store error and
// is absent after a reopen, or succeeded and is there; never acknowledged
// and missing.
func TestGroupCommitNoEarlyAck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := holdCommit(t, s, release)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.CreateSession(t.Context(), fmt.Sprintf("q%d", i), []byte(`{}`)) })
	}
	waitQueued(t, s, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }() // waits for the held write
	time.Sleep(50 * time.Millisecond)   // let Close queue for the store's lock
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	failed := 0
	for i := range n {
		_, _, got := s.Session(t.Context(), fmt.Sprintf("q%d", i))
		switch {
		case errs[i] == nil && got != nil:
			t.Errorf("q%d was acknowledged but is not in the store: %v", i, got)
		case errs[i] != nil && !errors.Is(errs[i], bolterrors.ErrDatabaseNotOpen):
			t.Errorf("q%d: %v, want success or the closed-store error", i, errs[i])
		case errs[i] != nil && !errors.Is(got, store.ErrNotFound):
			t.Errorf("q%d failed (%v) but is in the store", i, errs[i])
		case errs[i] != nil:
			failed++
		}
	}
	t.Logf("%d of %d queued creates met the closed store", failed, n)
	if failed != 0 && failed != n {
		t.Errorf("%d of %d queued creates failed: a group commits or fails whole", failed, n)
	}
	if entries := exportChain(t, s); len(entries) != 1 {
		t.Errorf("%d ledger entries, want the held write's 1", len(entries))
	}
}

// TestBaselineWriterRerun: a baseline chunk committed by a transaction
// that is rolled back and run again is written once, at the same seq.
func TestBaselineWriterRerun(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.NewBaseline("r", 0).(*baselineWriter)
	if err := w.Add(t.Context(), []byte(`{"id": 1}`)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.update(t.Context(), func(tx *bbolt.Tx) error {
		if err := w.commit(tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := s.CreateSession(t.Context(), "r", []byte(`{}`), w); err != nil {
		t.Fatal(err)
	}
	var recs []string
	if err := s.ReadBaseline(t.Context(), "r", 0, func(rec []byte) error { recs = append(recs, string(rec)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0] != `{"id": 1}` {
		t.Fatalf("baseline %q, want the one record once", recs)
	}
}

// TestGroupCommitQueuedCallLeavesOnCancel: a write queued behind a running
// commit whose context ends leaves the queue at once with the context's
// error, its function never runs, and the writers queued beside it commit
// as if it had never come.
func TestGroupCommitQueuedCallLeavesOnCancel(t *testing.T) {
	t.Parallel()
	s, err := OpenWith(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := make(chan struct{})
	held := holdCommit(t, s, release)
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	cancelled := make(chan error, 1)
	go func() {
		cancelled <- s.AppendLedger(ctx, func(l store.Ledger) error {
			ran.Store(true)
			_, err := l.Append("cancelled", "", "sha256:00")
			return err
		})
	}()
	waitQueued(t, s, 1)
	other := make(chan error, 1)
	go func() {
		other <- s.AppendLedger(t.Context(), func(l store.Ledger) error {
			_, err := l.Append("other", "", "sha256:00")
			return err
		})
	}()
	waitQueued(t, s, 2)
	cancel()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled queued write: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued write whose context ended is still waiting for the running commit")
	}
	waitQueued(t, s, 1)
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatal("the cancelled write's function ran")
	}
	if got := exportChain(t, s); len(got) != 2 || got[0].Type != "hold" || got[1].Type != "other" {
		t.Fatalf("ledger %+v, want the held entry and the other one", got)
	}
}
