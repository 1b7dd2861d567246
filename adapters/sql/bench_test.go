package sql

import (
	"fmt"
	"testing"
	"time"
)

// benchCapture captures the rows of encounters through the in-process
// runner (the SDK's server, converters and batching) b.N times.
func benchCapture(b *testing.B, rows int) {
	db := newDB(b, patientsSchema, fmt.Sprintf(
		`INSERT INTO encounters (id, patient_id, type, note)
		 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		 SELECT i, 'p-' || (i %% 97), 'Triage', 'note ' || i FROM n`, rows))
	ip := configured(b, map[string]any{"sqlite_database": db, "sql_query": "SELECT id, patient_id, type, note FROM encounters"}, nil)
	b.ResetTimer()
	for b.Loop() {
		capt, err := ip.CaptureAfter(b.Context(), captureReq(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for batch, err := range capt.RawBatches() {
			if err != nil {
				b.Fatal(err)
			}
			n += len(batch)
		}
		if n != rows {
			b.Fatalf("%d rows; want %d", n, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkCapture10Rows(b *testing.B)      { benchCapture(b, 10) }
func BenchmarkCapture100000Rows(b *testing.B)  { benchCapture(b, 100_000) }
func BenchmarkCapture1000000Rows(b *testing.B) { benchCapture(b, 1_000_000) }
