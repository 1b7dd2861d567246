package sql

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk/adaptertest"
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

// benchPostgresPlugin captures a baseline of rows rows from PostgreSQL
// through the real verifier-adapter-sql binary (go-plugin, AutoMTLS), as
// the daemon does, into a client that drains the stream. It reports rows/s
// and the plugin's peak resident memory (VmHWM): a fresh plugin per size,
// so the peak is that size's.
func benchPostgresPlugin(b *testing.B, rows int) {
	e := postgresEngine(b)
	table := fmt.Sprintf("bench_%d", rows)
	e.exec(b, fmt.Sprintf("DROP TABLE IF EXISTS %s", table),
		fmt.Sprintf(e.schema, table),
		fmt.Sprintf(`INSERT INTO %s (patient_id, type, note, amount, updated_at)
			SELECT 'p-' || (g %% 97), 'Triage', 'note ' || g, (g %% 1000) / 100.0, '2024-01-01'::timestamptz + g * interval '1 second'
			FROM generate_series(1, %d) g`, table, rows),
		fmt.Sprintf("ANALYZE %s", table))
	bin := adaptertest.Subprocess(b, pluginBinary)
	query := fmt.Sprintf("SELECT id, patient_id, type, note, amount, updated_at FROM %s", table)
	if err := bin.Configure(b.Context(), e.request(b, e.section(query, nil), e.reader)); err != nil {
		b.Fatal(err)
	}
	cpuBefore, _ := cpuTime(bin.Pid())
	b.ResetTimer()
	for b.Loop() {
		capt, err := bin.CaptureBefore(b.Context(), captureReq(10*time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		if !capt.Reachable {
			b.Fatalf("unreachable: %s", capt.Reason)
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
	b.StopTimer()
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	// CPU time the plugin spent per row: the figure that does not depend
	// on what else the machine runs.
	if cpuAfter, err := cpuTime(bin.Pid()); err == nil {
		b.ReportMetric(float64((cpuAfter-cpuBefore).Nanoseconds())/float64(rows*b.N), "plugin-cpu-ns/row")
	}
	if hwm, err := peakRSS(bin.Pid()); err == nil {
		b.ReportMetric(float64(hwm)/(1<<20), "plugin-peak-MiB")
	} else {
		b.Logf("plugin peak memory: %v", err)
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// cpuTime reads a process's user plus system CPU time.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (100 per second).
	_, rest, ok := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

func BenchmarkPostgresPlugin100000Rows(b *testing.B)  { benchPostgresPlugin(b, 100_000) }
func BenchmarkPostgresPlugin1000000Rows(b *testing.B) { benchPostgresPlugin(b, 1_000_000) }
