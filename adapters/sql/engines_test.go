package sql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// Tests against the real PostgreSQL and MariaDB servers. Captures go
// through the SDK's server, converters and batching; verdicts come from the
// daemon's own judge.

const recordWrittenEffect = `- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  forbid_collateral_loss: true
`

func fieldEqualsEffect(field, value string) string {
	return fmt.Sprintf(`- kind: field_equals
  match: {patient_id: {param: patient_id}}
  field: %s
  value: %q
`, field, value)
}

func TestServerVerdicts(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		tests := []struct {
			name string
			// wholeTable reads every row (to see collateral loss); otherwise
			// the query reads the run's patient only, through a parameter.
			wholeTable bool
			effect     string
			seed       func(t *testing.T, table string)
			act        func(t *testing.T, table string)
			want       string
		}{
			{"write confirmed", false, recordWrittenEffect, nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", "visit", "12.00") },
				"CONFIRMED/confirmed/COUNT_EXACT"},
			{"duplicate", false, recordWrittenEffect, nil,
				func(t *testing.T, table string) {
					e.insert(t, table, "p-1", "Triage", "visit", "12.00")
					e.insert(t, table, "p-1", "Triage", "visit", "12.00")
				},
				"REFUTED/conflicting/COUNT_OVER"},
			{"wrong patient", false, recordWrittenEffect, nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-2", "Triage", "visit", "12.00") },
				"REFUTED/refuted/COUNT_UNDER"},
			{"lost update is collateral loss", true, recordWrittenEffect,
				func(t *testing.T, table string) { e.insert(t, table, "p-2", "Triage", "a colleague's record", "3.00") },
				func(t *testing.T, table string) {
					// The save replaced the colleague's row with the new one.
					e.exec(t, fmt.Sprintf("DELETE FROM %s WHERE patient_id = 'p-2'", table))
					e.insert(t, table, "p-1", "Triage", "visit", "12.00")
				},
				"REFUTED/conflicting/COLLATERAL_LOSS"},
			{"NUMERIC 10.50 reads back as 10.50", false, fieldEqualsEffect("amount", "10.50"), nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", "visit", "10.50") },
				"CONFIRMED/confirmed/FIELD_EQUAL"},
			{"NUMERIC 10.50 is not 10.5", false, fieldEqualsEffect("amount", "10.5"), nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", "visit", "10.50") },
				"REFUTED/conflicting/FIELD_MISMATCH"},
			{"NULL never matches empty text", false, fieldEqualsEffect("note", ""), nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", nil, "1.00") },
				"REFUTED/conflicting/FIELD_MISMATCH"},
			{"NULL never matches the word null", false, fieldEqualsEffect("note", "null"), nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", nil, "1.00") },
				"REFUTED/conflicting/FIELD_MISMATCH"},
			{"NULL never matches a selector", false, `- kind: record_written
  match: {patient_id: {param: patient_id}, note: "null"}
`, nil,
				func(t *testing.T, table string) { e.insert(t, table, "p-1", "Triage", nil, "1.00") },
				"REFUTED/refuted/COUNT_UNDER"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				table := e.newTable(t)
				query := fmt.Sprintf("SELECT id, patient_id, type, note, amount FROM %s WHERE patient_id = %%(patient)s ORDER BY id", table)
				var qparams map[string]any
				if tt.wholeTable {
					query = fmt.Sprintf("SELECT id, patient_id, type, note, amount FROM %s ORDER BY id", table)
				} else {
					qparams = map[string]any{"patient": map[string]any{"param": "patient_id"}}
				}
				params := map[string]string{"patient_id": "p-1"}
				ip := e.configuredAs(t, e.reader, query, qparams, params)
				if tt.seed != nil {
					tt.seed(t, table)
				}
				before := snapshot(t, ip, false, 10*time.Second)
				tt.act(t, table)
				after := snapshot(t, ip, true, 10*time.Second)
				v := judge.Judge(contract(t, tt.effect, params), before, after, judge.Options{})
				if got := verdictSummary(v); got != tt.want {
					t.Errorf("verdict %s, want %s; reasons %v\nafter: %s", got, tt.want, v.Reasons, mustJSONText(t, after.Records))
				}
				if strings.HasPrefix(tt.name, "NUMERIC") {
					if got := after.Records[0]["amount"]; got != "10.50" {
						t.Errorf("amount reads back as %#v; want the exact decimal text \"10.50\"", got)
					}
				}
			})
		}
	})
}

