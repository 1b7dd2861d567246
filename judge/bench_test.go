package judge

import (
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"github.com/verifierd/verifierd/internal/compact"
)

const benchBaseline = 1_000_000

// benchRead allocates one read of a clinical table in read order, as a
// decoded adapter stream would be: a numeric surrogate id and three text
// fields per record. ids gives the read's order of identities.
func benchRead(ids []int) []Record {
	recs := make([]Record, len(ids))
	for i, id := range ids {
		recs[i] = Record{
			"id":         json.Number(strconv.Itoa(id)),
			"patient_id": "p" + strconv.Itoa(id%50000),
			"type":       "Consult",
			"note":       "routine",
		}
	}
	return recs
}

// benchReads returns a 1,000,000-record baseline and a separately read after
// snapshot holding the same records plus one new record for patient p-new.
// Ordered reads come back sorted by id (an ORDER BY id query); unordered
// reads come back in two different pseudo-random orders.
func benchReads(ordered bool) (Snapshot, Snapshot) {
	ids := make([]int, benchBaseline)
	for i := range ids {
		ids[i] = i + 1
	}
	afterIDs := append(append([]int(nil), ids...), benchBaseline+1)
	if !ordered {
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		rng.Shuffle(len(afterIDs), func(i, j int) { afterIDs[i], afterIDs[j] = afterIDs[j], afterIDs[i] })
	}
	before := benchRead(ids)
	after := benchRead(afterIDs)
	for _, r := range after {
		if r["id"] == json.Number(strconv.Itoa(benchBaseline+1)) {
			r["patient_id"], r["type"], r["note"] = "p-new", "Triage", "N"
		}
	}
	return Snapshot{Reachable: true, Records: before}, Snapshot{Reachable: true, Records: after}
}

func benchJudge(b *testing.B, e Effect, ordered bool) {
	before, after := benchReads(ordered)
	c, err := Bind(e, nil, "effects[0]")
	if err != nil {
		b.Fatal(err)
	}
	// Collect the garbage of building the reads, so that the collector
	// does not run it down inside the timed loop.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v := Judge(c, before, after, Options{})
		if v.Decision != Confirmed {
			b.Fatalf("verdict %s %v, want CONFIRMED", v.Decision, v.Codes())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
}

var rwNewOnlyCollateral = Effect{
	Kind:                 RecordWritten,
	Match:                Selector{"patient_id": {Literal: "p-new"}, "type": {Literal: "Triage"}},
	ExpectedCount:        1,
	CountNewOnly:         true,
	KeyField:             DefaultKeyField,
	IdentityField:        DefaultIdentityField,
	ForbidCollateralLoss: true,
}

var ensCollateral = Effect{
	Kind:                 ExactNewSet,
	Match:                Selector{},
	ExpectedCount:        1,
	NewRecords:           []Selector{{"patient_id": {Literal: "p-new"}, "type": {Literal: "Triage"}}},
	KeyField:             DefaultKeyField,
	IdentityField:        DefaultIdentityField,
	ForbidCollateralLoss: true,
}

// BenchmarkRecordWrittenNewOnlyCollateral1M: record_written with
// count_new_only and forbid_collateral_loss over a 1,000,000-record baseline;
// reads ordered by id (merge join).
func BenchmarkRecordWrittenNewOnlyCollateral1M(b *testing.B) {
	benchJudge(b, rwNewOnlyCollateral, true)
}

// BenchmarkRecordWrittenNewOnlyCollateral1MUnordered: the same with both
// reads in different pseudo-random orders (hash join).
func BenchmarkRecordWrittenNewOnlyCollateral1MUnordered(b *testing.B) {
	benchJudge(b, rwNewOnlyCollateral, false)
}

// BenchmarkExactNewSetCollateral1M: exact_new_set scoped to the whole read
// set with forbid_collateral_loss over a 1,000,000-record baseline; reads
// ordered by id (merge join).
func BenchmarkExactNewSetCollateral1M(b *testing.B) { benchJudge(b, ensCollateral, true) }

// BenchmarkExactNewSetCollateral1MUnordered: the same with both reads in
// different pseudo-random orders (hash join).
func BenchmarkExactNewSetCollateral1MUnordered(b *testing.B) { benchJudge(b, ensCollateral, false) }

// benchBatches returns the reads of benchReads in compact form, decoded by
// the fast decoder from their JSON, as a case or a wire batch arrives.
func benchBatches(b *testing.B, ordered bool) (BatchSnapshot, BatchSnapshot) {
	before, after := benchReads(ordered)
	decode := func(s Snapshot) BatchSnapshot {
		raw, err := json.Marshal(s.Records)
		if err != nil {
			b.Fatal(err)
		}
		batch, err := compact.DecodeRecords(string(raw), "records")
		if err != nil {
			b.Fatal(err)
		}
		return BatchSnapshot{Reachable: true, Batch: batch}
	}
	return decode(before), decode(after)
}

func benchJudgeBatch(b *testing.B, e Effect, ordered bool) {
	before, after := benchBatches(b, ordered)
	c, err := Bind(e, nil, "effects[0]")
	if err != nil {
		b.Fatal(err)
	}
	// Collect the garbage of building the reads, so that the collector
	// does not run it down inside the timed loop.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		v := JudgeBatch(c, before, after, Options{})
		if v.Decision != Confirmed {
			b.Fatalf("verdict %s %v, want CONFIRMED", v.Decision, v.Codes())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
}

// BenchmarkRecordWrittenNewOnlyCollateral1MBatch: the record_written
// benchmark on compact batches (JudgeBatch), reads ordered by id.
func BenchmarkRecordWrittenNewOnlyCollateral1MBatch(b *testing.B) {
	benchJudgeBatch(b, rwNewOnlyCollateral, true)
}

// BenchmarkExactNewSetCollateral1MBatch: the exact_new_set benchmark on
// compact batches (JudgeBatch), reads ordered by id.
func BenchmarkExactNewSetCollateral1MBatch(b *testing.B) { benchJudgeBatch(b, ensCollateral, true) }

// BenchmarkRecordWrittenNewOnlyCollateral1MBatchUnordered: compact batches
// in two pseudo-random orders (hash join).
func BenchmarkRecordWrittenNewOnlyCollateral1MBatchUnordered(b *testing.B) {
	benchJudgeBatch(b, rwNewOnlyCollateral, false)
}
