package bolt

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/verifierd/verifierd/internal/store"
)

func TestCompactKeepsEverySession(t *testing.T) {
	t.Parallel()
	dir := seedStore(t)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Free some pages so that compaction has something to do.
	if _, err := s.FinishSession(t.Context(), "s1", []byte("r1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Compact(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("compact while a daemon holds the store: %v, want ErrLocked", err)
	}
	s.Close()
	res, err := Compact(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sessions != 3 || res.After >= res.BytesBefore {
		t.Errorf("compaction: %+v", res)
	}
	if rep, err := Check(dir); err != nil || rep.Err() != nil {
		t.Fatalf("check after compaction: %v %v", err, rep.Err())
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"s0", "s1", "s2"} {
		if _, _, err := s.Session(t.Context(), id); err != nil {
			t.Errorf("session %s after compaction: %v", id, err)
		}
	}
	n := 0
	if err := s.ReadBaseline(t.Context(), "s0", 0, func([]byte) error { n++; return nil }); err != nil || n != 20_000 {
		t.Errorf("baseline after compaction: %d %v", n, err)
	}
}

func TestCompactRefusesCorrupt(t *testing.T) {
	t.Parallel()
	dir := copyStore(t, seedStore(t))
	writeAt(t, filepath.Join(dir, storeFile), 0, make([]byte, 8192))
	var ce *CorruptError
	if _, err := Compact(dir); !errors.As(err, &ce) {
		t.Errorf("compact of a corrupt store: %v", err)
	}
}

// TestSalvage: the readable sessions of a store with one damaged baseline
// page are copied; the damaged capture is reported lost, not copied short.
func TestSalvage(t *testing.T) {
	t.Parallel()
	clean := seedStore(t)
	psize, _, leaves := layout(t, filepath.Join(clean, storeFile))
	dir := copyStore(t, clean)
	// Damage the page after the sessions' leaves: a baseline chunk page.
	bad := leaves[len(leaves)-1]
	writeAt(t, filepath.Join(dir, storeFile), int64(bad)*int64(psize)+8, garbage(psize-8))
	if _, err := Open(dir); err == nil {
		t.Fatal("the damaged store opened")
	}
	out := t.TempDir()
	rep, err := Salvage(dir, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvage: %+v", rep)
	if rep.Sessions != 3 || rep.Results != 1 || len(rep.Damage) == 0 {
		t.Errorf("salvage report %+v", rep)
	}
	if rep.Baselines+len(rep.LostBaselines) != 2 {
		t.Errorf("baselines: %d copied, lost %v; want the two unfinished sessions' accounted for", rep.Baselines, rep.LostBaselines)
	}
	s, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"s0", "s1", "s2"} {
		if _, _, err := s.Session(t.Context(), id); err != nil {
			t.Errorf("salvaged session %s: %v", id, err)
		}
	}
	for _, id := range []string{"s0", "s1"} {
		n := 0
		err := s.ReadBaseline(t.Context(), id, 0, func([]byte) error { n++; return nil })
		lost := false
		for _, l := range rep.LostBaselines {
			lost = lost || l == id+"/0" || l == id+"/*"
		}
		switch {
		case lost && !errors.Is(err, store.ErrNotFound):
			t.Errorf("lost baseline %s present: %d records, %v", id, n, err)
		case !lost && (err != nil || n != 20_000):
			t.Errorf("salvaged baseline %s: %d records, %v", id, n, err)
		}
	}
	if _, err := Salvage(dir, out); err == nil {
		t.Error("salvage into a dir with a store")
	}
}
