package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/httprecords"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
)

// The backends of the adversary matrix. Each constructor starts its
// system of record on loopback, writes the deployments the daemon now
// requires to prove newness (a census, or newness: whole_read on a read
// that is whole) and gives the reason for every row it cannot express.

// advCensusScope is the census_scope line an HTTP or plugin census
// carries: the daemon proves only a sql census whole, so the operator
// declares that such a census covers the collection.
func advCensusScope(indent string) string {
	return indent + "census_scope: declared\n"
}

// advDeployments writes depMain, depSettle (depMain with the settle
// window) and, when capped is set, depCapped.
func advDeployments(t *testing.T, dir, main, capped string) map[string]string {
	deps := map[string]string{
		depMain:   writeFile(t, dir, "adv.yaml", main),
		depSettle: writeFile(t, dir, "adv_settle.yaml", main+fmt.Sprintf("  settle_s: %d\n", advSettleS)),
	}
	if capped != "" {
		deps[depCapped] = writeFile(t, dir, "adv_capped.yaml", capped)
	}
	return deps
}

// advSQLStore is the adv_records table of one SQL server, written as the
// automation would (the administrator's connection; ids from the server).
type advSQLStore struct {
	db *sql.DB
	pg bool // $n placeholders, RETURNING id
}

// advSQLNA are the rows the sql adapter's backends cannot express.
func advSQLNA() map[string]string {
	return map[string]string{
		"truncation past the cap":    "the sql adapter reads a query's whole result, with no cap or page to cut it (a LIMIT in the query is lint's capped_read)",
		"identity spelt differently": "the subject is a plain text column: one identity has one spelling",
		"multi-valued field":         "a SQL column holds one scalar value",
		"slow page":                  "the sql adapter reads one query result, not pages",
	}
}

func (s advSQLStore) bind(q string) string {
	if !s.pg {
		return q
	}
	for n := 1; strings.Contains(q, "?"); n++ {
		q = strings.Replace(q, "?", "$"+strconv.Itoa(n), 1)
	}
	return q
}