func TestServerValues(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		var stmts []string
		var want []string
		table := fmt.Sprintf("vals_%d", tableSeq.Add(1))
		switch e.name {
		case "postgres":
			stmts = []string{
				fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, i2 smallint, i4 integer, i8 bigint, n numeric(12,4), nn numeric,
					f4 real, f8 double precision, b boolean, t text, by bytea, u uuid, j json, jb jsonb,
					ts timestamp, tz timestamptz, d date, iv interval, arr int[], o oid)`, table),
				fmt.Sprintf(`INSERT INTO %s VALUES (1, -32768, 2147483647, 9223372036854775807, 10.5, 123456789012345678901234567890.000000001,
					1.1, 0.1, true, 'Zoë', '\x0001feff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1.10,  "b": [1, 2]}', '{"a": 1.10, "b": [1, 2]}',
					'2024-05-01 10:20:30.123456', '2024-05-01 12:20:30+02', '2024-05-01', '1 day 02:00:00', '{1,2,3}', 42)`, table),
				fmt.Sprintf(`INSERT INTO %s (id) VALUES (2)`, table),
				fmt.Sprintf(`INSERT INTO %s (id, n, f4, f8, b, by, ts, d) VALUES (3, 'NaN', 'Infinity', 'NaN', false, '', 'infinity', '-infinity')`, table),
			}
			want = []string{
				`{"arr":"{1,2,3}","b":true,"by":"AAH+/w==","d":"2024-05-01","f4":1.1,"f8":0.1,"i2":-32768,"i4":2147483647,"i8":9223372036854775807,"id":1,"iv":"1 day 02:00:00","j":{"a":1.10,"b":[1,2]},"jb":{"a":1.10,"b":[1,2]},"n":"10.5000","nn":"123456789012345678901234567890.000000001","o":42,"t":"Zoë","ts":"2024-05-01T10:20:30.123456Z","tz":"2024-05-01T10:20:30Z","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}`,
				`{"arr":null,"b":null,"by":null,"d":null,"f4":null,"f8":null,"i2":null,"i4":null,"i8":null,"id":2,"iv":null,"j":null,"jb":null,"n":null,"nn":null,"o":null,"t":null,"ts":null,"tz":null,"u":null}`,
				`{"arr":null,"b":false,"by":"","d":"-infinity","f4":"Infinity","f8":null,"i2":null,"i4":null,"i8":null,"id":3,"iv":null,"j":null,"jb":null,"n":"NaN","nn":null,"o":null,"t":null,"ts":"infinity","tz":null,"u":null}`,
			}
		case "mariadb":
			stmts = []string{
				fmt.Sprintf(`CREATE TABLE %s (id INT PRIMARY KEY, flag TINYINT(1), i INT, big BIGINT UNSIGNED, n DECIMAL(12,4), f FLOAT, d8 DOUBLE,
					bits BIT(10), t VARCHAR(20), bl BLOB, vb VARBINARY(8), dt DATETIME(6), ts TIMESTAMP NULL, dd DATE, tm TIME, j JSON, e ENUM('a','b'), y YEAR)`, table),
				fmt.Sprintf(`INSERT INTO %s VALUES (1, 1, -7, 18446744073709551615, 10.5, 1.1, 0.1, b'1000000001', 'Zoë', x'0001feff', x'00ff',
					'2024-05-01 10:20:30.123456', '2024-05-01 10:20:30', '2024-05-01', '12:34:56', '{"a": 1.10}', 'b', 2024)`, table),
				fmt.Sprintf(`INSERT INTO %s (id) VALUES (2)`, table),
				fmt.Sprintf(`INSERT INTO %s (id, flag, big, f, bl, dt) VALUES (3, 0, 0, -0.5, '', '1999-12-31 23:59:59')`, table),
			}
			want = []string{
				`{"big":18446744073709551615,"bits":513,"bl":"AAH+/w==","d8":0.1,"dd":"2024-05-01","dt":"2024-05-01T10:20:30.123456Z","e":"b","f":1.1,"flag":1,"i":-7,"id":1,"j":"{\"a\": 1.10}","n":"10.5000","t":"Zoë","tm":"12:34:56","ts":"2024-05-01T10:20:30Z","vb":"AP8=","y":2024}`,
				`{"big":null,"bits":null,"bl":null,"d8":null,"dd":null,"dt":null,"e":null,"f":null,"flag":null,"i":null,"id":2,"j":null,"n":null,"t":null,"tm":null,"ts":null,"vb":null,"y":null}`,
				`{"big":0,"bits":null,"bl":"","d8":null,"dd":null,"dt":"1999-12-31T23:59:59Z","e":null,"f":-0.5,"flag":0,"i":null,"id":3,"j":null,"n":null,"t":null,"tm":null,"ts":null,"vb":null,"y":null}`,
			}
		}
		e.exec(t, stmts...)
		// Without parameters the MySQL driver uses the text protocol, with
		// them the binary one; PostgreSQL gets the same query both ways.
		for _, withParam := range []bool{false, true} {
			query := fmt.Sprintf("SELECT * FROM %s ORDER BY id", table)
			var qparams map[string]any
			if withParam {
				query = fmt.Sprintf("SELECT * FROM %s WHERE id <> %%(none)s ORDER BY id", table)
				qparams = map[string]any{"none": "0"}
			}
			ip := e.configuredAs(t, e.reader, query, qparams, nil)
			capt, got := readAll(t, ip)
			if !capt.Reachable {
				t.Fatalf("unreachable: %s", capt.Reason)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records with parameters=%v (-want +got):\n%s", withParam, diff)
			}
		}
	})
}

