package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// sqlServer is one real database server for the end-to-end tests, with
// what a deployment needs to reach it.
type sqlServer struct {
	name, driver string
	port         int
	database     string
	reader       sqlservers.Account
	exec         func(stmts ...string) error
	createTable  string // %s is the table name
	insert       string // %s table; patient, note, amount as literals
}

// TestSQLServers runs the daemon, verifyctl and the sql plugin against a
// real PostgreSQL and a real MariaDB started on loopback from the Debian
// packages: begin, insert, verify through the daemon, and the table-delta
// audit through verifyctl.
func TestSQLServers(t *testing.T) {
	parent, err := os.MkdirTemp("", "e2e-sql-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil { // the servers run as their own users
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })

	var pg *sqlservers.Postgres
	var my *sqlservers.MariaDB
	var pgErr, myErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pg, pgErr = sqlservers.StartPostgres(parent) }()
	go func() { defer wg.Done(); my, myErr = sqlservers.StartMariaDB(parent) }()
	wg.Wait()
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if my != nil {
		t.Cleanup(func() { my.Close() })
	}
	if errors.Is(pgErr, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if errors.Is(myErr, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "MariaDB", "apt-get install mariadb-server")
	}
	if pgErr != nil {
		log := ""
		if pg != nil {
			log = pg.Log()
		}
		t.Fatalf("PostgreSQL could not start: %v\n%s", pgErr, log)
	}
	if myErr != nil {
		log := ""
		if my != nil {
			log = my.Log()
		}
		t.Fatalf("MariaDB could not start: %v\n%s", myErr, log)
	}
	ctx := context.Background()
	servers := []sqlServer{
		{
			name: "postgres", driver: "postgres", port: pg.Port, database: pg.Database, reader: pg.Reader,
			exec:        func(stmts ...string) error { return pg.Exec(ctx, pg.Database, stmts...) },
			createTable: "CREATE TABLE %s (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text, amount numeric(10,2))",
			insert:      "INSERT INTO %s (patient_id, type, note, amount) VALUES ('%s', 'Triage', '%s', %s)",
		},
		{
			name: "mariadb", driver: "mariadb", port: my.Port, database: my.Database, reader: my.Reader,
			exec:        func(stmts ...string) error { return my.Exec(ctx, stmts...) },
			createTable: "CREATE TABLE %s (id BIGINT AUTO_INCREMENT PRIMARY KEY, patient_id VARCHAR(64) NOT NULL, type VARCHAR(64), note TEXT, amount DECIMAL(10,2))",
			insert:      "INSERT INTO %s (patient_id, type, note, amount) VALUES ('%s', 'Triage', '%s', %s)",
		},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			s.verifyThroughDaemon(t)
			s.auditTables(t)
		})
	}
}

// deployment writes a deployment reading table on s; the password is the
// variable VERIFIER_DB_PASSWORD.
func (s sqlServer) deployment(t *testing.T, dir, table string) string {
	return writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sql_driver: %s
  sql_query: >-
    SELECT id, patient_id, type, note, amount FROM %s
    WHERE patient_id = %%(patient_id)s ORDER BY id
  sql_query_params:
    patient_id: {param: patient_id}
  census: {sql_query: SELECT id FROM %s}
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: VERIFIER_DB_PASSWORD
`, s.driver, table, table, s.port, s.reader.User, s.database))
}

func (s sqlServer) mustExec(t *testing.T, stmts ...string) {
	t.Helper()
	if err := s.exec(stmts...); err != nil {
		t.Fatal(err)
	}
}

func (s sqlServer) verifyThroughDaemon(t *testing.T) {
	dir := t.TempDir()
	table := "encounters_e2e"
	s.mustExec(t, fmt.Sprintf(s.createTable, table))
	records := &clinicDB{
		deployment: s.deployment(t, dir, table),
		effects: writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  timeout_s: 2
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: amount
  value: "10.50"
  timeout_s: 2
`),
	}
	d := startDaemon(t, daemonOpts{
		config: "secrets:\n  allow: [VERIFIER_DB_*]\n",
		env:    []string{"VERIFIER_DB_PASSWORD=" + s.reader.Password},
	})

	out, code := d.ctl(t, "preflight", "--deployment-name", d.register(t, records.deployment), "--param", "patient_id=p-0")
	if code != 0 || !strings.Contains(out, `"reachable": true`) || !strings.Contains(out, `"warnings": []`) {
		t.Fatalf("preflight exit %d: %s\n%s", code, out, d.logs())
	}

	tests := []struct {
		name    string
		patient string
		act     func(patient string)
		want    string
	}{
		{"write confirmed", "p-1", func(p string) {
			s.mustExec(t, fmt.Sprintf(s.insert, table, p, "Follow-up", "10.50"))
		}, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{"double submit", "p-2", func(p string) {
			s.mustExec(t, fmt.Sprintf(s.insert, table, p, "Follow-up", "10.50"), fmt.Sprintf(s.insert, table, p, "Follow-up", "10.50"))
		}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{"10.5 stored in NUMERIC(10,2) reads back as 10.50", "p-3", func(p string) {
			s.mustExec(t, fmt.Sprintf(s.insert, table, p, "Follow-up", "10.5"))
		}, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := d.begin(t, records, tt.patient, "Follow-up")
			if len(b.Effects) != 2 || b.Effects[0].Tier != 1 || b.Effects[0].Candidate != "sql" {
				t.Fatalf("begin effects: %+v", b.Effects)
			}
			tt.act(tt.patient)
			if got := d.verify(t, b.SessionID).summary(); got != tt.want {
				t.Errorf("verify = %s\nwant     %s\n%s", got, tt.want, d.logs())
			}
		})
	}
	d.stop()
	if strings.Contains(d.logs(), s.reader.Password) {
		t.Error("the daemon log carries the database password")
	}
}

