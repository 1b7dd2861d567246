package bolt

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRandomDamageNeverPanics: garbage at random places of a store either
// is found by Open or leaves a store that reads without a panic.
func TestRandomDamageNeverPanics(t *testing.T) {
	t.Parallel()
	clean := seedStoreN(t, 1500)
	orig, err := os.ReadFile(filepath.Join(clean, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	psize, m, leaves := layout(t, filepath.Join(clean, storeFile))
	hot := append([]uint64{m.root, m.freelist}, leaves...)
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 100
	if testing.Short() {
		iters = 20
	}
	refused := 0
	for i := range iters {
		dir := copyStore(t, clean)
		path := filepath.Join(dir, storeFile)
		b := append([]byte(nil), orig...)
		for range 1 + rng.IntN(3) {
			page := hot[rng.IntN(len(hot))]
			if rng.IntN(4) == 0 {
				page = uint64(rng.IntN(len(b) / psize))
			}
			off := int(page)*psize + rng.IntN(psize)
			n := 1 + rng.IntN(64)
			for j := off; j < off+n && j < len(b); j++ {
				b[j] = byte(rng.Uint32())
			}
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err != nil {
			if _, ok := errors.AsType[*CorruptError](err); !ok {
				t.Fatalf("iteration %d: %v is not a *CorruptError", i, err)
			}
			refused++
			continue
		}
		for _, id := range []string{"s0", "s1", "s2"} {
			_, _, _ = s.Session(t.Context(), id) // any answer but a panic will do
			_ = s.ReadBaseline(t.Context(), id, 0, func([]byte) error { return nil })
		}
		_, _ = s.RemoveOrphans(t.Context(), time.Now(), 0)
		s.Close()
	}
	t.Logf("%d of %d damaged copies refused", refused, iters)
}