func (s advSQLStore) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := s.db.Exec(s.bind(q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// counter answers a one-number query (-1 when it fails: the settle hook
// then waits for a later answer).
func (s advSQLStore) counter(q string) int {
	var n int
	if err := s.db.QueryRow(q).Scan(&n); err != nil {
		return -1
	}
	return n
}

func (s advSQLStore) insertRow(t *testing.T, subject, typ string, hidden bool) string {
	t.Helper()
	q := "INSERT INTO adv_records (subject, type, hidden) VALUES (?, ?, ?)"
	if s.pg {
		var id int64
		if err := s.db.QueryRow(s.bind(q+" RETURNING id"), subject, typ, hidden).Scan(&id); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return strconv.FormatInt(id, 10)
	}
	res, err := s.db.Exec(q, subject, typ, hidden)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(id, 10)
}

// advSQLBackend is a backend over an adv_records table: the read is the
// subject's live records (deleted_at IS NULL), its census every live id.
func advSQLBackend(t *testing.T, name string, s advSQLStore, source, table, param string, env []string) *advBackend {
	dir := t.TempDir()
	main := fmt.Sprintf("effects:\n  kind: sql\n%s  sql_query: SELECT id, subject, type FROM %s WHERE subject = %s AND deleted_at IS NULL ORDER BY id\n"+
		"  sql_query_params: {subject: {param: subject}}\n  census: {sql_query: SELECT id FROM %s WHERE deleted_at IS NULL, census_scope: declared}\n", source, table, param, table)
	b := &advBackend{
		name: name, dir: dir, subj: "subject", typ: "type", in: "Triage", out: "Discharge", newness: "census",
		subject:     func(n string) string { return n },
		deployments: advDeployments(t, dir, main, ""),
		envVars:     env,
		na:          advSQLNA(),
		insert:      func(t *testing.T, subject, typ string) string { return s.insertRow(t, subject, typ, false) },
		update: func(t *testing.T, id, subject, typ string) {
			s.exec(t, "UPDATE adv_records SET subject = ?, type = ? WHERE id = ?", subject, typ, id)
		},
		remove: func(t *testing.T, id string) { s.exec(t, "DELETE FROM adv_records WHERE id = ?", id) },
		trash: func(t *testing.T, id string) {
			s.exec(t, "UPDATE adv_records SET deleted_at = ? WHERE id = ?", time.Now().UTC().Format(time.RFC3339), id)
		},
	}
	return b
}

// advSQLite: the table in a real SQLite file, read by the sql adapter.
// SQLite has no roles: the invisible duplicate does not apply.
func advSQLite(t *testing.T) *advBackend {
	path := filepath.Join(t.TempDir(), "adv.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	s := advSQLStore{db: db}
	s.exec(t, `CREATE TABLE adv_records (id INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT NULL, type TEXT NOT NULL,
		deleted_at TEXT, hidden INTEGER NOT NULL DEFAULT 0)`)
	b := advSQLBackend(t, "sqlite", s, "  sqlite_database: "+path+"\n", "adv_records", ":subject", nil)
	b.na["duplicate invisible to the read credential"] = "SQLite has no roles or grants: every reader of the file sees every row"
	return b
}

// advPostgresTables creates adv_records on pg under row-level security
// (the reader account cannot select a hidden row), then the extra tables,
// and opens the store the adversary writes through, as the admin.
func advPostgresTables(t *testing.T, pg *sqlservers.Postgres, extra ...string) advSQLStore {
	t.Helper()
	stmts := append([]string{
		`CREATE TABLE adv_records (id bigserial PRIMARY KEY, subject text NOT NULL, type text NOT NULL, deleted_at text, hidden boolean NOT NULL DEFAULT false)`,
		`ALTER TABLE adv_records ENABLE ROW LEVEL SECURITY`,
		fmt.Sprintf(`CREATE POLICY adv_visible ON adv_records FOR SELECT TO %s USING (NOT hidden)`, pg.Reader.User),
	}, extra...)
	if err := pg.Exec(context.Background(), pg.Database, stmts...); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable", pg.Port, pg.Database, pg.Admin.User, pg.Admin.Password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return advSQLStore{db: db, pg: true}
}

// advPostgres: the table on a real PostgreSQL under row-level security;
// the reader account cannot select a hidden row (the deployment reads as
// the owner, whom the policy does not bind).
func advPostgres(t *testing.T) *advBackend {
	_, _, pg := storeServer(t)
	s := advPostgresTables(t, pg)
	// The deployment reads as the table's owner, whom the policy does not
	// bind: the sql adapter refuses to judge a read the login's row-level
	// security filters (adapters/sql TestHiddenRowsRefused), so the sound
	// deployment reads with a login that sees every row, and the hidden
	// duplicate must be caught.
	source := fmt.Sprintf("  sql_driver: postgres\n  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}\n  sql_password_env: ADV_DB_PASSWORD\n",
		pg.Port, pg.Admin.User, pg.Database)
	b := advSQLBackend(t, "postgres", s, source, "adv_records", "%(subject)s", []string{"ADV_DB_PASSWORD=" + pg.Admin.Password})
	b.hidden = func(t *testing.T, subject, typ string) { s.insertRow(t, subject, typ, true) }
	// The table's scans, as the statistics report them (a reading
	// backend reports within about a second): the writes here scan by id.
	b.reads = func() int {
		return s.counter("SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname = 'adv_records'")
	}
	return b
}

// advMariaDB: the table on a real MariaDB, with a view that leaves hidden
// rows out (MariaDB has no row-level security); the deployment reads the
// base table.
func advMariaDB(t *testing.T) *advBackend {
	parent, err := os.MkdirTemp("", "e2e-adv-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as its own user
		t.Fatal(err)
	}
	my, err := sqlservers.StartMariaDB(parent)
	if my != nil {
		t.Cleanup(func() { my.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "MariaDB", "apt-get install mariadb-server")
	}
	if err != nil {
		t.Fatalf("MariaDB could not start: %v", err)
	}
	if err := my.Exec(context.Background(),
		`CREATE TABLE adv_records (id BIGINT AUTO_INCREMENT PRIMARY KEY, subject VARCHAR(191) NOT NULL, type VARCHAR(64) NOT NULL,
			deleted_at VARCHAR(64), hidden BOOLEAN NOT NULL DEFAULT FALSE)`,
		`CREATE VIEW adv_visible AS SELECT id, subject, type, deleted_at FROM adv_records WHERE NOT hidden`,
	); err != nil {
		t.Fatal(err)
	}
	db := my.Open(my.Database, my.Admin)
	t.Cleanup(func() { db.Close() })
	s := advSQLStore{db: db}
	source := fmt.Sprintf("  sql_driver: mariadb\n  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s}\n  sql_password_env: ADV_DB_PASSWORD\n",
		my.Port, my.Reader.User, my.Database)
	// The deployment reads the base table: the sql adapter refuses to
	// judge a read through a view (adapters/sql TestHiddenRowsRefused),
	// so the sound deployment reads every row, and the row the view hides
	// must be caught.
	b := advSQLBackend(t, "mariadb", s, source, "adv_records", "%(subject)s", []string{"ADV_DB_PASSWORD=" + my.Reader.Password})
	b.hidden = func(t *testing.T, subject, typ string) { s.insertRow(t, subject, typ, true) }
	// Every SELECT the server ran (the writes here select nothing).
	b.reads = func() int {
		var name string
		var n int
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
			return -1
		}
		return n
	}
	return b
}

// advLoansNA are the rows the Loans API (REST and GraphQL) cannot express.
func advLoansNA() map[string]string {
	return map[string]string{
		"soft delete": "the Loans API has no trash: its DELETE removes the row (the delete row)",
		"duplicate invisible to the read credential": "the Loans API has one bearer token that sees every application",
		"identity spelt differently":                 "the applicant is a plain text field: one identity has one spelling",
		"multi-valued field":                         "a Loans field holds one scalar value",
	}
}

// advLoans is a backend over the Loans server (its own SQLite store),
// written through the API its kind reads (GraphQL mutations for graphql).
func advLoans(t *testing.T, kind string) (*advBackend, *httprecords.Loans) {
	l := httprecords.NewLoans(t, true)
	const amount = "10.00"
	b := &advBackend{
		name: kind, dir: t.TempDir(), subj: "applicant", typ: "product", in: "Triage", out: "Discharge", newness: "census",
		subject: func(n string) string { return n },
		envVars: []string{"ADV_TOKEN=" + l.Token},
		na:      advLoansNA(),
		reads:   l.Requests,
		slow: func(on bool) {
			if on {
				l.SetDelay(300 * time.Millisecond)
			} else {
				l.SetDelay(0)
			}
		},
	}
	id := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("application id %q: %v", s, err)
		}
		return n
	}
	if kind == "graphql" {
		b.insert = func(t *testing.T, subject, typ string) string {
			return strconv.FormatInt(l.SubmitGraphQL(t, subject, typ, amount), 10)
		}
		b.update = func(t *testing.T, i, subject, typ string) { l.ReassignGraphQL(t, id(i), subject, typ, amount) }
		b.remove = func(t *testing.T, i string) { l.DeleteGraphQL(t, id(i)) }
	} else {
		b.insert = func(t *testing.T, subject, typ string) string {
			return strconv.FormatInt(l.Submit(t, subject, typ, amount).ID, 10)
		}
		b.update = func(t *testing.T, i, subject, typ string) { l.Reassign(t, id(i), subject, typ, amount) }
		b.remove = func(t *testing.T, i string) { l.Delete(t, id(i)) }
	}
	// The capped read holds advCap records at most: three others, the
	// honest save, and the adversary's one more reach it.
	b.fillCap = func(t *testing.T) {
		l.Reset(t)
		l.Seed(t, "adv-cap-existing", advCap-2)
	}
	return b, l
}

// advCap is the max_records of the Loans backends' capped read.
const advCap = 5

// advREST: the REST API read narrowed to the applicant, paged, with a
// census of every application's id.
func advREST(t *testing.T) *advBackend {
	b, l := advLoans(t, "rest")
	head := fmt.Sprintf("effects:\n  kind: rest\n  base_url: %s\n  records_key: data\n  auth: {bearer_env: ADV_TOKEN}\n  ca_file: %s\n", l.URL, l.CAFile)
	const paged = "pagination: {offset_param: offset, limit_param: limit, page_size: 40}\n"
	main := head + "  records_path: /api/applications?applicant={applicant}\n  path_params: {applicant: {param: subject}}\n  " + paged +
		"  census:\n    records_path: /api/applications\n    records_key: data\n    " + paged + advCensusScope("    ")
	capped := head + fmt.Sprintf("  records_path: /api/applications\n  newness: whole_read\n  single_response: true\n  max_records: %d\n", advCap)
	b.deployments = advDeployments(t, b.dir, main, capped)
	return b
}

// advGraphQL: the GraphQL API read narrowed to the applicant, paged, with
// a census of every application's id.
func advGraphQL(t *testing.T) *advBackend {
	b, l := advLoans(t, "graphql")
	head := fmt.Sprintf("effects:\n  kind: graphql\n  base_url: %s\n  auth: {bearer_env: ADV_TOKEN}\n  ca_file: %s\n", l.GraphQLURL, l.CAFile)
	const paged = "pagination: {limit_variable: limit, offset_variable: offset, page_size: 40}\n"
	main := head + "  graphql_query: 'query Apps($applicant: String!, $limit: Int, $offset: Int) { applications(applicant: $applicant, limit: $limit, offset: $offset) { id applicant product } }'\n" +
		"  graphql_records_path: applications\n  graphql_variables: {applicant: {param: subject}}\n  " + paged +
		"  census:\n    graphql_query: 'query Ids($limit: Int, $offset: Int) { applications(limit: $limit, offset: $offset) { id } }'\n" +
		"    graphql_records_path: applications\n    " + paged + advCensusScope("    ")
	capped := head + "  graphql_query: 'query All { applications { id applicant product } }'\n  graphql_records_path: applications\n" +
		fmt.Sprintf("  newness: whole_read\n  single_response: true\n  max_records: %d\n", advCap)
	b.deployments = advDeployments(t, b.dir, main, capped)
	return b
}

// advFHIR: Observations on the FHIR server, read whole (every
// Observation, across all Bundle pages: newness whole_read), matched on
// subject.reference and status.
func advFHIR(t *testing.T) *advBackend {
	f := httprecords.NewFHIR(t, true)
	dir := t.TempDir()
	read := func(count string, maxPages int) string {
		s := fmt.Sprintf("effects:\n  kind: fhir\n  base_url: %s\n  resource_type: Observation\n  search_params: {_count: %q}\n"+
			"  field_paths: {id: id, subject: subject.reference, status: status}\n  access_token_env: ADV_FHIR_TOKEN\n  ca_file: %s\n  newness: whole_read\n",
			f.URL, count, f.CAFile)
		if maxPages > 0 {
			s += fmt.Sprintf("  max_pages: %d\n", maxPages)
		}
		return s
	}
	observe := func(t *testing.T, subject, status string) string {
		return f.Create(t, "Observation", httprecords.Observation(subject, status, time.Now().UTC().Format(time.RFC3339), "185"))
	}
	b := &advBackend{
		name: "fhir", dir: dir, subj: "subject", typ: "status", in: "final", out: "preliminary", newness: "whole_read_declared",
		subject:     func(n string) string { return "Patient/" + n },
		deployments: advDeployments(t, dir, read("50", 0), read("2", 2)),
		envVars:     []string{"ADV_FHIR_TOKEN=" + f.Token},
		reads:       f.Requests,
		insert:      observe,
		absolute: func(t *testing.T, subject, status string) {
			observe(t, strings.TrimSuffix(f.URL, "/")+"/"+subject, status)
		},
		slow: func(on bool) {
			if on {
				f.SetDelay(300 * time.Millisecond)
			} else {
				f.SetDelay(0)
			}
		},
		// Two per page, two pages: three others and the honest save fill
		// them; the adversary's one more is a third page.
		fillCap: func(t *testing.T) {
			f.Reset("Observation")
			for i := range 3 {
				observe(t, fmt.Sprintf("Patient/adv-cap-existing-%d", i), "final")
			}
		},
		na: map[string]string{
			"re-point":                        "the FHIR test server has no update (create, read and search only)",
			"edit into scope":                 "the FHIR test server has no update (create, read and search only)",
			"delete another subject's record": "the FHIR test server has no delete (create, read and search only)",
			"soft delete":                     "the FHIR test server has no delete or update",
			"duplicate invisible to the read credential": "the FHIR test server has one bearer token that sees every resource",
			"multi-valued field":                         "field_paths select one value per field; a selector two elements satisfy already fails the read (docs/adapters/fhir.md)",
			"undo":                                       "the FHIR test server has no delete: the honest save cannot be undone",
		},
	}
	return b
}

// advJSONLFile is the JSON-lines file the jsonl plugin reads: the test
// rewrites it whole (a new file renamed over the old) on every change.
type advJSONLFile struct {
	mu      sync.Mutex
	path    string
	nextID  int
	records []map[string]any
}

func (f *advJSONLFile) write(t *testing.T) {
	t.Helper()
	var sb strings.Builder
	for _, r := range f.records {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(line)
		sb.WriteByte('\n')
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
}

// change applies fn to the records and rewrites the file.
func (f *advJSONLFile) change(t *testing.T, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	f.write(t)
}

func (f *advJSONLFile) add(t *testing.T, rec map[string]any) string {
	var id string
	f.change(t, func() {
		f.nextID++
		rec["id"] = f.nextID
		id = strconv.Itoa(f.nextID)
		f.records = append(f.records, rec)
	})
	return id
}

func (f *advJSONLFile) edit(t *testing.T, id string, fn func(r map[string]any) bool) {
	f.change(t, func() {
		out := f.records[:0]
		for _, r := range f.records {
			if fmt.Sprint(r["id"]) != id || fn(r) {
				out = append(out, r)
			}
		}
		f.records = out
	})
}

// advJSONL: the customer plugin of sdk/examples reading one JSON-lines
// file whole (newness: whole_read: the plugin returns every line).
func advJSONL(t *testing.T) *advBackend {
	dir := t.TempDir()
	f := &advJSONLFile{path: filepath.Join(dir, "records.jsonl")}
	f.write(t)
	main := fmt.Sprintf("effects:\n  kind: jsonl\n  options: {path: %s}\n  newness: whole_read\n", f.path)
	return &advBackend{
		name: "jsonl", dir: dir, subj: "subject", typ: "type", in: "Triage", out: "Discharge", newness: "whole_read_declared",
		subject:     func(n string) string { return n },
		deployments: advDeployments(t, dir, main, ""),
		insert: func(t *testing.T, subject, typ string) string {
			return f.add(t, map[string]any{"subject": subject, "type": typ})
		},
		update: func(t *testing.T, id, subject, typ string) {
			f.edit(t, id, func(r map[string]any) bool { r["subject"], r["type"] = subject, typ; return true })
		},
		remove: func(t *testing.T, id string) { f.edit(t, id, func(map[string]any) bool { return false }) },
		multi: func(t *testing.T, subject, other, typ string) {
			id := f.add(t, map[string]any{"subject": []string{subject, other}, "type": typ})
			// The line makes every read of the file unusable (the shaping
			// rule): gone with its cell, so the next cells can begin.
			t.Cleanup(func() { f.edit(t, id, func(map[string]any) bool { return false }) })
		},
		na: map[string]string{
			"duplicate invisible to the read credential": "the plugin reads a file with no credential: every line is read",
			"truncation past the cap":                    "the jsonl plugin reads the whole file, with no cap or page",
			"identity spelt differently":                 "the subject is a plain text field: one identity has one spelling",
			"slow page":                                  "the jsonl plugin reads one file, not pages",
			"soft delete": "the jsonl plugin reads every line, trashed or not, and has no filter to leave a trashed one out: " +
				"a deployment over a soft-deleting store must read only live records (docs/contracts.md), as the SQL backends' reads and censuses do",
		},
	}
}