func TestServerParams(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		tricky := "O'Brien'; DROP TABLE " + table + "; --"
		e.insert(t, table, "p-1", "Triage", "first", "1.00")
		e.insert(t, table, "p-2", "Triage", "second", "2.00")
		third := e.insert(t, table, tricky, "Triage", `back\slash "quoted"`, "3.00")
		e.insert(t, table, ":patient", "Literal", "colon", "4.00")
		tests := []struct {
			name    string
			query   string
			qparams map[string]any
			params  map[string]string
			want    []string
		}{
			{"pyformat", "SELECT id FROM %s WHERE patient_id = %%(p)s",
				map[string]any{"p": map[string]any{"param": "patient_id"}}, map[string]string{"patient_id": "p-2"}, []string{"2"}},
			{"colon name used twice", "SELECT id FROM %s WHERE patient_id = :p OR note = :p ORDER BY id",
				map[string]any{"p": "first"}, nil, []string{"1"}},
			{"value is data, never SQL", "SELECT id FROM %s WHERE patient_id = :p",
				map[string]any{"p": map[string]any{"param": "patient_id"}}, map[string]string{"patient_id": tricky}, []string{third}},
			{"placeholder text in a literal stays text", "SELECT id FROM %s WHERE patient_id = ':patient' AND type = :t",
				map[string]any{"t": "Literal"}, nil, []string{"4"}},
			{"integer column, text parameter", "SELECT id FROM %s WHERE id = %%(id)s",
				map[string]any{"id": map[string]any{"param": "id"}}, map[string]string{"id": "2"}, []string{"2"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ip := e.configuredAs(t, e.reader, fmt.Sprintf(tt.query, table), tt.qparams, tt.params)
				capt, err := ip.CaptureAfter(t.Context(), captureReq(10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				recs, err := capt.Records()
				if err != nil || !capt.Reachable {
					t.Fatalf("reachable=%v reason=%q err=%v", capt.Reachable, capt.Reason, err)
				}
				var ids []string
				for _, r := range recs {
					ids = append(ids, fmt.Sprint(r["id"]))
				}
				if diff := cmp.Diff(tt.want, ids); diff != "" {
					t.Errorf("ids (-want +got):\n%s", diff)
				}
			})
		}
		// The table the tricky value names is still there, all four rows.
		ip := e.configuredAs(t, e.reader, "SELECT count(*) AS n FROM "+table, nil, nil)
		if _, got := readAll(t, ip); len(got) != 1 || got[0] != `{"n":4}` {
			t.Errorf("after the tricky parameter the table reads %v", got)
		}
	})
}

