package sql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// The package's real servers: one PostgreSQL and one MariaDB, each started
// at most once per test binary, by the first test that needs it, and
// stopped by TestMain. A server that is not installed skips every test
// that needs it with what to install, or fails them when CI is set
// (testservers.Missing); one that is installed but cannot start fails them
// with its log.
var servers struct {
	dir string

	pgOnce sync.Once
	pg     *sqlservers.Postgres
	pgErr  error

	myOnce sync.Once
	my     *sqlservers.MariaDB
	myErr  error
}

func prepareServers() error {
	dir, err := os.MkdirTemp("", "sql-servers-")
	if err != nil {
		return err
	}
	// The servers run as their own users and must reach their folders.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	servers.dir = dir
	return nil
}

func stopServers() {
	if servers.pg != nil {
		if err := servers.pg.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping PostgreSQL:", err)
		}
	}
	if servers.my != nil {
		if err := servers.my.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping MariaDB:", err)
		}
	}
	os.RemoveAll(servers.dir)
}

func postgresServer(t testing.TB) *sqlservers.Postgres {
	t.Helper()
	servers.pgOnce.Do(func() { servers.pg, servers.pgErr = sqlservers.StartPostgres(servers.dir) })
	if errors.Is(servers.pgErr, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if servers.pgErr != nil {
		log := ""
		if servers.pg != nil {
			log = servers.pg.Log()
		}
		t.Fatalf("PostgreSQL (Debian package postgresql) could not start: %v\n%s", servers.pgErr, log)
	}
	return servers.pg
}

func mariadbServer(t testing.TB) *sqlservers.MariaDB {
	t.Helper()
	servers.myOnce.Do(func() { servers.my, servers.myErr = sqlservers.StartMariaDB(servers.dir) })
	if errors.Is(servers.myErr, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "MariaDB", "apt-get install mariadb-server")
	}
	if servers.myErr != nil {
		log := ""
		if servers.my != nil {
			log = servers.my.Log()
		}
		t.Fatalf("MariaDB (Debian package mariadb-server) could not start: %v\n%s", servers.myErr, log)
	}
	return servers.my
}

// engine is one server under test, seen the way the tests use it.
type engine struct {
	name          string // postgres, mariadb
	driver        string // what sql_driver says
	admin, reader sqlservers.Account
	// connectArgs is sql_connect_args for the server.
	connectArgs map[string]any
	// exec runs statements as the administrator.
	exec func(t testing.TB, stmts ...string)
	// insertReturningID inserts one row as the administrator and returns
	// its id.
	insertReturningID func(t testing.TB, stmt string, args ...any) string
	// schema is the CREATE TABLE of the encounters tables, %s the name.
	schema string
	// placeholder is the n-th (1-based) parameter in the admin's SQL.
	placeholder func(n int) string
	// heavy is a query the filter accepts that runs for minutes.
	heavy string
	stop  func() error
	start func() error
	log   func() string
}

func postgresEngine(t testing.TB) *engine {
	p := postgresServer(t)
	return &engine{
		name: "postgres", driver: "postgres", admin: p.Admin, reader: p.Reader,
		connectArgs: map[string]any{"host": "127.0.0.1", "port": p.Port, "database": p.Database, "sslmode": "disable"},
		exec: func(t testing.TB, stmts ...string) {
			t.Helper()
			if err := p.Exec(context.Background(), p.Database, stmts...); err != nil {
				t.Fatal(err)
			}
		},
		insertReturningID: func(t testing.TB, stmt string, args ...any) string {
			t.Helper()
			c, err := p.Connect(context.Background(), p.Database, p.Admin)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			var id int64
			if err := c.QueryRow(context.Background(), stmt+" RETURNING id", args...).Scan(&id); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			return fmt.Sprint(id)
		},
		schema:      `CREATE TABLE %s (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text, amount numeric(10,2), updated_at timestamptz)`,
		placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		heavy:       "SELECT count(*) AS n FROM generate_series(1, 1000000) a CROSS JOIN generate_series(1, 1000000) b",
		stop:        p.Stop, start: p.Start, log: p.Log,
	}
}