// verifyctl runs the CLI without a daemon and returns stdout and the exit
// code.
func verifyctl(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins.dir, "verifyctl"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("verifyctl %v: %v", args, err)
	}
	if stderr.Len() > 0 {
		t.Logf("verifyctl stderr: %s", stderr.String())
	}
	return stdout.String(), code
}

type auditOutput struct {
	Verdict string `json:"verdict"`
	Tables  []struct {
		Table    string `json:"table"`
		Before   int64  `json:"before"`
		After    *int64 `json:"after"`
		Delta    *int64 `json:"delta"`
		Expected int64  `json:"expected"`
	} `json:"tables"`
	Reasons []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"reasons"`
}

func (s sqlServer) auditTables(t *testing.T) {
	dir := t.TempDir()
	loans, payments := "loans_e2e", "payments_e2e"
	s.mustExec(t, fmt.Sprintf(s.createTable, loans), fmt.Sprintf(s.createTable, payments),
		fmt.Sprintf(s.insert, loans, "p-0", "seed", "1.00"))
	dep := s.deployment(t, dir, loans)
	env := []string{"VERIFIER_DB_PASSWORD=" + s.reader.Password}
	snap := filepath.Join(dir, "before.json")
	tables := loans + "," + payments

	out, code := verifyctl(t, env, "audit-tables", "--deployment", dep, "--tables", tables, "--snapshot", snap)
	if code != 0 || !strings.Contains(out, `"`+loans+`": 1`) {
		t.Fatalf("snapshot exit %d: %s", code, out)
	}
	audit := func(expect string) auditOutput {
		t.Helper()
		out, code := verifyctl(t, env, "audit-tables", "--deployment", dep, "--tables", tables, "--expect", expect, "--before", snap)
		if code != 0 {
			t.Fatalf("audit exit %d: %s", code, out)
		}
		return mustJSON[auditOutput](t, out)
	}

	// The run adds one loan.
	s.mustExec(t, fmt.Sprintf(s.insert, loans, "p-1", "run", "5.00"))
	if got := audit(loans + "=+1," + payments + "=0"); got.Verdict != "CONFIRMED" || len(got.Tables) != 2 || *got.Tables[0].Delta != 1 || got.Tables[0].Before != 1 {
		t.Errorf("one loan added, expected +1: %+v", got)
	}
	if got := audit(loans + "=+2"); got.Verdict != "REFUTED" || got.Reasons[0].Code != "TABLE_DELTA_MISMATCH" {
		t.Errorf("one loan added, expected +2: %+v", got)
	}
	// A stray write to a table that should not move.
	s.mustExec(t, fmt.Sprintf(s.insert, payments, "p-1", "stray", "5.00"))
	if got := audit(loans + "=+1"); got.Verdict != "REFUTED" || !strings.Contains(got.Reasons[0].Message, payments+" moved by +1") {
		t.Errorf("a stray payment: %+v", got)
	}

	for _, bad := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"injection in a table name", env, []string{"--tables", loans + `";DROP TABLE x;--`, "--before", snap}, "not allowed in a name"},
		{"expectation for an unaudited table", env, []string{"--tables", tables, "--expect", "other=+1", "--before", snap}, "not among the audited tables"},
		{"table not in the snapshot", env, []string{"--tables", loans + ",other", "--before", snap}, "no count for other"},
		{"password variable unset", nil, []string{"--tables", tables, "--before", snap}, "VERIFIER_DB_PASSWORD is not set"},
		{"both modes", env, []string{"--tables", tables, "--before", snap, "--snapshot", snap}, "one of them"},
	} {
		out, code := verifyctl(t, bad.env, append([]string{"audit-tables", "--deployment", dep}, bad.args...)...)
		if code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("%s: exit %d %s; want exit 2 saying %q", bad.name, code, out, bad.want)
		}
	}
	// Wrong password: no baseline, exit 3.
	out, code = verifyctl(t, []string{"VERIFIER_DB_PASSWORD=wrong-password"}, "audit-tables", "--deployment", dep, "--tables", tables, "--snapshot", filepath.Join(dir, "x.json"))
	if code != 3 || !strings.Contains(out, "do not run") || strings.Contains(out, s.reader.Password) {
		t.Errorf("snapshot with a wrong password: exit %d %s", code, out)
	}
	// The audit after the run cannot read: INDETERMINATE, exit 0.
	out, code = verifyctl(t, []string{"VERIFIER_DB_PASSWORD=wrong-password"}, "audit-tables", "--deployment", dep, "--tables", tables, "--before", snap)
	if got := mustJSON[auditOutput](t, out); code != 0 || got.Verdict != "INDETERMINATE" || got.Tables[0].After != nil {
		t.Errorf("audit with a wrong password: exit %d %s", code, out)
	}
}