// TestServerReadOnlyTransaction bypasses the filter: writes go straight to
// the function every capture reads through, logged in as the administrator
// (who may write), so that only the READ ONLY transaction stands between
// them and the data. Each must fail, and the table must not change.
func TestServerReadOnlyTransaction(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		e.insert(t, table, "p-1", "Triage", "kept", "1.00")
		writes := []string{
			fmt.Sprintf("UPDATE %s SET note = 'changed'", table),
			fmt.Sprintf("INSERT INTO %s (patient_id, type) VALUES ('p-9', 'Injected')", table),
			fmt.Sprintf("DELETE FROM %s", table),
			fmt.Sprintf("INSERT INTO %s (patient_id, type) SELECT patient_id, type FROM %s", table, table),
		}
		wantError := "read-only transaction"
		switch e.name {
		case "postgres":
			writes = append(writes,
				fmt.Sprintf("WITH d AS (DELETE FROM %s RETURNING id) SELECT id FROM d", table),
				fmt.Sprintf("UPDATE %s SET note = 'changed' RETURNING id", table),
				fmt.Sprintf("SELECT nextval('%s_id_seq')", table),
				fmt.Sprintf("TRUNCATE %s", table),
				fmt.Sprintf("DROP TABLE %s", table),
				"CREATE TABLE extra_written (x int)",
				fmt.Sprintf("SELECT id FROM %s FOR UPDATE", table),
			)
		case "mariadb":
			wantError = "READ ONLY transaction"
			writes = append(writes,
				fmt.Sprintf("REPLACE INTO %s (id, patient_id, type) VALUES (1, 'p-9', 'Replaced')", table),
				fmt.Sprintf("UPDATE %s SET note = 'changed' WHERE id = (SELECT 1)", table),
				"CREATE TABLE extra_written (x int)",
				fmt.Sprintf("TRUNCATE %s", table),
				"CREATE SEQUENCE s1",
				fmt.Sprintf("DROP TABLE %s", table),
				fmt.Sprintf("SELECT id FROM %s FOR UPDATE", table),
			)
		}
		ad := New().(*Adapter)
		if err := ad.Configure(t.Context(), e.request(t, e.section("SELECT 1", nil), e.admin)); err != nil {
			t.Fatal(err)
		}
		loaded, _ := ad.Load()
		r := loaded.reader
		defer r.close()
		for _, w := range writes {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			st, err := openRead(ctx, cancel, r, w, nil)
			if err == nil {
				for _, rerr := range st.records() {
					if rerr != nil {
						err = rerr
					}
				}
			}
			cancel()
			switch {
			case err == nil:
				t.Errorf("%q went through the read-only transaction without an error", w)
			case !strings.Contains(err.Error(), wantError):
				t.Errorf("%q failed, but not because of the read-only transaction: %v", w, err)
			default:
				t.Logf("%s: %v", w, err)
			}
		}
		ip := e.configuredAs(t, e.reader, fmt.Sprintf("SELECT id, patient_id, note FROM %s", table), nil, nil)
		if _, got := readAll(t, ip); !cmp.Equal(got, []string{`{"id":1,"note":"kept","patient_id":"p-1"}`}) {
			t.Errorf("the table changed: %v", got)
		}
	})
}

