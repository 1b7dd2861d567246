package changes

import (
	"context"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/verifierd/verifierd/judge"
)

// Benchmarks of the write set on the test PostgreSQL (BENCHMARKS.md,
// "The write set"):
//
//	go test ./internal/changes -run '^$' -bench . -benchmem -benchtime 20x

// BenchmarkReadWriteSet10Among10000: a step wrote 10 rows to the declared
// table while 10,000 unrelated rows were written to another table in the
// same window; one Read of the window (slot peek, pgoutput decode, images).
func BenchmarkReadWriteSet10Among10000(b *testing.B) {
	f := setupB(b, "ws_bench10", "enc_bench10")
	exec(b, f.srv, "CREATE TABLE noise_bench10 (id bigserial PRIMARY KEY, v text)")
	begin := f.position(b)
	exec(b, f.srv,
		"INSERT INTO noise_bench10 (v) SELECT 'n' || g FROM generate_series(1, 5000) g",
		"INSERT INTO enc_bench10 (patient_id, status) SELECT 'p1', 'open' FROM generate_series(1, 10)",
		"INSERT INTO noise_bench10 (v) SELECT 'n' || g FROM generate_series(1, 5000) g")
	upTo := f.position(b)
	ctx := context.Background()
	for b.Loop() {
		ws, err := f.source.Read(ctx, begin, upTo)
		if err != nil || !ws.Complete || len(ws.Changes) != 10 {
			b.Fatalf("write set: %d changes, complete %v (%s), %v", len(ws.Changes), ws.Complete, ws.Reason, err)
		}
	}
}

// BenchmarkJudgeWriteSet100000: a 100,000-change window (inserts, one
// update per ten) read from the log and judged for a count_new_only
// record_written with forbid_other_writes.
func BenchmarkJudgeWriteSet100000(b *testing.B) {
	f := setupB(b, "ws_bench100k", "enc_bench100k")
	begin := f.position(b)
	exec(b, f.srv,
		"INSERT INTO enc_bench100k (patient_id, status) SELECT 'q' || g, 'open' FROM generate_series(1, 90910) g",
		"UPDATE enc_bench100k SET status = 'closed' WHERE id % 10 = 0")
	upTo := f.position(b)
	ws, err := f.source.Read(context.Background(), begin, upTo)
	if err != nil || !ws.Complete || len(ws.Changes) < 100000 {
		b.Fatalf("write set: %d changes, complete %v (%s), %v", len(ws.Changes), ws.Complete, ws.Reason, err)
	}
	c, err := judge.Bind(judge.Effect{Kind: judge.RecordWritten, Match: judge.Selector{"patient_id": judge.Value{Literal: "q7"}},
		CountNewOnly: true, ForbidOtherWrites: true, IdentityField: "id", ExpectedCount: 1}, nil, "effects[0]")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.source.Read(context.Background(), begin, upTo); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("held", func(b *testing.B) {
		// The heap the decoded window holds while it is judged.
		for b.Loop() {
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			held, err := f.source.Read(context.Background(), begin, upTo)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "held-MiB")
			runtime.KeepAlive(held)
		}
	})
	b.Run("judge", func(b *testing.B) {
		for b.Loop() {
			v := judge.Judge(c, judge.Snapshot{Reachable: true}, judge.Snapshot{Reachable: true}, judge.Options{WriteSet: &ws})
			if v.Decision != judge.Refuted {
				b.Fatalf("verdict %s, want REFUTED (other writes)", v.Decision)
			}
		}
	})
}

// BenchmarkJudgeWriteSet100000Peak: the same 100,000-change window, read
// from the log and judged in one go, as a Verify poll does, with nothing
// else held; it reports the peak memory of the process while it runs:
// peak-heap-MiB is the highest heap (live objects and garbage not yet
// swept) and peak-go-MiB the highest memory the Go runtime had mapped and
// not returned to the system, both sampled (runtime/metrics) every
// millisecond from a GC before the read to the verdict; maxrss-MiB is the
// process's resident high-water mark (getrusage), setup included. Run it
// alone for maxrss to mean this benchmark:
//
//	go test ./internal/changes -run '^$' -bench 'Peak$' -benchtime 5x
func BenchmarkJudgeWriteSet100000Peak(b *testing.B) {
	f := setupB(b, "ws_peak", "enc_peak")
	begin := f.position(b)
	exec(b, f.srv,
		"INSERT INTO enc_peak (patient_id, status) SELECT 'q' || g, 'open' FROM generate_series(1, 90910) g",
		"UPDATE enc_peak SET status = 'closed' WHERE id % 10 = 0")
	upTo := f.position(b)
	c, err := judge.Bind(judge.Effect{Kind: judge.RecordWritten, Match: judge.Selector{"patient_id": judge.Value{Literal: "q7"}},
		CountNewOnly: true, ForbidOtherWrites: true, IdentityField: "id", ExpectedCount: 1}, nil, "effects[0]")
	if err != nil {
		b.Fatal(err)
	}
	var peakHeap, peakGo uint64
	for b.Loop() {
		runtime.GC()
		stop := samplePeak()
		ws, err := f.source.Read(context.Background(), begin, upTo)
		if err != nil || !ws.Complete || len(ws.Changes) < 100000 {
			b.Fatalf("write set: %d changes, complete %v (%s), %v", len(ws.Changes), ws.Complete, ws.Reason, err)
		}
		v := judge.Judge(c, judge.Snapshot{Reachable: true}, judge.Snapshot{Reachable: true}, judge.Options{WriteSet: &ws})
		heap, goMem := stop()
		if v.Decision != judge.Refuted {
			b.Fatalf("verdict %s, want REFUTED (other writes)", v.Decision)
		}
		peakHeap, peakGo = max(peakHeap, heap), max(peakGo, goMem)
	}
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peakGo)/(1<<20), "peak-go-MiB")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/(1<<10), "maxrss-MiB") // Linux: KiB
	}
}

// samplePeak samples the heap and the Go runtime's mapped memory every
// millisecond until the returned stop, which returns the peaks (a last
// sample included).
func samplePeak() (stop func() (heap, goMem uint64)) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	var heap, goMem uint64
	read := func() {
		metrics.Read(samples)
		heap = max(heap, samples[0].Value.Uint64())
		goMem = max(goMem, samples[1].Value.Uint64()-samples[2].Value.Uint64())
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() (uint64, uint64) {
		close(done)
		<-finished
		read()
		return heap, goMem
	}
}

// setupB is setup for a benchmark.
func setupB(b *testing.B, deployment string, tables ...string) *fixture {
	b.Helper()
	return setupTB(b, deployment, tables...)
}
