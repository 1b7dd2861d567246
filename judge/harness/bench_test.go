package harness

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// benchCase builds the case scripts/gencase.py writes: n baseline records,
// the same n plus one new Triage note after, ordered by id, and two
// effects (record_written count_new_only, exact_new_set), both confirmed.
func benchCase(n int) string {
	var sb strings.Builder
	rec := func(i int, patient, typ, note string) {
		fmt.Fprintf(&sb, `{"id": %d, "patient_id": "%s", "type": "%s", "note": "%s", "created_at": "2026-01-01T%02d:%02d:%02dZ"}`,
			i, patient, typ, note, i/3600%24, i/60%60, i%60)
	}
	sb.WriteString(`{"effects": [{"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": "Triage"}, "count_new_only": true}, ` +
		`{"kind": "exact_new_set", "new_records": [{"patient_id": {"param": "pid"}, "type": "Triage"}], "expected_count": 1}], ` +
		`"params": {"pid": "p-new"}, "before": {"reachable": true, "records": [`)
	for i := 1; i <= n; i++ {
		if i > 1 {
			sb.WriteString(", ")
		}
		rec(i, fmt.Sprintf("p%d", i%50000), "Consult", "routine follow-up")
	}
	sb.WriteString(`]}, "after": {"reachable": true, "records": [`)
	for i := 1; i <= n+1; i++ {
		if i > 1 {
			sb.WriteString(", ")
		}
		if i == n+1 {
			rec(i, "p-new", "Triage", "chest pain")
		} else {
			rec(i, fmt.Sprintf("p%d", i%50000), "Consult", "routine follow-up")
		}
	}
	sb.WriteString(`]}}`)
	return sb.String()
}

func benchRun(b *testing.B, n int) {
	input := benchCase(n)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := JudgeString(input, now)
		if err != nil || out.Outcome != "VERIFIED" {
			b.Fatalf("outcome %v, error %v", out, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
}

// BenchmarkCase200k: parse (fast decoder) and judge the 200,000-record,
// two-effect case in process, as `verifyctl judge --case` does.
func BenchmarkCase200k(b *testing.B) { benchRun(b, 200_000) }

// BenchmarkCase200kMaps: the same through Parse (maps) and Judge, the path
// before the compact form.
func BenchmarkCase200kMaps(b *testing.B) {
	input := []byte(benchCase(200_000))
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := Parse(input)
		if err != nil {
			b.Fatal(err)
		}
		out, err := judgeCase(c, now)
		if err != nil || out.Outcome != "VERIFIED" {
			b.Fatalf("outcome %v, error %v", out, err)
		}
	}
}