func TestServerCredentialFailure(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		e.insert(t, table, "p-1", "Triage", "visit", "1.00")
		wrong := e.reader
		wrong.Password = "not-" + e.reader.Password
		unknown := wrong
		unknown.User = "nobody_here"
		for name, account := range map[string]sqlservers.Account{"wrong password": wrong, "unknown user": unknown} {
			t.Run(name, func(t *testing.T) {
				ip := e.configuredAs(t, account, fmt.Sprintf("SELECT id, patient_id FROM %s", table), nil, nil)
				res, err := ip.TestConnection(t.Context())
				if err != nil || res.Reachable {
					t.Errorf("TestConnection = %+v, %v; want unreachable, no error", res, err)
				}
				params := map[string]string{"patient_id": "p-1"}
				before := snapshot(t, ip, false, 5*time.Second)
				after := snapshot(t, ip, true, 5*time.Second)
				if before.Reachable || after.Reachable {
					t.Fatalf("captures with refused credentials were reachable")
				}
				v := judge.Judge(contract(t, recordWrittenEffect, params), before, after, judge.Options{})
				if got := verdictSummary(v); got != "INDETERMINATE/unavailable/SOR_UNREACHABLE" {
					t.Errorf("verdict %s, want INDETERMINATE/unavailable/SOR_UNREACHABLE", got)
				}
				for _, text := range []string{res.Message, after.Reason} {
					if strings.Contains(text, account.Password) || strings.Contains(text, e.reader.Password) {
						t.Errorf("a message carries a password: %s", text)
					}
				}
				if !strings.Contains(strings.ToLower(after.Reason), "denied") && !strings.Contains(after.Reason, "authentication failed") {
					t.Errorf("reason %q does not say the login was refused", after.Reason)
				}
			})
		}
	})
}

func TestServerStatementTimeout(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		ip := e.configuredAs(t, e.reader, e.heavy, nil, nil)
		start := time.Now()
		after := snapshot(t, ip, true, 500*time.Millisecond)
		took := time.Since(start)
		if after.Reachable {
			t.Fatalf("a query past its deadline was reachable with %d records", len(after.Records))
		}
		// Usually the server's statement timeout answers first; on a loaded
		// machine the client's deadline may, and then it cancels the query.
		if !strings.Contains(after.Reason, "did not finish before the capture deadline") {
			t.Errorf("reason %q does not name the deadline", after.Reason)
		}
		if took > 5*time.Second {
			t.Errorf("the capture took %v for a 500ms deadline", took)
		}
		before := judge.Snapshot{Reachable: true}
		v := judge.Judge(contract(t, recordWrittenEffect, map[string]string{"patient_id": "p-1"}), before, after, judge.Options{})
		if got := verdictSummary(v); got != "INDETERMINATE/unavailable/SOR_UNREACHABLE" {
			t.Errorf("verdict %s, want INDETERMINATE/unavailable/SOR_UNREACHABLE", got)
		}
		// The server is not still running it.
		probe := "SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%generate_series(1, 1000000)%' AND pid <> pg_backend_pid()"
		if e.name == "mariadb" {
			probe = "SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%seq_1_to_1000000 a%' AND ID <> CONNECTION_ID()"
		}
		watch := e.configuredAs(t, e.admin, probe, nil, nil)
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, got := readAll(t, watch)
			if len(got) == 1 && got[0] == `{"n":0}` {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the heavy query still runs on the server after its deadline: %v", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("unreachable after %v: %s", took, after.Reason)
	})
}

// TestServerDeadlineMidStream lets the deadline pass while rows stream to a
// slow reader: the read must end in an error, never as a shorter read set.
func TestServerDeadlineMidStream(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		query := "SELECT g AS id, repeat('x', 500) AS pad FROM generate_series(1, 200000) g"
		if e.name == "mariadb" {
			query = "SELECT seq AS id, repeat('x', 500) AS pad FROM seq_1_to_200000"
		}
		ip := e.configuredAs(t, e.reader, query, nil, nil)
		capt, err := ip.CaptureAfter(t.Context(), captureReq(time.Second))
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
			time.Sleep(50 * time.Millisecond)
		}
		if final == nil {
			t.Fatalf("the read ended cleanly with %d of 200000 records after its deadline", got)
		}
		t.Logf("after %d records: %v", got, final)
	})
}

