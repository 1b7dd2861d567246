package bolt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(t.Context(), "s1", []byte(`{"m":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(t.Context(), "s1", []byte(`{}`)); !errors.Is(err, store.ErrExists) {
		t.Errorf("second create: %v, want store.ErrExists", err)
	}
	w := s.NewBaseline("s1", 0)
	const n = 50_000
	for i := range n {
		if err := w.Add(t.Context(), fmt.Appendf(nil, `{"id":%d,"note":"%0200d"}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	empty := s.NewBaseline("s1", 1)
	if err := empty.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Reopen: a daemon restart between Begin and Verify loses nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	count := 0
	err = s.ReadBaseline(t.Context(), "s1", 0, func(rec []byte) error {
		if want := fmt.Sprintf(`{"id":%d,"note":"%0200d"}`, count, count); string(rec) != want {
			return fmt.Errorf("record %d = %s", count, rec)
		}
		count++
		return nil
	})
	if err != nil || count != n {
		t.Fatalf("read %d records, err %v; want %d", count, err, n)
	}
	if err := s.ReadBaseline(t.Context(), "s1", 1, func([]byte) error { return errors.New("no records expected") }); err != nil {
		t.Errorf("empty baseline: %v", err)
	}
	if err := s.ReadBaseline(t.Context(), "s1", 2, func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing capture: %v, want store.ErrNotFound", err)
	}
	meta, result, err := s.Session(t.Context(), "s1")
	if err != nil || string(meta) != `{"m":1}` || result != nil {
		t.Fatalf("session: %s %s %v", meta, result, err)
	}
	stored, err := s.FinishSession(t.Context(), "s1", []byte("first"))
	if err != nil || string(stored) != "first" {
		t.Fatalf("finish: %s %v", stored, err)
	}
	stored, err = s.FinishSession(t.Context(), "s1", []byte("second"))
	if err != nil || string(stored) != "first" {
		t.Errorf("second finish returned %s %v; the first result must stand", stored, err)
	}
	if _, _, err := s.Session(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if err := s.ReadBaseline(t.Context(), "s1", 0, func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("baseline after finish: %v, want it dropped", err)
	}
}
