package bolt

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/store"
)

// BenchmarkSessionWrites: the store's part of a session (CreateSessionLedger
// with a 10-record baseline and a begin entry, then FinishSessionLedger with
// a verify entry), with fsync, from 1 and 8 writers at once, with group
// commit and without (each write its own transaction and fsync).
func BenchmarkSessionWrites(b *testing.B) {
	for _, writers := range []int{1, 8} {
		for _, solo := range []bool{false, true} {
			name := fmt.Sprintf("writers-%d/group", writers)
			if solo {
				name = fmt.Sprintf("writers-%d/solo", writers)
			}
			b.Run(name, func(b *testing.B) { benchSessionWrites(b, writers, solo) })
		}
	}
}

func benchSessionWrites(b *testing.B, writers int, solo bool) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.group.solo = solo
	var seq atomic.Int64
	session := func() error {
		id := fmt.Sprintf("s%d", seq.Add(1))
		w := s.NewBaseline(id, 0)
		for i := range 10 {
			if err := w.Add(b.Context(), fmt.Appendf(nil, `{"id": %d, "patient_id": "bench", "type": "Consult"}`, i)); err != nil {
				return err
			}
		}
		if err := s.CreateSessionLedger(b.Context(), id, []byte(`{"meta": true}`), func(l store.Ledger) error {
			_, err := l.Append("begin", id, "sha256:aa")
			return err
		}, w); err != nil {
			return err
		}
		_, _, err := s.FinishSessionLedger(b.Context(), id, func(l store.Ledger) ([]byte, bool, error) {
			_, err := l.Append("verify", id, "sha256:bb")
			return []byte(`{"outcome": "VERIFIED"}`), false, err
		})
		return err
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for range writers {
		wg.Go(func() {
			for range next {
				t0 := time.Now()
				if err := session(); err != nil {
					failed.Store(err)
					continue
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	commits := s.group.commits.Load()
	b.ResetTimer()
	for b.Loop() {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	b.ReportMetric(float64(pct(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
	if !solo {
		b.ReportMetric(float64(s.group.commits.Load()-commits)/float64(b.N), "commits/session")
	}
}