func TestServerStreamsInBatches(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		const rows = 100_000
		query := fmt.Sprintf("SELECT g AS id, 'p-1' AS patient_id FROM generate_series(1, %d) g ORDER BY g", rows)
		if e.name == "mariadb" {
			query = fmt.Sprintf("SELECT seq AS id, 'p-1' AS patient_id FROM seq_1_to_%d ORDER BY seq", rows)
		}
		ip := e.configuredAs(t, e.reader, query, nil, nil)
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
				t.Fatalf("a batch of %d records", len(batch))
			}
			for _, r := range batch {
				total++
				if r["id"] != json.Number(fmt.Sprint(total)) {
					t.Fatalf("record %d has id %v", total, r["id"])
				}
			}
			batches++
		}
		if total != rows || batches < rows/host.MaxBatchRecords {
			t.Errorf("%d records in %d batches; want %d records in at least %d batches", total, batches, rows, rows/host.MaxBatchRecords)
		}
	})
}

func TestServerTestConnection(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		writerGrant := fmt.Sprintf("GRANT SELECT, INSERT ON %s TO verifier_writer_%s", table, table)
		writer := sqlservers.Account{User: "verifier_writer_" + table, Password: "writer-pw"}
		if e.name == "postgres" {
			e.exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", writer.User, writer.Password), writerGrant)
		} else {
			e.exec(t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", writer.User, writer.Password),
				fmt.Sprintf("GRANT SELECT, INSERT ON records.%s TO '%s'@'%%'", table, writer.User))
		}
		query := fmt.Sprintf("SELECT id, patient_id FROM %s", table)
		tests := []struct {
			name      string
			account   sqlservers.Account
			query     string
			reachable bool
			warning   string
		}{
			{"read-only login is quiet", e.reader, query, true, ""},
			{"administrator warns", e.admin, query, true, map[string]string{"postgres": "is a superuser", "mariadb": "holds grants that can write"}[e.name]},
			{"login that may insert warns", writer, query, true, map[string]string{"postgres": "can write 1 table(s) (public." + table + ")", "mariadb": "holds grants that can write"}[e.name]},
			{"query that does not compile", e.reader, "SELECT nope FROM " + table, false, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ip := e.configuredAs(t, tt.account, tt.query, nil, nil)
				res, err := ip.TestConnection(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if res.Reachable != tt.reachable {
					t.Fatalf("TestConnection = %+v; want reachable=%v", res, tt.reachable)
				}
				if !tt.reachable {
					if !strings.Contains(res.Message, "does not compile") {
						t.Errorf("message %q does not say the query does not compile", res.Message)
					}
					return
				}
				if !strings.Contains(res.Message, "read-only transaction") || res.Latency <= 0 {
					t.Errorf("TestConnection = %+v", res)
				}
				joined := strings.Join(res.Warnings, "\n")
				if tt.warning == "" && len(res.Warnings) > 0 {
					t.Errorf("unexpected warnings: %s", joined)
				}
				if tt.warning != "" && !strings.Contains(joined, tt.warning) {
					t.Errorf("warnings %q do not say %q", joined, tt.warning)
				}
			})
		}
	})
}

