package judge

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// mib1 is the size of the documents the memory benchmarks read.
const mib1 = 1 << 20

// memoryDocs are the 1 MiB effects documents that cost the most per byte
// among those DecodeDocument accepts: as many tiny values as its
// separator limit allows (16 bytes each), in JSON, YAML block and YAML
// flow (not JSON, so read twice).
func memoryDocs() map[string]string {
	fill := func(open, item, sep, end string) string {
		var b strings.Builder
		b.WriteString(open)
		for b.Len() < mib1-len(item)-len(end)-len(sep) {
			b.WriteString(item)
			b.WriteString(sep)
		}
		b.WriteString(item)
		b.WriteString(end)
		return b.String()
	}
	return map[string]string{
		"effects_json_scalars": fill("[", "123456789012345", ",", "]"),
		"effects_json_objects": fill("[", `{"a":"bcdefgh"}`, ",", "]"),
		"effects_yaml_block":   fill("", "- 1234567890123", "\n", "\n"),
		"effects_yaml_flow":    fill("[", "123456789012345", ",", ", x]"),
		// Denser still: refused by the separator limit before parsing
		// (before the limit these were the costliest documents).
		"dense_json_scalars": fill("[", "1", ",", "]"),
		"dense_yaml_flow":    fill("[", "1", ",", ", x]"),
	}
}

// memoryRecords is about 1 MiB of Judge records, one JSON object each.
func memoryRecords() [][]byte {
	var parts [][]byte
	for n, i := 0, 0; n < mib1; i++ {
		r := fmt.Appendf(nil, `{"id":"%d","patient_id":"p%d","a":[1,2,3],"n":12}`, i, i%9)
		parts = append(parts, r)
		n += len(r)
	}
	return parts
}

// heapCost runs f once and returns the bytes it allocated and the peak of
// the live heap above what was live before (sampled every 200µs, so a
// lower bound on the true peak).
func heapCost(f func()) (alloc, peak uint64) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > top.Load() {
				top.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	close(stop)
	<-done
	if after.HeapAlloc > top.Load() {
		top.Store(after.HeapAlloc)
	}
	return after.TotalAlloc - before.TotalAlloc, top.Load() - min(top.Load(), before.HeapAlloc)
}

// BenchmarkDocumentMemory reports what reading a 1 MiB effects document
// and 1 MiB of Judge records costs: bytes allocated per input byte
// (alloc/B) and the sampled peak of the live heap (peak-MB). BENCHMARKS.md
// ("Memory per request") records the numbers.
func BenchmarkDocumentMemory(b *testing.B) {
	docs := memoryDocs()
	for _, name := range []string{"effects_json_scalars", "effects_json_objects", "effects_yaml_block", "effects_yaml_flow", "dense_json_scalars", "dense_yaml_flow"} {
		doc := []byte(docs[name])
		b.Run(name, func(b *testing.B) {
			var alloc, peak uint64
			for range b.N {
				alloc, peak = heapCost(func() {
					_, err := DecodeDocument(doc)
					if (err != nil) != strings.HasPrefix(name, "dense_") {
						b.Fatalf("%s: %v", name, err)
					}
				})
			}
			b.ReportMetric(float64(alloc)/float64(len(doc)), "alloc/B")
			b.ReportMetric(float64(peak)/1e6, "peak-MB")
		})
	}
	parts := memoryRecords()
	b.Run("judge_records", func(b *testing.B) {
		size := 0
		for _, p := range parts {
			size += len(p)
		}
		var alloc, peak uint64
		for range b.N {
			alloc, peak = heapCost(func() {
				if _, err := DecodeRecordList(parts, "after.records_json"); err != nil {
					b.Fatal(err)
				}
			})
		}
		b.ReportMetric(float64(alloc)/float64(size), "alloc/B")
		b.ReportMetric(float64(peak)/1e6, "peak-MB")
	})
}