func mariadbEngine(t testing.TB) *engine {
	m := mariadbServer(t)
	return &engine{
		name: "mariadb", driver: "mariadb", admin: m.Admin, reader: m.Reader,
		connectArgs: map[string]any{"host": "127.0.0.1", "port": m.Port, "database": m.Database, "sslmode": "disable"},
		exec: func(t testing.TB, stmts ...string) {
			t.Helper()
			if err := m.Exec(context.Background(), stmts...); err != nil {
				t.Fatal(err)
			}
		},
		insertReturningID: func(t testing.TB, stmt string, args ...any) string {
			t.Helper()
			db := m.Open(m.Database, m.Admin)
			defer db.Close()
			res, err := db.Exec(stmt, args...)
			if err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			id, err := res.LastInsertId()
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(id)
		},
		schema:      "CREATE TABLE %s (id BIGINT AUTO_INCREMENT PRIMARY KEY, patient_id VARCHAR(64) NOT NULL, type VARCHAR(64), note TEXT, amount DECIMAL(10,2), updated_at DATETIME(6))",
		placeholder: func(int) string { return "?" },
		heavy:       "SELECT sum(a.seq * b.seq) AS n FROM seq_1_to_1000000 a, seq_1_to_1000000 b",
		stop:        m.Stop, start: m.Start, log: m.Log,
	}
}

// forEachEngine runs f as a subtest per server. parallel marks the
// subtests parallel (never for tests that stop a server).
func forEachEngine(t *testing.T, parallel bool, f func(t *testing.T, e *engine)) {
	for _, eng := range []struct {
		name string
		make func(testing.TB) *engine
	}{{"postgres", postgresEngine}, {"mariadb", mariadbEngine}} {
		t.Run(eng.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			f(t, eng.make(t))
		})
	}
}

var tableSeq atomic.Int64

// newTable creates an empty encounters table the reader may SELECT from and
// returns its name.
func (e *engine) newTable(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("enc_%d_%d", os.Getpid(), tableSeq.Add(1))
	e.exec(t, fmt.Sprintf(e.schema, name))
	return name
}

// insert writes one encounter as the automation would and returns its id.
func (e *engine) insert(t testing.TB, table, patient, typ string, note any, amount any) string {
	t.Helper()
	stmt := fmt.Sprintf("INSERT INTO %s (patient_id, type, note, amount, updated_at) VALUES (%s, %s, %s, %s, CURRENT_TIMESTAMP)",
		table, e.placeholder(1), e.placeholder(2), e.placeholder(3), e.placeholder(4))
	return e.insertReturningID(t, stmt, patient, typ, note, amount)
}

// section is a deployment section reading query as account.
func (e *engine) section(query string, qparams map[string]any) map[string]any {
	s := map[string]any{
		"kind":             "sql",
		"sql_driver":       e.driver,
		"sql_query":        query,
		"sql_connect_args": e.connectArgs,
		"sql_password_env": "DB_PASSWORD",
	}
	if qparams != nil {
		s["sql_query_params"] = qparams
	}
	return s
}

// request is the ConfigureRequest the daemon would send: the section and
// the resolved password (the run's parameters travel with each call).
func (e *engine) request(t testing.TB, section map[string]any, a sqlservers.Account) sdk.ConfigureRequest {
	t.Helper()
	section["sql_connect_args"] = withUser(section["sql_connect_args"].(map[string]any), a.User)
	return sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, section),
		Secrets: map[string]string{passwordSlot: a.Password}}
}

func withUser(args map[string]any, user string) map[string]any {
	out := make(map[string]any, len(args)+1)
	maps.Copy(out, args)
	out["user"] = user
	return out
}

// configuredAs starts the adapter in process and configures it.
func (e *engine) configuredAs(t testing.TB, a sqlservers.Account, query string, qparams map[string]any, params map[string]string) *adaptertest.Instance {
	t.Helper()
	return adaptertest.Configured(t, New, e.request(t, e.section(query, qparams), a), params)
}

// snapshot captures through c and returns the read as the judge takes it.
func snapshot(t testing.TB, c *adaptertest.Instance, after bool, timeout time.Duration) judge.Snapshot {
	t.Helper()
	call := c.CaptureBefore
	if after {
		call = c.CaptureAfter
	}
	capt, err := call(t.Context(), captureReq(timeout))
	if err != nil {
		t.Fatalf("capture returned an error; an outage must be data: %v", err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatalf("reading the capture: %v", err)
	}
	snap := judge.Snapshot{Reachable: capt.Reachable, Reason: capt.Reason}
	for _, r := range recs {
		snap.Records = append(snap.Records, judge.Record(r))
	}
	return snap
}

// contract parses and binds one effect contract written in YAML.
func contract(t testing.TB, effectYAML string, params map[string]string) *judge.Contract {
	t.Helper()
	effects, err := judge.ParseEffects([]byte(effectYAML), "effects")
	if err != nil {
		t.Fatalf("effects: %v", err)
	}
	if len(effects) != 1 {
		t.Fatalf("want one effect, got %d", len(effects))
	}
	c, err := judge.Bind(effects[0], params, "effects[0]")
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	return c
}

// verdictSummary is "DECISION/class/CODE+CODE".
func verdictSummary(v judge.Verdict) string {
	return fmt.Sprintf("%s/%s/%s", v.Decision, v.Class, strings.Join(v.Codes(), "+"))
}

func mustJSONText(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