func TestServerAudit(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		a, b := e.newTable(t), e.newTable(t)
		e.insert(t, a, "p-0", "Triage", "seed", "1.00")
		section := e.request(t, e.section("SELECT 1", nil), e.reader).Config
		counter, err := OpenCounter(t.Context(), section, map[string]string{passwordSlot: e.reader.Password})
		if err != nil {
			t.Fatal(err)
		}
		defer counter.Close()
		tables, err := ParseTables(a + "," + b)
		if err != nil {
			t.Fatal(err)
		}
		before, err := counter.Count(t.Context(), tables)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]int64{a: 1, b: 0}, before); diff != "" {
			t.Fatalf("before (-want +got):\n%s", diff)
		}
		e.insert(t, a, "p-1", "Triage", "visit", "1.00")
		after, err := counter.Count(t.Context(), tables)
		if err != nil {
			t.Fatal(err)
		}
		expect, _ := ParseExpect(a+"=+1,"+b+"=0", tables)
		if got := AuditDeltas(tables, before, after, expect, ""); got.Verdict != AuditConfirmed {
			t.Errorf("audit = %+v, want CONFIRMED", got)
		}
		e.insert(t, b, "p-1", "Triage", "stray", "1.00")
		after, err = counter.Count(t.Context(), tables)
		if err != nil {
			t.Fatal(err)
		}
		got := AuditDeltas(tables, before, after, expect, "")
		if got.Verdict != AuditRefuted || len(got.Reasons) != 1 || !strings.Contains(got.Reasons[0].Message, b+" moved by +1 (0 -> 1), expected 0") {
			t.Errorf("audit = %+v, want REFUTED naming %s", got, b)
		}
		missing, _ := ParseTables(a + ",no_such_table")
		if _, err := counter.Count(t.Context(), missing); err == nil || !strings.Contains(err.Error(), "no_such_table") {
			t.Errorf("counting a missing table: %v", err)
		}
	})
}

// TestServerStoppedBetweenBeginAndVerify stops the server after the
// baseline: the after read is unreachable and the verdict INDETERMINATE
// (unavailable); once the server is back, the same adapter reads again.
// Not parallel: it stops the shared server.
func TestServerStoppedBetweenBeginAndVerify(t *testing.T) {
	forEachEngine(t, false, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		params := map[string]string{"patient_id": "p-1"}
		ip := e.configuredAs(t, e.reader, fmt.Sprintf("SELECT id, patient_id, type FROM %s WHERE patient_id = :p", table),
			map[string]any{"p": map[string]any{"param": "patient_id"}}, params)
		before := snapshot(t, ip, false, 10*time.Second)
		if !before.Reachable {
			t.Fatalf("before: %s", before.Reason)
		}
		e.insert(t, table, "p-1", "Triage", "visit", "1.00")
		if err := e.stop(); err != nil {
			t.Fatal(err)
		}
		restarted := false
		restart := func() {
			if !restarted {
				restarted = true
				if err := e.start(); err != nil {
					t.Fatalf("restarting %s: %v", e.name, err)
				}
			}
		}
		defer restart()
		after := snapshot(t, ip, true, 5*time.Second)
		v := judge.Judge(contract(t, recordWrittenEffect, params), before, after, judge.Options{})
		if got := verdictSummary(v); got != "INDETERMINATE/unavailable/SOR_UNREACHABLE" {
			t.Errorf("verdict with the server stopped: %s, want INDETERMINATE/unavailable/SOR_UNREACHABLE", got)
		}
		if res, err := ip.TestConnection(t.Context()); err != nil || res.Reachable {
			t.Errorf("TestConnection with the server stopped = %+v, %v", res, err)
		}
		t.Logf("server stopped: %s", after.Reason)
		restart()
		after = snapshot(t, ip, true, 10*time.Second)
		v = judge.Judge(contract(t, recordWrittenEffect, params), before, after, judge.Options{})
		if got := verdictSummary(v); got != "CONFIRMED/confirmed/COUNT_EXACT" {
			t.Errorf("verdict after the restart: %s (%s), want CONFIRMED/confirmed/COUNT_EXACT", got, after.Reason)
		}
	})
}

