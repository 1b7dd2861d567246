package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// BenchmarkBaselineCapture1MPostgres is BenchmarkBaselineCapture1M on a
// real PostgreSQL started on loopback: Begin captures a 1,000,000-row table
// through the sql plugin (pgx) into the daemon's store, and Verify reads it
// back and judges it against a second 1,000,000-row read.
func BenchmarkBaselineCapture1MPostgres(b *testing.B) {
	const rows = 1_000_000
	parent, err := os.MkdirTemp("", "e2e-bench-pg-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		b.Fatal(err)
	}
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		b.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(b, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := pg.Exec(context.Background(), pg.Database,
		"CREATE TABLE encounters (id bigint PRIMARY KEY, patient_id text, type text, note text)",
		fmt.Sprintf(`INSERT INTO encounters SELECT g, 'bench', 'Consult', 'routine visit ' || g FROM generate_series(1, %d) g`, rows),
		"ANALYZE encounters"); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	opts := daemonOpts{
		dataDir: filepath.Join(dir, "data"),
		config:  "secrets:\n  allow: [VERIFIER_DB_*]\n",
		env:     []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password},
	}
	if lim := os.Getenv("BENCH_DAEMON_GOMEMLIMIT"); lim != "" {
		opts.env = append(opts.env, "GOMEMLIMIT="+lim)
	}
	d := startDaemon(b, opts)
	dep := d.register(b, writeFile(b, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id, type, note FROM encounters ORDER BY id
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: VERIFIER_DB_PASSWORD
`, pg.Port, pg.Reader.User, pg.Database)))
	benchWholeTable(b, d, dep, rows)
}
