package bolt

import (
	"errors"
	"fmt"
	"strings"
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
	if err := s.CreateSession("s1", []byte(`{"m":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession("s1", []byte(`{}`)); !errors.Is(err, store.ErrExists) {
		t.Errorf("second create: %v, want store.ErrExists", err)
	}
	w := s.NewBaseline("s1", 0)
	const n = 50_000
	for i := range n {
		if err := w.Add(fmt.Appendf(nil, `{"id":%d,"note":"%0200d"}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	empty := s.NewBaseline("s1", 1)
	if err := empty.Close(); err != nil {
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
	err = s.ReadBaseline("s1", 0, func(rec []byte) error {
		if want := fmt.Sprintf(`{"id":%d,"note":"%0200d"}`, count, count); string(rec) != want {
			return fmt.Errorf("record %d = %s", count, rec)
		}
		count++
		return nil
	})
	if err != nil || count != n {
		t.Fatalf("read %d records, err %v; want %d", count, err, n)
	}
	if err := s.ReadBaseline("s1", 1, func([]byte) error { return errors.New("no records expected") }); err != nil {
		t.Errorf("empty baseline: %v", err)
	}
	if err := s.ReadBaseline("s1", 2, func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing capture: %v, want store.ErrNotFound", err)
	}
	meta, result, err := s.Session("s1")
	if err != nil || string(meta) != `{"m":1}` || result != nil {
		t.Fatalf("session: %s %s %v", meta, result, err)
	}
	stored, err := s.FinishSession("s1", []byte("first"))
	if err != nil || string(stored) != "first" {
		t.Fatalf("finish: %s %v", stored, err)
	}
	stored, err = s.FinishSession("s1", []byte("second"))
	if err != nil || string(stored) != "first" {
		t.Errorf("second finish returned %s %v; the first result must stand", stored, err)
	}
	if _, _, err := s.Session("nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if err := s.ReadBaseline("s1", 0, func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("baseline after finish: %v, want it dropped", err)
	}
}

// The same test runs against PostgreSQL in pgstore.
func TestCensusCaptureBesideTheBaseline(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"kept", "final"} {
		base, census := s.NewBaseline(id, 0), s.NewBaseline(id, store.CensusCapture(0))
		if err := base.Add([]byte(`{"id":1,"owner":"a"}`)); err != nil {
			t.Fatal(err)
		}
		for _, rec := range []string{`{"id":1}`, `{"id":2}`} {
			if err := census.Add([]byte(rec)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateSession(id, []byte(`{}`), base, census); err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := s.ReadBaseline(id, store.CensusCapture(0), func(rec []byte) error { got = append(got, string(rec)); return nil }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != `{"id":1},{"id":2}` {
			t.Fatalf("census %v", got)
		}
		n := 0
		if err := s.ReadBaseline(id, 0, func([]byte) error { n++; return nil }); err != nil || n != 1 {
			t.Fatalf("baseline beside the census: %d records, %v", n, err)
		}
	}
	if _, err := s.FinishSessionLedger("kept", func(*Ledger) ([]byte, bool, error) { return []byte(`{}`), true, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadBaseline("kept", store.CensusCapture(0), func([]byte) error { return nil }); err != nil {
		t.Errorf("census of a session kept for Reverify: %v", err)
	}
	if _, err := s.FinishSession("final", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadBaseline("final", store.CensusCapture(0), func([]byte) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("census after a final result: %v, want store.ErrNotFound", err)
	}
}
