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
	"testing"
	"time"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// Fleet shape of BenchmarkFleetOfPatients: sessions over as many distinct
// patients, fleetConcurrency at a time.
const (
	fleetSessions    = 200
	fleetConcurrency = 20
	fleetRows        = 10 // rows per patient
)

// seedPatients creates an encounters table with fleetRows rows for each of
// n patients p-0 ... p-(n-1).
func seedPatients(b *testing.B, path string, n int) {
	b.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, s := range []string{`PRAGMA journal_mode=WAL`, `CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT, note TEXT)`} {
		if _, err := db.Exec(s); err != nil {
			b.Fatal(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	id := 0
	for p := range n {
		for r := range fleetRows {
			id++
			if _, err := tx.Exec(`INSERT INTO encounters VALUES (?, ?, 'Consult', ?)`, id, "p-"+strconv.Itoa(p), "visit "+strconv.Itoa(r)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// adapterProcs lists the daemon's adapter processes by kind (children of
// pid named verifier-adapter-<kind>).
func adapterProcs(pid int) map[string][]int {
	out := map[string][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the
		// last ')'.
		s := string(stat)
		rest := s[strings.LastIndexByte(s, ')')+2:]
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		exe := filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0])
		if kind, ok := strings.CutPrefix(exe, "verifier-adapter-"); ok {
			out[kind] = append(out[kind], child)
		}
	}
	return out
}

// vmRSS reads a process's resident set in bytes (VmRSS).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkFleetOfPatients: 200 sessions (Begin + Verify) through the
// daemon binary and the sql plugin subprocess on SQLite, 20 at a time,
// either each for its own patient (fresh: new run parameters every
// session) or all for one patient (same). It reports the adapter processes
// the daemon ran (the most seen at once while the sessions ran, sampled
// every 20 ms), their total VmRSS at the end, and the Begin+Verify p50 and
// p99. Run it once per shape: go test -run '^$' -bench FleetOfPatients
// -benchtime 1x ./e2e/
func BenchmarkFleetOfPatients(b *testing.B) {
	b.Run("fresh-params", func(b *testing.B) { benchFleet(b, true) })
	b.Run("same-params", func(b *testing.B) { benchFleet(b, false) })
}

func benchFleet(b *testing.B, fresh bool) {
	dir := b.TempDir()
	db := filepath.Join(dir, "fleet.db")
	seedPatients(b, db, fleetSessions)
	d := startDaemon(b, daemonOpts{dataDir: filepath.Join(dir, "data"), args: []string{"--store-sync=false"}, config: noChangeClaim})
	client := d.client(b)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :p ORDER BY id\n  sql_query_params: {p: {param: p}}\n  newness: newly_matching\n", db)))
	effects := fmt.Appendf(nil, `[{"kind": "record_written", "match": {"patient_id": {"param": "p"}}, "expected_count": %d, "timeout_s": 1}]`, fleetRows)
	ctx := context.Background()
	session := func(patient string) time.Duration {
		t0 := time.Now()
		begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects), Params: verifierv1.StringParams(map[string]string{"p": patient})})
		if err != nil {
			b.Fatal(err)
		}
		res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: begun.GetSessionId()})
		if err != nil {
			b.Fatal(err)
		}
		if res.GetOutcome() != verifierv1.Outcome_VERIFIED {
			b.Fatalf("patient %s: outcome %v", patient, res.GetOutcome())
		}
		return time.Since(t0)
	}
	pid := d.cmd.Process.Pid
	var lat []time.Duration
	maxProcs := 0
	for b.Loop() {
		b.StopTimer()
		session("p-0") // start and configure the plugin outside the timing
		b.StartTimer()
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			for {
				if n := len(adapterProcs(pid)["sql"]); n > maxProcs {
					maxProcs = n
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		var mu sync.Mutex
		next := make(chan int)
		var workers sync.WaitGroup
		for range fleetConcurrency {
			workers.Go(func() {
				for i := range next {
					patient := "p-0"
					if fresh {
						patient = "p-" + strconv.Itoa(i)
					}
					took := session(patient)
					mu.Lock()
					lat = append(lat, took)
					mu.Unlock()
				}
			})
		}
		for i := range fleetSessions {
			next <- i
		}
		close(next)
		workers.Wait()
		close(stop)
		sampler.Wait()
	}
	b.StopTimer()
	procs := adapterProcs(pid)
	var rss int64
	for _, pids := range procs {
		for _, p := range pids {
			rss += vmRSS(p)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(maxProcs), "sql-procs-max")
	b.ReportMetric(float64(len(procs["sql"])), "sql-procs-end")
	b.ReportMetric(float64(rss)/(1<<20), "plugin-rss-MiB")
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}
