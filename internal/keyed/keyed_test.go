package keyed

import (
	"sync"
	"testing"
)

// TestLockIsExclusivePerKey runs many goroutines over two keys: within a
// key no two ever hold the lock together, and nothing is left behind.
func TestLockIsExclusivePerKey(t *testing.T) {
	t.Parallel()
	var k Mutex
	held := map[string]int{}
	var seen sync.Mutex
	var wg sync.WaitGroup
	for i := range 200 {
		key := []string{"a", "b"}[i%2]
		wg.Go(func() {
			unlock := k.Lock(key)
			defer unlock()
			seen.Lock()
			held[key]++
			n := held[key]
			seen.Unlock()
			if n != 1 {
				t.Errorf("%d holders of %q at once", n, key)
			}
			seen.Lock()
			held[key]--
			seen.Unlock()
		})
	}
	wg.Wait()
	if n := k.Len(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}
