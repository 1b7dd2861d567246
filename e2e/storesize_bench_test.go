package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// BenchmarkStoreSize1000: 1,000 sessions of a 10-row read (the
// BeginVerifyPlugin read) through a real daemon, on the embedded store and
// on PostgreSQL. It reports the store's size after the 1,000 Begins (the
// baselines stored) and after their 1,000 Verifies (results, receipts and
// ledger; the baselines of verified sessions are gone), per session, the
// Begin+Verify latency and the daemon's peak resident memory (VmHWM).
// bbolt: the store file's size; PostgreSQL: the sum of
// pg_total_relation_size over the store's tables, as the daemon left them
// (no VACUUM). Run it once: -benchtime 1x.
func BenchmarkStoreSize1000(b *testing.B) {
	b.Run("bbolt", func(b *testing.B) { benchStoreSize(b, false) })
	b.Run("postgres", func(b *testing.B) { benchStoreSize(b, true) })
}

func benchStoreSize(b *testing.B, pg bool) {
	const sessions = 1000
	dir := b.TempDir()
	db := filepath.Join(dir, "bench.db")
	seedRows(b, db, 10)
	var args, env []string
	var size func() int64
	dataDir := filepath.Join(dir, "data")
	if pg {
		dsn, e, server := storeServer(b)
		args, env = []string{"--store", dsn, "--store-password-env", storePasswordEnv}, e
		size = func() int64 {
			var n int64
			c, err := server.Connect(context.Background(), server.Database, server.Admin)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			if err := c.QueryRow(context.Background(), `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'verifierd\_%'`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		}
	} else {
		size = func() int64 {
			fi, err := os.Stat(filepath.Join(dataDir, "verifierd.db"))
			if err != nil {
				b.Fatal(err)
			}
			return fi.Size()
		}
	}
	d := startDaemon(b, daemonOpts{dataDir: dataDir, args: args, env: env, config: noChangeClaim})
	client := d.client(b)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :p ORDER BY id\n  sql_query_params: {p: {param: p}}\n  newness: newly_matching\n", db)))
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": {"param": "p"}}, "expected_count": 10, "timeout_s": 1}]`)
	ctx := context.Background()
	for b.Loop() {
		before := size()
		ids := make([]string, 0, sessions)
		lat := make([]time.Duration, 0, sessions)
		for range sessions {
			t0 := time.Now()
			begun, err := client.Begin(ctx, &verifierv1.BeginRequest{Deployment: &verifierv1.BeginRequest_DeploymentName{DeploymentName: dep}, Effects: string(effects), Params: verifierv1.StringParams(map[string]string{"p": "bench"})})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			ids = append(ids, begun.GetSessionId())
		}
		begun := size()
		for i, id := range ids {
			t0 := time.Now()
			res, err := client.Verify(ctx, &verifierv1.VerifyRequest{SessionId: id})
			if err != nil {
				b.Fatal(err)
			}
			if res.GetOutcome() != verifierv1.Outcome_VERIFIED {
				b.Fatalf("outcome %v", res.GetOutcome())
			}
			lat[i] += time.Since(t0)
		}
		verified := size()
		slices.Sort(lat)
		b.ReportMetric(float64(begun-before)/sessions, "begun-B/session")
		b.ReportMetric(float64(verified-before)/sessions, "verified-B/session")
		b.ReportMetric(float64(verified)/(1<<20), "store-MiB")
		b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
		b.ReportMetric(float64(vmHWM(d.cmd.Process.Pid))/1024, "daemon-peak-MiB")
	}
}
