package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store"
)

// testRuns: a run is created once (a second create answers the stored
// record), updated with its ledger entries, listed, and an update that
// fails changes nothing.
func testRuns(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	if _, err := s.Run(ctx, "r1"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("Run of an unknown id: %v, want ErrRunNotFound", err)
	}
	if _, err := s.UpdateRun(ctx, "r1", func(store.Ledger, []byte) ([]byte, store.RunChange, error) {
		t.Fatal("fn called for an unknown run")
		return nil, store.RunChange{}, nil
	}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("UpdateRun of an unknown id: %v, want ErrRunNotFound", err)
	}
	stored, created, err := s.CreateRun(ctx, "r1", []byte(`{"v":1}`), appendEntry("run_begun", "r1"))
	if err != nil || !created || string(stored) != `{"v":1}` {
		t.Fatalf("CreateRun: %s %v %v", stored, created, err)
	}
	// The same id again: the first record, nothing written, fn not run.
	stored, created, err = s.CreateRun(ctx, "r1", []byte(`{"v":2}`), func(store.Ledger) error {
		t.Fatal("fn called for a taken run id")
		return nil
	})
	if err != nil || created || string(stored) != `{"v":1}` {
		t.Fatalf("CreateRun of a taken id: %s %v %v; want the stored record, created false", stored, created, err)
	}
	out, err := s.UpdateRun(ctx, "r1", func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error) {
		if string(rec) != `{"v":1}` {
			t.Errorf("fn read %s, want the stored record", rec)
		}
		return []byte(`{"v":3}`), store.RunChange{}, appendEntry("run_step_bound", "r1")(l)
	})
	if err != nil || string(out) != `{"v":3}` {
		t.Fatalf("UpdateRun: %s %v", out, err)
	}
	// A nil record keeps the stored one; its ledger entry still commits.
	out, err = s.UpdateRun(ctx, "r1", func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error) {
		return nil, store.RunChange{}, appendEntry("run_sealed", "r1")(l)
	})
	if err != nil || string(out) != `{"v":3}` {
		t.Fatalf("UpdateRun with no new record: %s %v", out, err)
	}
	// An error changes nothing, ledger included.
	boom := errors.New("boom")
	if _, err := s.UpdateRun(ctx, "r1", func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error) {
		_ = appendEntry("run_sealed", "r1")(l)
		return []byte(`{"v":4}`), store.RunChange{}, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("UpdateRun whose fn fails: %v, want its error", err)
	}
	if got, err := s.Run(ctx, "r1"); err != nil || string(got) != `{"v":3}` {
		t.Fatalf("Run after a failed update: %s %v", got, err)
	}
	entries := checkChain(t, s, 3)
	for i, want := range []string{"run_begun", "run_step_bound", "run_sealed"} {
		if entries[i].Type != want || entries[i].Session != "r1" {
			t.Fatalf("ledger entry %d = %s/%s, want %s/r1", i+1, entries[i].Type, entries[i].Session, want)
		}
	}
	if _, _, err := s.CreateRun(ctx, "r0", []byte(`{"v":0}`), noEntry); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := s.ForEachRun(ctx, func(id string, rec []byte) error {
		ids = append(ids, id+"="+string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != `[r0={"v":0} r1={"v":3}]` {
		t.Fatalf("ForEachRun = %q, want both runs in id order", ids)
	}
	stop := errors.New("stop")
	if err := s.ForEachRun(ctx, func(string, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ForEachRun whose fn fails: %v", err)
	}
}

// testConcurrentRunUpdates: updates of one run never lose one another
// (each reads the newest record), however many writers run at once.
func testConcurrentRunUpdates(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	if _, _, err := s.CreateRun(ctx, "r", []byte(`{"n":0}`), noEntry); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.UpdateRun(ctx, "r", func(l store.Ledger, rec []byte) ([]byte, store.RunChange, error) {
				var v struct{ N int }
				if err := json.Unmarshal(rec, &v); err != nil {
					return nil, store.RunChange{}, err
				}
				return fmt.Appendf(nil, `{"n":%d}`, v.N+1), store.RunChange{}, appendEntry("run_step_bound", "r")(l)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	got, err := s.Run(ctx, "r")
	if err != nil || !bytes.Equal(got, fmt.Appendf(nil, `{"n":%d}`, n)) {
		t.Fatalf("after %d updates the run reads %s (%v): an update was lost", n, got, err)
	}
	checkChain(t, s, n)
}

// testRunHolds: a session a run holds outlives the retention while the run
// is open, and goes once the retention has passed since the run's seal.
func testRunHolds(t *testing.T, b Backend) {
	s := b.Open(t)
	ctx := t.Context()
	for _, id := range []string{"held", "free", "held-unfinished"} {
		create(t, s, id, `{}`)
	}
	finish(t, s, "held", `{}`, true)
	finish(t, s, "free", `{}`, false)
	if _, _, err := s.CreateRun(ctx, "r", []byte(`{}`), noEntry); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRun(ctx, "r", func(store.Ledger, []byte) ([]byte, store.RunChange, error) {
		return nil, store.RunChange{Hold: []string{"held", "held-unfinished"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(48 * time.Hour)
	if n, err := s.RemoveExpired(ctx, later, time.Hour); err != nil || n != 1 {
		t.Fatalf("RemoveExpired with the run open: removed %d (%v), want only the free session", n, err)
	}
	if st, err := s.RemoveOrphans(ctx, later, time.Hour); err != nil || st.UnfinishedSessions != 0 {
		t.Fatalf("RemoveOrphans with the run open: %+v %v; the held unfinished session must stay", st, err)
	}
	for _, id := range []string{"held", "held-unfinished"} {
		if _, _, err := s.Session(ctx, id); err != nil {
			t.Fatalf("held session %s: %v", id, err)
		}
	}
	// Sealed now: held for a retention from now, then gone.
	if _, err := s.UpdateRun(ctx, "r", func(store.Ledger, []byte) ([]byte, store.RunChange, error) {
		return []byte(`{"sealed":true}`), store.RunChange{Sealed: true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RemoveExpired(ctx, time.Now(), time.Hour); err != nil || n != 0 {
		t.Fatalf("RemoveExpired right after the seal: removed %d (%v), want none", n, err)
	}
	if n, err := s.RemoveExpired(ctx, later, time.Hour); err != nil || n != 1 {
		t.Fatalf("RemoveExpired a retention after the seal: removed %d (%v), want the held session", n, err)
	}
	if st, err := s.RemoveOrphans(ctx, later, time.Hour); err != nil || st.UnfinishedSessions != 1 {
		t.Fatalf("RemoveOrphans a retention after the seal: %+v %v; want the held unfinished session", st, err)
	}
	if _, _, err := s.Session(ctx, "held"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the held session outlived its run's retention: %v", err)
	}
	// The run record itself stays.
	if got, err := s.Run(ctx, "r"); err != nil || string(got) != `{"sealed":true}` {
		t.Fatalf("Run after the cleanups: %s %v", got, err)
	}
}
