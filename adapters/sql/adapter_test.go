package sql

import (
	"context"
	stdsql "database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// pluginBinary is verifier-adapter-sql, built once by TestMain.
var pluginBinary string

// TestMain builds the plugin binary and prepares the folder of the real
// database servers, which start at the first test that needs them and stop
// here, by their PIDs, when the tests are done.
func TestMain(m *testing.M) {
	var cleanup func()
	var err error
	pluginBinary, cleanup, err = adaptertest.BuildPlugin("github.com/verifierd/verifierd/cmd/plugins/sql", Kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := prepareServers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		cleanup()
		os.Exit(1)
	}
	code := m.Run()
	stopServers()
	cleanup()
	os.Exit(code)
}

// newDB creates a real SQLite database in a temporary folder with the same
// driver the adapter uses, runs stmts on it, and returns its path.
func newDB(t testing.TB, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records.db")
	execDB(t, path, stmts...)
	return path
}

// execDB runs stmts on the database at path through an ordinary read-write
// connection: the test's way of writing to the system of record.
func execDB(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := stdsql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func configJSON(t testing.TB, section map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(section)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inProcess starts the adapter behind the SDK's in-process runner: the same
// server, converters and batching as the plugin binary.
func inProcess(t testing.TB) *adaptertest.Instance {
	t.Helper()
	return adaptertest.InProcess(t, New)
}

func configured(t testing.TB, section map[string]any, params map[string]string) *adaptertest.Instance {
	t.Helper()
	return adaptertest.Configured(t, New, sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, section)}, params)
}

func captureReq(timeout time.Duration) sdk.CaptureRequest {
	return sdk.CaptureRequest{CaptureID: "test", Timeout: timeout, IdentityField: "id", EffectKind: "record_written"}
}

// readAll captures after and returns the records as compact JSON lines.
func readAll(t testing.TB, c *adaptertest.Instance) (*adaptertest.Stream, []string) {
	t.Helper()
	capt, err := c.CaptureAfter(t.Context(), captureReq(10*time.Second))
	if err != nil {
		t.Fatalf("CaptureAfter: %v", err)
	}
	var lines []string
	for batch, err := range capt.RawBatches() {
		if err != nil {
			t.Fatalf("reading records: %v", err)
		}
		for _, rec := range batch {
			lines = append(lines, string(rec))
		}
	}
	return capt, lines
}

const patientsSchema = `CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT, note TEXT)`

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	good := newDB(t, patientsSchema)
	dir := t.TempDir()
	renamedJSON := filepath.Join(dir, "export.db")
	if err := os.WriteFile(renamedJSON, []byte(`[{"id": 1, "patient_id": "p-1"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(emptyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	query := "SELECT id, patient_id FROM encounters WHERE patient_id = %(patient)s"
	params := map[string]any{"patient": map[string]any{"param": "patient_id"}}

	tests := []struct {
		name     string
		section  map[string]any
		params   map[string]string
		wantPath string
		wantMsg  string
	}{
		{"missing file", map[string]any{"sqlite_database": filepath.Join(dir, "nope.db"), "sql_query": "SELECT 1"}, nil,
			"sqlite_database", "does not exist"},
		{"JSON renamed .db", map[string]any{"sqlite_database": renamedJSON, "sql_query": "SELECT 1"}, nil,
			"sqlite_database", "is not an SQLite 3 database"},
		{"empty file", map[string]any{"sqlite_database": emptyFile, "sql_query": "SELECT 1"}, nil,
			"sqlite_database", "is not an SQLite 3 database"},
		{"a folder", map[string]any{"sqlite_database": dir, "sql_query": "SELECT 1"}, nil,
			"sqlite_database", "is not a regular file"},
		{"no database", map[string]any{"sql_query": "SELECT 1"}, nil,
			"sqlite_database", "missing"},
		{"filter refusal", map[string]any{"sqlite_database": good, "sql_query": "DELETE FROM encounters"}, nil,
			"sql_query", "refused: contains DELETE (a read-only SELECT or WITH is required)"},
		{"stacked statement", map[string]any{"sqlite_database": good, "sql_query": "SELECT 1; DROP TABLE encounters"}, nil,
			"sql_query", "refused: contains DROP"},
		{"sqlite brackets hide a literal", map[string]any{"sqlite_database": good, "sql_query": "SELECT [a'], 1; DELETE FROM t; SELECT [']"}, nil,
			"sql_query", "refused: contains DELETE"},
		{"empty query", map[string]any{"sqlite_database": good, "sql_query": "  "}, nil,
			"sql_query", "missing"},
		{"unknown key", map[string]any{"sqlite_database": good, "sql_query": "SELECT 1", "sql_querry": "SELECT 2"}, nil,
			"sql_querry", "unknown key"},
		{"missing param", map[string]any{"sqlite_database": good, "sql_query": query, "sql_query_params": params}, map[string]string{"other": "x"},
			"sql_query_params.patient", `the run has no parameter "patient_id"`},
		{"placeholder without entry", map[string]any{"sqlite_database": good, "sql_query": query}, nil,
			"sql_query", `placeholder "patient" has no entry in sql_query_params`},
		{"entry without placeholder", map[string]any{"sqlite_database": good, "sql_query": "SELECT 1", "sql_query_params": map[string]any{"x": "1"}}, nil,
			"sql_query_params.x", "the query never uses it"},
		{"positional placeholder", map[string]any{"sqlite_database": good, "sql_query": "SELECT id FROM encounters WHERE id = ?"}, nil,
			"sql_query", "positional placeholder ?"},
		{"number as param value", map[string]any{"sqlite_database": good, "sql_query": "SELECT :x", "sql_query_params": map[string]any{"x": 5}}, nil,
			"sql_query_params.x", `write a string, {literal: "text"} or {param: name}`},
		{"postgres without a user", map[string]any{"sql_driver": "postgres", "sql_query": "SELECT 1", "sql_connect_args": map[string]any{"host": "127.0.0.1", "database": "d"}}, nil,
			"sql_connect_args.user", "missing"},
		{"pymysql without a host", map[string]any{"sql_driver": "pymysql", "sql_query": "SELECT 1"}, nil,
			"sql_connect_args.host", "needs host"},
		{"postgres with sqlite_database", map[string]any{"sql_driver": "postgres", "sqlite_database": good, "sql_query": "SELECT 1"}, nil,
			"sqlite_database", "remove sqlite_database"},
		{"unknown driver", map[string]any{"sql_driver": "oracle", "sql_query": "SELECT 1"}, nil,
			"sql_driver", `unknown driver "oracle"`},
		{"wrong kind", map[string]any{"kind": "rest", "sqlite_database": good, "sql_query": "SELECT 1"}, nil,
			"kind", `not "rest"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := inProcess(t)
			err := ip.Setup(t.Context(), sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, tt.section)}, tt.params)
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Configure = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("Configure refused %q: %q\nwant path %q and a message containing %q", ce.Path, ce.Message, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestConfigureAccepts(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema)
	tests := []struct {
		name    string
		section map[string]any
	}{
		{"minimal", map[string]any{"sqlite_database": db, "sql_query": "SELECT id FROM encounters"}},
		{"kind and driver", map[string]any{"kind": "sql", "sql_driver": "sqlite", "sqlite_database": db, "sql_query": "SELECT id FROM encounters;"}},
		{"server fields are tolerated", map[string]any{"sqlite_database": db, "sql_query": "SELECT 1", "sql_connect_args": map[string]any{"host": "x"}, "sql_password_env": "DB_PASSWORD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			configured(t, tt.section, nil)
		})
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info, err := inProcess(t).GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := sdk.Info{Kind: "sql", Tier: sdk.TierIndependentSystem, NeedsBaseline: false, AbsenceNotProof: false, Description: info.Description, MaxConcurrentCaptures: 32}
	if diff := cmp.Diff(want, info.Info); diff != "" {
		t.Errorf("Info (-want +got):\n%s", diff)
	}
}

func TestCaptureValues(t *testing.T) {
	t.Parallel()
	blob := []byte{0, 1, 2, 0xfe, 0xff}
	db := newDB(t,
		`CREATE TABLE v (id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB, flag BOOLEAN, n TEXT, at DATETIME, loose)`,
		fmt.Sprintf(`INSERT INTO v VALUES (1, 42, 10.5, 'Zoë', x'%x', 1, NULL, '2024-05-01 10:20:30', 7)`, blob),
		`INSERT INTO v VALUES (2, -9007199254740993, 0.1, '', x'', 0, NULL, '2024-05-01T10:20:30+02:00', 'seven')`,
		`INSERT INTO v VALUES (3, 9223372036854775807, 1e300, 'it''s -- "quoted"', NULL, NULL, NULL, 'not a date', 2.5)`,
		`INSERT INTO v VALUES (4, 0, 100.0, '1', NULL, NULL, NULL, NULL, NULL)`,
	)
	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT * FROM v ORDER BY id"}, nil)
	capt, got := readAll(t, ip)
	if !capt.Reachable {
		t.Fatalf("unreachable: %s", capt.Reason)
	}
	want := []string{
		`{"at":"2024-05-01T10:20:30Z","b":"` + base64.StdEncoding.EncodeToString(blob) + `","flag":1,"i":42,"id":1,"loose":7,"n":null,"r":10.5,"s":"Zoë"}`,
		`{"at":"2024-05-01T08:20:30Z","b":"","flag":0,"i":-9007199254740993,"id":2,"loose":"seven","n":null,"r":0.1,"s":""}`,
		`{"at":"not a date","b":null,"flag":null,"i":9223372036854775807,"id":3,"loose":2.5,"n":null,"r":1e+300,"s":"it's -- \"quoted\""}`,
		`{"at":null,"b":null,"flag":null,"i":0,"id":4,"loose":null,"n":null,"r":100,"s":"1"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestParamBinding(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema,
		`INSERT INTO encounters VALUES (1, 'p-1', 'Triage', 'first')`,
		`INSERT INTO encounters VALUES (2, 'p-2', 'Triage', 'second')`,
		`INSERT INTO encounters VALUES (3, 'O''Brien''; DROP TABLE encounters; --', 'Triage', 'tricky')`,
		`INSERT INTO encounters VALUES (4, ':patient', 'Literal', 'colon')`,
	)
	tests := []struct {
		name    string
		query   string
		qparams map[string]any
		params  map[string]string
		wantIDs []string
	}{
		{"pyformat from a run parameter", "SELECT id FROM encounters WHERE patient_id = %(patient)s ORDER BY id",
			map[string]any{"patient": map[string]any{"param": "patient_id"}}, map[string]string{"patient_id": "p-2"}, []string{"2"}},
		{"colon name", "SELECT id FROM encounters WHERE patient_id = :patient ORDER BY id",
			map[string]any{"patient": map[string]any{"param": "patient_id"}}, map[string]string{"patient_id": "p-1"}, []string{"1"}},
		{"bare string literal", "SELECT id FROM encounters WHERE type = %(t)s ORDER BY id",
			map[string]any{"t": "Literal"}, nil, []string{"4"}},
		{"literal expression", "SELECT id FROM encounters WHERE type = :t AND note = :n",
			map[string]any{"t": map[string]any{"literal": "Triage"}, "n": "first"}, nil, []string{"1"}},
		{"same name twice", "SELECT id FROM encounters WHERE patient_id = :p OR note = :p",
			map[string]any{"p": "first"}, nil, []string{"1"}},
		{"value is data, never SQL", "SELECT id FROM encounters WHERE patient_id = %(patient)s",
			map[string]any{"patient": map[string]any{"param": "patient_id"}}, map[string]string{"patient_id": "O'Brien'; DROP TABLE encounters; --"}, []string{"3"}},
		{"placeholder text inside a literal stays text", "SELECT id FROM encounters WHERE patient_id = ':patient' AND type = :t",
			map[string]any{"t": "Literal"}, nil, []string{"4"}},
		{"integer column compared with a string parameter", "SELECT id FROM encounters WHERE id = %(id)s",
			map[string]any{"id": map[string]any{"param": "id"}}, map[string]string{"id": "2"}, []string{"2"}},
		{"template composes the value", "SELECT id FROM encounters WHERE patient_id = :patient",
			map[string]any{"patient": map[string]any{"template": "p-{n}"}}, map[string]string{"n": "2"}, []string{"2"}},
		{"template parameter is data, never SQL", "SELECT id FROM encounters WHERE patient_id = :patient",
			map[string]any{"patient": map[string]any{"template": "O'Brien{rest}"}}, map[string]string{"rest": "'; DROP TABLE encounters; --"}, []string{"3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": tt.query, "sql_query_params": tt.qparams}, tt.params)
			capt, err := ip.CaptureBefore(t.Context(), captureReq(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			recs, err := capt.Records()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, fmt.Sprint(r["id"]))
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	// The table the tricky value names is still there.
	execDB(t, db, "SELECT count(*) FROM encounters")
}

// TestReadOnlyConnectionStopsWrites bypasses the filter and hands writes
// straight to the helper every capture runs through: the read-only
// connection and transaction must refuse each one, and the file must not
// change.
func TestReadOnlyConnectionStopsWrites(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema, `INSERT INTO encounters VALUES (1, 'p-1', 'Triage', 'kept')`)
	if fi, err := os.Stat(db); err != nil || fi.Mode().Perm()&0o200 == 0 {
		t.Fatalf("the test database must be writable by its owner, or this test proves nothing: %v %v", fi.Mode(), err)
	}
	writes := []string{
		"UPDATE encounters SET note = 'changed'",
		"DELETE FROM encounters",
		"INSERT INTO encounters VALUES (2, 'p-2', 'x', 'y')",
		"UPDATE encounters SET note = 'changed' RETURNING id",
		"CREATE TABLE extra (x)",
		"DROP TABLE encounters",
		"PRAGMA user_version = 7",
		"VACUUM",
	}
	r := &sqliteReader{pool: &pool{path: db}}
	defer r.close()
	for _, w := range writes {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		st, err := openRead(ctx, cancel, r, w, nil)
		if err == nil {
			// A statement that returns rows may only fail once stepped.
			for _, rerr := range st.records() {
				err = rerr
			}
		}
		cancel()
		if err == nil {
			t.Errorf("%q went through the read-only path without an error", w)
		} else {
			t.Logf("%s: %v", w, err)
		}
	}

	// Below the transaction, the connection itself is read-only: even with
	// query_only switched back off, mode=ro refuses the write.
	ro := openReadOnly(db)
	defer ro.Close()
	conn, err := ro.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "PRAGMA query_only = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "UPDATE encounters SET note = 'changed'"); err == nil {
		t.Error("an UPDATE went through a mode=ro connection with query_only off")
	} else {
		t.Logf("mode=ro with query_only off: %v", err)
	}

	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT id, note FROM encounters"}, nil)
	_, got := readAll(t, ip)
	if diff := cmp.Diff([]string{`{"id":1,"note":"kept"}`}, got); diff != "" {
		t.Errorf("the database changed (-want +got):\n%s", diff)
	}
	var version int
	rw, err := stdsql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 0 {
		t.Errorf("user_version = %d, %v; want 0", version, err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		breakIt    func(t *testing.T, path string)
		wantReason string
	}{
		{"file deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "does not exist"},
		{"file replaced by JSON", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"id": 1}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not an SQLite 3 database"},
		{"table dropped", func(t *testing.T, path string) {
			execDB(t, path, "DROP TABLE encounters")
		}, "no such table: encounters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t, patientsSchema, `INSERT INTO encounters VALUES (1, 'p-1', 'Triage', '')`)
			ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT id FROM encounters"}, nil)
			before, err := ip.CaptureBefore(t.Context(), captureReq(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if recs, err := before.Records(); err != nil || !before.Reachable || len(recs) != 1 {
				t.Fatalf("before: reachable=%v records=%d err=%v", before.Reachable, len(recs), err)
			}
			tt.breakIt(t, db)
			after, err := ip.CaptureAfter(t.Context(), captureReq(5*time.Second))
			if err != nil {
				t.Fatalf("CaptureAfter returned an error; an outage must be data: %v", err)
			}
			recs, err := after.Records()
			if err != nil {
				t.Fatal(err)
			}
			if after.Reachable || len(recs) != 0 {
				t.Fatalf("after: reachable=%v with %d records; want unreachable and none", after.Reachable, len(recs))
			}
			if !strings.Contains(after.Reason, tt.wantReason) {
				t.Errorf("reason %q does not say %q", after.Reason, tt.wantReason)
			}
		})
	}
}

func TestUnreachableWhenLocked(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema, `INSERT INTO encounters VALUES (1, 'p-1', 'Triage', '')`)
	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT id FROM encounters"}, nil)

	// A writer holding an exclusive lock keeps every reader out.
	writer, err := stdsql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	conn, err := writer.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.ExecContext(context.Background(), "ROLLBACK") }()

	capt, err := ip.CaptureAfter(t.Context(), captureReq(300*time.Millisecond))
	if err != nil {
		t.Fatalf("CaptureAfter returned an error; a lock must be data: %v", err)
	}
	if capt.Reachable {
		recs, _ := capt.Records()
		t.Fatalf("read %d records through an exclusive lock", len(recs))
	}
	if !strings.Contains(capt.Reason, "locked") && !strings.Contains(capt.Reason, "deadline") {
		t.Errorf("reason %q names neither the lock nor the deadline", capt.Reason)
	}
}

func TestUnreachableAtDeadline(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema)
	slow := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) AS n FROM c"
	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": slow}, nil)
	start := time.Now()
	capt, err := ip.CaptureAfter(t.Context(), captureReq(200*time.Millisecond))
	if err != nil {
		t.Fatalf("CaptureAfter returned an error; a timeout must be data: %v", err)
	}
	if capt.Reachable {
		t.Fatal("a read past its deadline was reported reachable")
	}
	if !strings.Contains(capt.Reason, "deadline") {
		t.Errorf("reason %q does not mention the deadline", capt.Reason)
	}
	t.Logf("the capture gave up after %v", time.Since(start))
}

func TestStreamsRowsInBatches(t *testing.T) {
	t.Parallel()
	const rows = 100_000
	db := newDB(t, patientsSchema, fmt.Sprintf(
		`INSERT INTO encounters (id, patient_id, type, note)
		 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		 SELECT i, 'p-' || (i %% 7), 'Triage', 'row ' || i FROM n`, rows))
	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT id, patient_id, type, note FROM encounters ORDER BY id"}, nil)
	capt, err := ip.CaptureAfter(t.Context(), captureReq(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	batches, total := 0, 0
	for batch, err := range capt.Batches() {
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) > host.MaxBatchRecords {
			t.Fatalf("a batch of %d records; the SDK bounds them at %d", len(batch), host.MaxBatchRecords)
		}
		for _, r := range batch {
			total++
			if got := r["id"]; got != json.Number(fmt.Sprint(total)) {
				t.Fatalf("record %d has id %v", total, got)
			}
		}
		batches++
	}
	if total != rows {
		t.Errorf("streamed %d records; want %d", total, rows)
	}
	if batches < rows/host.MaxBatchRecords {
		t.Errorf("%d rows arrived in %d batches; want them streamed in at least %d", rows, batches, rows/host.MaxBatchRecords)
	}
}

func TestTestConnection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		mode          os.FileMode
		query         string
		wantReachable bool
		wantWarning   bool
		wantMessage   string
	}{
		{"writable file warns", 0o644, "SELECT id FROM encounters", true, true, "SELECT 1 answered"},
		// The daemon's effective user decides, not the mode bits: root
		// writes a 0444 file, so as root it warns; any other user may not.
		{"0444 file warns only for root", 0o444, "SELECT id FROM encounters", true, os.Geteuid() == 0, "SELECT 1 answered"},
		{"query does not compile", 0o444, "SELECT id FROM no_such_table", false, false, "no such table: no_such_table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t, patientsSchema)
			if err := os.Chmod(db, tt.mode); err != nil {
				t.Fatal(err)
			}
			ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": tt.query}, nil)
			res, err := ip.TestConnection(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Reachable != tt.wantReachable || !strings.Contains(res.Message, tt.wantMessage) {
				t.Errorf("TestConnection = %+v; want reachable=%v and a message containing %q", res, tt.wantReachable, tt.wantMessage)
			}
			if res.Reachable && res.Latency <= 0 {
				t.Errorf("latency %v; want the probe's round trip", res.Latency)
			}
			warned := len(res.Warnings) == 1 && strings.Contains(res.Warnings[0], "read-only copy")
			if warned != tt.wantWarning {
				t.Errorf("warnings %q; want a read-only-copy warning: %v", res.Warnings, tt.wantWarning)
			}
		})
	}
	t.Run("file gone", func(t *testing.T) {
		t.Parallel()
		db := newDB(t, patientsSchema)
		ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT id FROM encounters"}, nil)
		os.Remove(db)
		res, err := ip.TestConnection(t.Context())
		if err != nil || res.Reachable || !strings.Contains(res.Message, "does not exist") {
			t.Errorf("TestConnection = %+v, %v; want unreachable, the file does not exist", res, err)
		}
	})
}

// TestPluginBinary drives the real verifier-adapter-sql binary through
// go-plugin, as the daemon does: handshake, AutoMTLS, empty environment.
func TestPluginBinary(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema,
		`INSERT INTO encounters VALUES (1, 'p-1', 'Triage', NULL)`,
		`INSERT INTO encounters VALUES (2, 'p-2', 'Triage', 'x')`,
		`INSERT INTO encounters VALUES (3, 'p-1', 'Vitals', 'y')`,
	)
	bin := adaptertest.Subprocess(t, pluginBinary)
	ctx := t.Context()

	info, err := bin.GetInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "sql" || info.Tier != sdk.TierIndependentSystem || info.NeedsBaseline || info.AbsenceNotProof {
		t.Errorf("GetInfo = %+v", info)
	}

	refused := bin.Configure(ctx, sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, map[string]any{
		"kind": "sql", "sqlite_database": db, "sql_query": "SELECT * FROM encounters; DELETE FROM encounters",
	})})
	var ce *refusal.Error
	if !errors.As(refused, &ce) || ce.Path != "sql_query" || ce.Message != "refused: contains DELETE (a read-only SELECT or WITH is required)" {
		t.Fatalf("Configure with a stacked DELETE = %v; want the filter's refusal", refused)
	}

	if err := bin.Setup(ctx, sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, map[string]any{
		"kind": "sql", "sqlite_database": db,
		"sql_query":        "SELECT id, patient_id, type, note FROM encounters WHERE patient_id = %(patient)s ORDER BY id",
		"sql_query_params": map[string]any{"patient": map[string]any{"param": "patient_id"}},
	})}, map[string]string{"patient_id": "p-1"}); err != nil {
		t.Fatal(err)
	}
	capt, got := readAll(t, bin)
	if !capt.Reachable {
		t.Fatalf("unreachable: %s", capt.Reason)
	}
	want := []string{
		`{"id":1,"note":null,"patient_id":"p-1","type":"Triage"}`,
		`{"id":3,"note":"y","patient_id":"p-1","type":"Vitals"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records through the binary (-want +got):\n%s", diff)
	}

	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	capt, got = readAll(t, bin)
	if capt.Reachable || len(got) != 0 || !strings.Contains(capt.Reason, "does not exist") {
		t.Errorf("after the file was deleted: reachable=%v records=%d reason=%q", capt.Reachable, len(got), capt.Reason)
	}
}

// TestQualification runs the real plugin binary through the SDK's
// qualification kit against a real SQLite file.
func TestQualification(t *testing.T) {
	db := filepath.Join(t.TempDir(), "clinic.db")
	execDB(t, db, `CREATE TABLE encounters (id INTEGER PRIMARY KEY AUTOINCREMENT, patient_id TEXT NOT NULL, type TEXT, updated_at TEXT)`)
	config := func(path string) sdk.ConfigureRequest {
		return sdk.ConfigureRequest{Kind: Kind, Config: configJSON(t, map[string]any{
			"kind":             "sql",
			"sqlite_database":  path,
			"sql_query":        "SELECT id, patient_id, type, updated_at FROM encounters WHERE patient_id = %(patient)s",
			"sql_query_params": map[string]any{"patient": map[string]any{"param": "patient_id"}},
		})}
	}
	insert := func(t *testing.T, patient, updatedAt string) string {
		t.Helper()
		rw, err := stdsql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		res, err := rw.Exec("INSERT INTO encounters (patient_id, type, updated_at) VALUES (?, 'Triage', ?)", patient, updatedAt)
		if err != nil {
			t.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(id)
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	adaptertest.Run(t, adaptertest.Harness{
		Binary: pluginBinary,
		Params: map[string]string{"patient_id": "p-1"},
		Config: func(t *testing.T) sdk.ConfigureRequest { return config(db) },
		BadCredentials: func(t *testing.T) sdk.ConfigureRequest {
			if os.Geteuid() == 0 {
				t.Skip("SQLite has no credentials; its access control is file permissions, which root bypasses")
			}
			locked := filepath.Join(t.TempDir(), "locked.db")
			execDB(t, locked, `CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT, type TEXT, updated_at TEXT)`)
			if err := os.Chmod(locked, 0); err != nil {
				t.Fatal(err)
			}
			return config(locked)
		},
		Selector:      map[string]string{"patient_id": "p-1"},
		IdentityField: "id",
		Reset:         func(t *testing.T) { execDB(t, db, "DELETE FROM encounters") },
		WriteCorrect:  func(t *testing.T) string { return insert(t, "p-1", now()) },
		WriteWrongEntity: func(t *testing.T) string {
			return insert(t, "p-2", now())
		},
		WriteDuplicate: func(t *testing.T) string { return insert(t, "p-1", now()) },
		WriteStale: func(t *testing.T) (string, string) {
			insert(t, "p-1", "2001-02-03T04:05:06Z")
			return "updated_at", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				insert(t, "p-1", now())
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, reachable bool) {
			from, to := db, db+".away"
			if reachable {
				from, to = to, from
			}
			if _, err := os.Stat(from); err != nil {
				return // already in that state
			}
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) {
			execDB(t, db, fmt.Sprintf(
				`INSERT INTO encounters (patient_id, type, updated_at)
				 WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < %d)
				 SELECT 'p-1', 'Triage', '2024-01-01T00:00:00Z' FROM k`, n))
		},
	})
}

// TestDeadlineMidStreamAborts lets the capture's deadline pass while rows
// are still streaming (the consumer is slow): the read must end in an
// error, never as a shorter read set that looks complete. database/sql
// closes the rows when the deadline passes, and closed rows end like a
// finished result set; only the adapter's check of the context tells them
// apart.
func TestDeadlineMidStreamAborts(t *testing.T) {
	t.Parallel()
	const rows = 50_000
	db := newDB(t, patientsSchema, fmt.Sprintf(
		`INSERT INTO encounters (id, patient_id, type, note)
		 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
		 SELECT i, 'p-1', 'Triage', printf('%%0500d', i) FROM n`, rows))
	ip := configured(t, map[string]any{"sqlite_database": db, "sql_query": "SELECT * FROM encounters"}, nil)
	capt, err := ip.CaptureAfter(t.Context(), captureReq(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !capt.Reachable {
		t.Fatalf("the read should have started in time: %s", capt.Reason)
	}
	got := 0
	var final error
	for batch, err := range capt.RawBatches() {
		if err != nil {
			final = err
			break
		}
		got += len(batch)
		time.Sleep(20 * time.Millisecond)
	}
	if final == nil {
		t.Fatalf("the read ended cleanly with %d of %d records after its deadline", got, rows)
	}
	t.Logf("after %d of %d records the read ended with: %v", got, rows, final)
}

// writableByProcess answers as this process's effective user: a 0644 file
// its owner created is writable, a 0444 one only for root (root may open
// any file for writing on a writable mount), a missing one never. Nothing
// is written: the file's bytes and modification time stay as they were.
func TestWritableByProcess(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema)
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	fi0, _ := os.Stat(db)
	if !writableByProcess(db) {
		t.Errorf("a %04o file this process created reads as not writable", fi0.Mode().Perm())
	}
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	if got, want := writableByProcess(db), os.Geteuid() == 0; got != want {
		t.Errorf("0444 file as uid %d: writable %v, want %v", os.Geteuid(), got, want)
	}
	if writableByProcess(db + ".missing") {
		t.Error("a missing file reads as writable")
	}
	after, _ := os.ReadFile(db)
	fi1, _ := os.Stat(db)
	if string(after) != string(before) || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Error("the check changed the file")
	}
}

// TestPreparedQueryKeptAndRevalidated: a capture's query is prepared once
// per pool and kept, and a kept statement reads what a new one would: rows
// written and columns added between two captures are in the second, with
// the parameter bound afresh each time.
func TestPreparedQueryKeptAndRevalidated(t *testing.T) {
	t.Parallel()
	db := newDB(t, patientsSchema, `INSERT INTO encounters VALUES (1, 'p-1', 'Triage', 'kept')`, `INSERT INTO encounters VALUES (2, 'p-2', 'Triage', 'other')`)
	r := &sqliteReader{pool: &pool{path: db}}
	defer r.close()
	const query = "SELECT * FROM encounters WHERE patient_id = ? ORDER BY id"
	read := func(patient string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		st, err := openRead(ctx, cancel, r, query, []any{patient})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rec, err := range st.records() {
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	if diff := cmp.Diff([]string{`{"id":1,"note":"kept","patient_id":"p-1","type":"Triage"}`}, read("p-1")); diff != "" {
		t.Errorf("first read (-want +got):\n%s", diff)
	}
	execDB(t, db, "ALTER TABLE encounters ADD COLUMN extra TEXT DEFAULT 'd'", `INSERT INTO encounters VALUES (3, 'p-1', 'Triage', 'new', 'e')`)
	want := []string{
		`{"extra":"d","id":1,"note":"kept","patient_id":"p-1","type":"Triage"}`,
		`{"extra":"e","id":3,"note":"new","patient_id":"p-1","type":"Triage"}`,
	}
	if diff := cmp.Diff(want, read("p-1")); diff != "" {
		t.Errorf("read after the schema changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"extra":"d","id":2,"note":"other","patient_id":"p-2","type":"Triage"}`}, read("p-2")); diff != "" {
		t.Errorf("read with another parameter (-want +got):\n%s", diff)
	}
	r.pool.mu.Lock()
	kept := len(r.pool.stmts)
	r.pool.mu.Unlock()
	if kept != 1 {
		t.Errorf("the pool keeps %d prepared statements after three reads of one query, want 1", kept)
	}
}
