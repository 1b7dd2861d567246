package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

func testConcurrentFinish(t *testing.T, b Backend) {
	s := b.Open(t)
	create(t, s, "s1", `{}`)
	const n = 8
	type answer struct {
		stored []byte
		built  bool
		err    error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a := &answers[i]
			a.stored, a.built, a.err = s.FinishSessionLedger(t.Context(), "s1", func(l store.Ledger) ([]byte, bool, error) {
				return fmt.Appendf(nil, `{"writer":%d}`, i), false, appendEntry("verify", "s1")(l)
			})
		})
	}
	wg.Wait()
	built := 0
	_, stored, _ := s.Session(t.Context(), "s1")
	for i, a := range answers {
		if a.err != nil {
			t.Fatalf("writer %d: %v", i, a.err)
		}
		if !bytes.Equal(a.stored, stored) {
			t.Fatalf("writer %d got %s, but %s is stored", i, a.stored, stored)
		}
		if a.built {
			built++
			if string(a.stored) != fmt.Sprintf(`{"writer":%d}`, i) {
				t.Fatalf("writer %d was told built, but %s is stored", i, a.stored)
			}
		}
	}
	if built != 1 {
		t.Fatalf("%d writers were told their result was stored, want exactly 1", built)
	}
	checkChain(t, s, 2) // begin, and the one stored verify
}

func testConcurrentWriters(t *testing.T, b Backend) {
	s := b.Open(t)
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("s%02d", i)
			w := s.NewBaseline(id, 0)
			if err := w.Add(t.Context(), fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
				errs <- err
				return
			}
			if err := s.CreateSessionLedger(t.Context(), id, []byte(`{}`), appendEntry("begin", id), w); err != nil {
				errs <- err
				return
			}
			_, _, err := s.FinishSessionLedger(t.Context(), id, func(l store.Ledger) ([]byte, bool, error) {
				return []byte(`{}`), true, appendEntry("verify", id)(l)
			})
			errs <- err
		})
		wg.Go(func() { errs <- s.AppendLedger(t.Context(), appendEntry("tick", "")) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkChain(t, s, 3*n)
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		if got, err := readBaseline(t, s, id, 0); err != nil || !slices.Equal(got, []string{fmt.Sprintf(`{"i":%d}`, i)}) {
			t.Fatalf("%s's baseline: %q %v", id, got, err)
		}
	}
}

// prompt bounds how long a call with an ended context may take.
const prompt = 5 * time.Second

func testCancelled(t *testing.T, b Backend) {
	s := b.Open(t)
	fill(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	build := func(l store.Ledger) ([]byte, bool, error) { return []byte(`{}`), false, appendEntry("x", "")(l) }
	calls := map[string]func() error{
		"Bind": func() error {
			_, err := s.Bind(ctx, store.IntegrityKey(evidenceA), keysOf(evidenceA, "sk_a"), false)
			return err
		},
		"Session":        func() error { _, _, err := s.Session(ctx, "s1"); return err },
		"ForEachSession": func() error { return s.ForEachSession(ctx, func(string, []byte, []byte) error { return nil }) },
		"ReadBaseline":   func() error { return s.ReadBaseline(ctx, "s1", 0, func([]byte) error { return nil }) },
		"DropBaseline":   func() error { return s.DropBaseline(ctx, "x") },
		"BaselineClose": func() error {
			w := s.NewBaseline("x", 0)
			if err := w.Add(ctx, []byte(`{}`)); err != nil {
				return err
			}
			return w.Close(ctx)
		},
		"CreateSessionLedger": func() error { return s.CreateSessionLedger(ctx, "s3", []byte(`{}`), noEntry) },
		"FinishSessionLedger": func() error { _, _, err := s.FinishSessionLedger(ctx, "s2", build); return err },
		"AddReverification": func() error {
			_, err := s.AddReverification(ctx, "s1", func(l store.Ledger, _ int) ([]byte, bool, error) { return build(l) })
			return err
		},
		"Reverifications": func() error { _, err := s.Reverifications(ctx, "s1"); return err },
		"PutReceipt": func() error {
			_, err := s.PutReceipt(ctx, "k", func(store.Ledger) ([]byte, error) { return []byte(`{}`), nil })
			return err
		},
		"AppendLedger":     func() error { return s.AppendLedger(ctx, appendEntry("x", "")) },
		"LedgerHead":       func() error { _, err := s.LedgerHead(ctx); return err },
		"ExportLedger":     func() error { return s.ExportLedger(ctx, 1, func(receipt.Entry, []byte) error { return nil }) },
		"PutCheckpoint":    func() error { return s.PutCheckpoint(ctx, 1, []byte(`{}`)) },
		"LatestCheckpoint": func() error { _, _, err := s.LatestCheckpoint(ctx); return err },
		"RewardUpdate": func() error {
			return s.RewardUpdate(ctx, func(tx store.RewardTx) error { return tx.Put(store.RewardMarks, "c9", []byte(`{}`)) })
		},
		"RewardGet":     func() error { _, err := s.RewardGet(ctx, store.RewardMarks, "c1"); return err },
		"RemoveOrphans": func() error { _, err := s.RemoveOrphans(ctx, time.Now().Add(48*time.Hour), time.Hour); return err },
		"RemoveExpired": func() error { _, err := s.RemoveExpired(ctx, time.Now().Add(48*time.Hour), time.Hour); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if took := time.Since(start); took > prompt {
			t.Errorf("%s with a cancelled context took %v", name, took)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	if s.Size(ctx) < 0 {
		t.Error("Size with a cancelled context is negative")
	}
	// Nothing changed: the store reads as fill left it.
	if err := readAll(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(t.Context(), "s3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a create with a cancelled context stored its session: %v", err)
	}
	if _, result, _ := s.Session(t.Context(), "s2"); result != nil {
		t.Fatalf("a finish with a cancelled context stored %q", result)
	}
	if more, _ := s.Reverifications(t.Context(), "s1"); len(more) != 1 {
		t.Fatalf("a re-verification with a cancelled context was stored: %d", len(more))
	}
	if v, _ := s.RewardGet(t.Context(), store.RewardMarks, "c9"); v != nil {
		t.Fatalf("a reward update with a cancelled context stored %q", v)
	}
	checkChain(t, s, 3)
}
