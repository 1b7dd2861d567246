package bolt

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// TestReadBaselineAgainAfterRelease: a baseline whose mapped pages were
// released as it was read reads the same again, also by several readers
// at once (a re-verification, concurrent sessions); memory that is not the
// store's map is never released (it would read back as zeros).
func TestReadBaselineAgainAfterRelease(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSession(t.Context(), "s1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	w := s.NewBaseline("s1", 0)
	const n = 40_000 // about 12 MiB: several 4 MiB chunks
	rec := func(i int) string { return fmt.Sprintf(`{"id":%d,"note":"%0300d"}`, i, i) }
	for i := range n {
		if err := w.Add(t.Context(), []byte(rec(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	read := func() error {
		i := 0
		err := s.ReadBaseline(t.Context(), "s1", 0, func(b []byte) error {
			if string(b) != rec(i) {
				return fmt.Errorf("record %d = %.40s…", i, b)
			}
			i++
			return nil
		})
		if err == nil && i != n {
			err = fmt.Errorf("%d records, want %d", i, n)
		}
		return err
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for k := range errs {
		wg.Go(func() { errs[k] = read() })
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", k, err)
		}
	}
	heap := bytes.Repeat([]byte{7}, 1<<20)
	err = s.view(t.Context(), func(tx *bbolt.Tx) error {
		s.releaseMapped(tx, heap)
		return nil
	})
	if err != nil || bytes.Count(heap, []byte{7}) != len(heap) {
		t.Fatalf("a heap buffer was released: %v", err)
	}
}