// TestServerQualification runs the real plugin binary through the SDK's
// qualification kit against each server. Not parallel: SetReachable stops
// and starts the shared server.
func TestServerQualification(t *testing.T) {
	forEachEngine(t, false, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		params := map[string]string{"patient_id": "p-1"}
		query := fmt.Sprintf("SELECT id, patient_id, type, updated_at FROM %s WHERE patient_id = %%(patient)s", table)
		qparams := map[string]any{"patient": map[string]any{"param": "patient_id"}}
		insertAt := func(t *testing.T, patient, at string) string {
			stmt := fmt.Sprintf("INSERT INTO %s (patient_id, type, updated_at) VALUES (%s, 'Triage', %s)", table, e.placeholder(1), e.placeholder(2))
			return e.insertReturningID(t, stmt, patient, at)
		}
		now := func() string { return time.Now().UTC().Format("2006-01-02 15:04:05") }
		seed := fmt.Sprintf("INSERT INTO %s (patient_id, type, updated_at) SELECT 'p-1', 'Triage', '2024-01-01 00:00:00' FROM generate_series(1, %%d)", table)
		if e.name == "mariadb" {
			seed = fmt.Sprintf("INSERT INTO %s (patient_id, type, updated_at) SELECT 'p-1', 'Triage', '2024-01-01 00:00:00' FROM seq_1_to_%%d", table)
		}
		down := false
		adaptertest.Run(t, adaptertest.Harness{
			Binary: pluginBinary,
			Params: params,
			Config: func(t *testing.T) sdk.ConfigureRequest {
				return e.request(t, e.section(query, qparams), e.reader)
			},
			BadCredentials: func(t *testing.T) sdk.ConfigureRequest {
				wrong := e.reader
				wrong.Password = "wrong-" + wrong.Password
				return e.request(t, e.section(query, qparams), wrong)
			},
			Selector:         params,
			IdentityField:    "id",
			Reset:            func(t *testing.T) { e.exec(t, "DELETE FROM "+table) },
			WriteCorrect:     func(t *testing.T) string { return insertAt(t, "p-1", now()) },
			WriteWrongEntity: func(t *testing.T) string { return insertAt(t, "p-2", now()) },
			WriteDuplicate:   func(t *testing.T) string { return insertAt(t, "p-1", now()) },
			WriteStale: func(t *testing.T) (string, string) {
				insertAt(t, "p-1", "2001-02-03 04:05:06")
				return "updated_at", "2001-02-03T04:05:06Z"
			},
			WriteLater: func(t *testing.T, delay time.Duration) {
				done := make(chan struct{})
				go func() {
					defer close(done)
					time.Sleep(delay)
					insertAt(t, "p-1", now())
				}()
				t.Cleanup(func() { <-done })
			},
			SetReachable: func(t *testing.T, reachable bool) {
				if reachable == !down {
					return
				}
				var err error
				if reachable {
					err = e.start()
				} else {
					err = e.stop()
				}
				if err != nil {
					t.Fatalf("%s reachable=%v: %v\n%s", e.name, reachable, err, e.log())
				}
				down = !reachable
			},
			SeedMany: func(t *testing.T, n int) { e.exec(t, fmt.Sprintf(seed, n)) },
		})
	})
}

// TestServerPluginBinaryNoSecretInLogs runs the real binary with a wrong
// password and checks the adapter's answers never carry the password.
func TestServerPluginBinaryNoSecretInLogs(t *testing.T) {
	t.Parallel()
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		bin := adaptertest.Subprocess(t, pluginBinary)
		wrong := e.reader
		wrong.Password = "s3cr3t-wrong-password"
		if err := bin.Configure(t.Context(), e.request(t, e.section("SELECT 1 AS one", nil), wrong)); err != nil {
			t.Fatal(err)
		}
		res, err := bin.TestConnection(t.Context())
		if err != nil || res.Reachable {
			t.Fatalf("TestConnection = %+v, %v", res, err)
		}
		capt, err := bin.CaptureBefore(t.Context(), captureReq(5*time.Second))
		if err != nil || capt.Reachable {
			t.Fatalf("capture = %+v, %v", capt, err)
		}
		for _, text := range []string{res.Message, capt.Reason, strings.Join(res.Warnings, " ")} {
			if strings.Contains(text, wrong.Password) {
				t.Errorf("the password leaked: %s", text)
			}
		}
	})
}
