package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/verifierd/verifierd/judge/harness"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// seedRows creates an encounters table with n rows for patient "bench".
func seedRows(b *testing.B, path string, n int) {
	b.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	stmts := []string{
		`PRAGMA journal_mode=WAL`,
		`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT, note TEXT)`,
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			b.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	st, err := tx.Prepare(`INSERT INTO encounters (id, patient_id, type, note) VALUES (?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := st.Exec(i, "bench", "Consult", "routine visit "+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchmarkBeginVerifyPlugin: Begin + Verify through the daemon and the sql
// plugin subprocess on a 10-row SQLite read (the ten rows are there before
// and after: an expected_count 10 contract), with the store fsyncing every
// session write (the default) and without.
func BenchmarkBeginVerifyPlugin(b *testing.B) {
	b.Run("fsync", func(b *testing.B) { benchBeginVerify(b, nil, false, 0) })
	b.Run("nosync", func(b *testing.B) { benchBeginVerify(b, []string{"--store-sync=false"}, false, 0) })
	// New run parameters every session (a new parameter set each time):
	// they travel with each call to the one configured instance, so no
	// process starts and nothing is configured again.
	b.Run("fresh-params", func(b *testing.B) { benchBeginVerify(b, nil, true, 0) })
	// The same at an automation's pace, a step every 100 ms or so (the
	// pause is not timed).
	b.Run("fresh-params-paced", func(b *testing.B) { benchBeginVerify(b, nil, true, 100*time.Millisecond) })
	// Eight clients at once (group commit: concurrent sessions share the
	// store's fsyncs).
	b.Run("fsync-8-clients", func(b *testing.B) { benchBeginVerifyParallel(b, nil, 8) })
	b.Run("nosync-8-clients", func(b *testing.B) { benchBeginVerifyParallel(b, []string{"--store-sync=false"}, 8) })
}

// benchBeginVerifyParallel runs Begin+Verify sessions from clients
// goroutines at once on the 10-row read, reporting per-session latency and
// the throughput of all clients together.
func benchBeginVerifyParallel(b *testing.B, args []string, clients int) {
	dir := b.TempDir()
	db := filepath.Join(dir, "bench.db")
	seedRows(b, db, 10)
	d := startDaemon(b, daemonOpts{dataDir: filepath.Join(dir, "data"), args: args, config: noChangeClaim})
	client := d.client(b)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :p ORDER BY id\n  sql_query_params: {p: {param: p}}\n  newness: newly_matching\n", db)))
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": {"param": "p"}}, "expected_count": 10, "timeout_s": 1}]`)
	ctx := context.Background()
	run := func() error {
		begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects), Params: verifierv1.StringParams(map[string]string{"p": "bench"})})
		if err != nil {
			return err
		}
		res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
		if err != nil {
			return err
		}
		if res.GetOutcome() != verifierv1.Outcome_VERIFIED {
			return fmt.Errorf("outcome %v", res.GetOutcome())
		}
		return nil
	}
	if err := run(); err != nil { // launch and configure the plugin outside the timing
		b.Fatal(err)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for range clients {
		wg.Go(func() {
			for range next {
				t0 := time.Now()
				if err := run(); err != nil {
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
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
}

func benchBeginVerify(b *testing.B, args []string, freshParams bool, pace time.Duration) {
	dir := b.TempDir()
	db := filepath.Join(dir, "bench.db")
	seedRows(b, db, 10)
	// The contract counts the ten rows there (no change claim).
	d := startDaemon(b, daemonOpts{dataDir: filepath.Join(dir, "data"), args: args, config: noChangeClaim})
	client := d.client(b)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :p ORDER BY id\n  sql_query_params: {p: {param: p}}\n  newness: newly_matching\n", db)))
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": {"param": "p"}}, "expected_count": 10, "timeout_s": 1}]`)
	ctx := context.Background()
	n := 0
	run := func() {
		params := map[string]string{"p": "bench"}
		if freshParams {
			n++
			params["run"] = strconv.Itoa(n) // unused by the query, but a new parameter set
		}
		begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects), Params: verifierv1.StringParams(params)})
		if err != nil {
			b.Fatal(err)
		}
		res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
		if err != nil {
			b.Fatal(err)
		}
		if res.GetOutcome() != verifierv1.Outcome_VERIFIED {
			b.Fatalf("outcome %v", res.GetOutcome())
		}
	}
	run() // launch and configure the plugin outside the timing
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		if pace > 0 {
			b.StopTimer()
			time.Sleep(pace)
			b.StartTimer()
		}
		t0 := time.Now()
		run()
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
	if pace == 0 {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sessions/s")
	}
}

// BenchmarkJudgeInProcess: the same 10-record judgement with no daemon, no
// plugin and no store: the floor the plugin path is compared with.
func BenchmarkJudgeInProcess(b *testing.B) {
	var recs []string
	for i := 1; i <= 10; i++ {
		recs = append(recs, fmt.Sprintf(`{"id": %d, "patient_id": "bench", "type": "Consult", "note": "routine visit %d"}`, i, i))
	}
	read := `{"reachable": true, "records": [` + strings.Join(recs, ",") + `]}`
	input := []byte(`{"effects": [{"kind": "record_written", "match": {"patient_id": {"param": "p"}}, "expected_count": 10}], "params": {"p": "bench"}, "before": ` + read + `, "after": ` + read + `}`)
	now := time.Now()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if _, code := harness.Run(input, now); code != 0 {
			b.Fatal("refused")
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}

// vmHWM is a process's peak resident memory in KiB.
func vmHWM(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return n
		}
	}
	return 0
}

// BenchmarkBaselineCapture1M: Begin on a 1,000,000-row SQLite table captures
// the whole baseline through the sql plugin into the daemon's store; then
// Verify reads it back and judges it against a second 1,000,000-row read.
// Reports rows/s of the capture and the peak memory of daemon and plugin.
func BenchmarkBaselineCapture1M(b *testing.B) {
	const rows = 1_000_000
	dir := b.TempDir()
	db := filepath.Join(dir, "big.db")
	seedRows(b, db, rows)
	opts := daemonOpts{dataDir: filepath.Join(dir, "data")}
	// BENCH_DAEMON_GOMEMLIMIT passes a soft memory limit to the daemon
	// (the Go runtime's GOMEMLIMIT), to see what of its peak is garbage.
	if lim := os.Getenv("BENCH_DAEMON_GOMEMLIMIT"); lim != "" {
		opts.env = append(opts.env, "GOMEMLIMIT="+lim)
	}
	d := startDaemon(b, opts)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type, note FROM encounters ORDER BY id\n", db)))
	benchWholeTable(b, d, dep, rows)
}

// benchWholeTable runs Begin and Verify of a whole-table read of rows
// records on deployment dep and reports the capture rate, the Verify time
// and the daemon's and the plugin's peak memory.
func benchWholeTable(b *testing.B, d *daemon, dep string, rows int) {
	client := d.client(b)
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": "nobody"}, "expected_count": 0, "count_new_only": true, "timeout_s": 60}]`)
	ctx := context.Background()
	var beginTotal, verifyTotal time.Duration
	var storeSize int64
	for b.Loop() {
		t0 := time.Now()
		begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects)})
		if err != nil {
			b.Fatal(err)
		}
		beginTotal += time.Since(t0)
		// The store file once the baseline is stored (bbolt grows it in
		// steps and never shrinks it: an upper bound of what Begin wrote).
		if st, err := os.Stat(filepath.Join(d.dataDir, "verifierd.db")); err == nil {
			storeSize = st.Size()
		}
		t1 := time.Now()
		res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
		if err != nil {
			b.Fatal(err)
		}
		verifyTotal += time.Since(t1)
		if res.GetOutcome() != verifierv1.Outcome_VERIFIED {
			b.Fatalf("outcome %v %v", res.GetOutcome(), res.GetEffects()[0].GetReasons())
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/beginTotal.Seconds(), "capture-rows/s")
	b.ReportMetric(verifyTotal.Seconds()/float64(b.N), "verify-s")
	b.ReportMetric(float64(storeSize)/(1<<20), "store-after-begin-MiB")
	b.ReportMetric(float64(vmHWM(d.cmd.Process.Pid))/1024, "daemon-peak-MiB")
	// The plugin that read (a spare, if any, has read nothing) has the
	// highest peak.
	peak := 0
	for _, pid := range childPIDs(b, d.cmd.Process.Pid, "verifier-adapter-sql") {
		peak = max(peak, vmHWM(pid))
	}
	b.ReportMetric(float64(peak)/1024, "plugin-peak-MiB")
}
