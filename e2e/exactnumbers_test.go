package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/verifierd/verifierd/client"
)

// Records stay exact end to end: a 64-bit id past 2^53 and a decimal
// stored as text keep every digit from a real SQLite system of record,
// through the sql adapter process and the real daemon, to the caller over
// gRPC (the Go client), over HTTP/JSON (raw requests) and through the
// Python client. Each path begins a session, inserts its row and verifies:
// the new row must read as new against a census holding its neighbour
// 2^53 (a double would merge the two), its id and amount must equal the
// parameters digit for digit, and the matched record must carry them
// unchanged. A control row whose id and amount differ from the expected
// values by less than a double can tell must be REFUTED, never CONFIRMED.

// exactEffects: the row is new, and its id and amount are what the
// parameters say.
const exactEffects = `
- kind: record_written
  match: {account: {param: account}}
  expected_count: 1
  count_new_only: true
  risk: irreversible
  timeout_s: 0.5
- kind: field_equals
  match: {account: {param: account}}
  field: id
  value: {param: id}
  timeout_s: 0.5
- kind: field_equals
  match: {account: {param: account}}
  field: amount
  value: {param: amount}
  timeout_s: 0.5
`

// exactRow is one path's row: account, id (past 2^53) and amount (a
// decimal with more digits than a double holds, stored as text).
type exactRow struct{ account, id, amount string }

var exactRows = map[string]exactRow{
	"grpc":   {"acct-grpc", "9007199254740993", "12345678901234567.89"},
	"http":   {"acct-http", "9007199254740995", "1234.50"},
	"python": {"acct-python", "9223372036854775807", "0.10000000000000000001"},
}

type exactLedger struct {
	db         *sql.DB
	deployment string // registered name
}

func newExactLedger(t *testing.T, d *daemon) *exactLedger {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// 2^53 is there before any session: an id that a double rounds to it
	// would read as an existing row, not a new one.
	if _, err := db.Exec(`CREATE TABLE ledger (id INTEGER PRIMARY KEY, account TEXT NOT NULL, amount TEXT NOT NULL);
		INSERT INTO ledger VALUES (9007199254740992, 'acct-existing', '1.00')`); err != nil {
		t.Fatal(err)
	}
	dep := writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, account, amount FROM ledger WHERE account = :account ORDER BY id
  sql_query_params: {account: {param: account}}
  census: {sql_query: SELECT id FROM ledger}
`, path))
	return &exactLedger{db: db, deployment: d.register(t, dep)}
}

func (l *exactLedger) insert(t *testing.T, r exactRow) {
	t.Helper()
	id, err := strconv.ParseInt(r.id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`INSERT INTO ledger VALUES (?, ?, ?)`, id, r.account, r.amount); err != nil {
		t.Fatal(err)
	}
}

func (r exactRow) params() map[string]string {
	return map[string]string{"account": r.account, "id": r.id, "amount": r.amount}
}

func TestExactNumbersEndToEnd(t *testing.T) {
	t.Parallel()
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	l := newExactLedger(t, d)

	t.Run("grpc", func(t *testing.T) { exactOverGRPC(t, d, l, exactRows["grpc"]) })
	t.Run("http", func(t *testing.T) { exactOverHTTP(t, httpAddr, l, exactRows["http"]) })
	t.Run("python", func(t *testing.T) { exactThroughPython(t, httpAddr, l, exactRows["python"]) })
	t.Run("control", func(t *testing.T) { exactControl(t, d, l) })
}

// exactOverGRPC: the Go client, over gRPC.
func exactOverGRPC(t *testing.T, d *daemon, l *exactLedger, r exactRow) {
	c, err := client.Dial(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := verifyWithGoClient(t, c, l, r, r)
	if res.Outcome != client.Verified || len(res.Effects) != 3 {
		t.Fatalf("outcome %s with %d effects, want VERIFIED with 3: %+v\n%s", res.Outcome, len(res.Effects), res.Effects, d.logs())
	}
	for i, want := range []string{"", r.id, r.amount} {
		e := res.Effects[i]
		if e.Verdict != "CONFIRMED" || len(e.MatchedRecords) != 1 {
			t.Fatalf("effect %d: %s with %d matched records, want CONFIRMED with 1 (%+v)", i, e.Verdict, len(e.MatchedRecords), e.Reasons)
		}
		if i > 0 && (e.ObservedValue == nil || *e.ObservedValue != want) {
			t.Errorf("effect %d observed %v, want exactly %s", i, e.ObservedValue, want)
		}
		checkExactRecord(t, "gRPC", e.MatchedRecords[0], r)
	}
}

func verifyWithGoClient(t *testing.T, c *client.Client, l *exactLedger, expect, write exactRow) *client.Result {
	t.Helper()
	s, err := c.Begin(t.Context(), client.Request{Deployment: l.deployment, Effects: []byte(exactEffects), Params: expect.params()})
	if err != nil {
		t.Fatal(err)
	}
	l.insert(t, write)
	res, err := c.Verify(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkExactRecord wants the record's id and amount with every digit: the
// id as a JSON number or a string of its digits, the amount as the text
// stored.
func checkExactRecord(t *testing.T, path string, raw []byte, r exactRow) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var rec map[string]any
	if err := dec.Decode(&rec); err != nil {
		t.Fatalf("%s: matched record %s: %v", path, raw, err)
	}
	if got := fmt.Sprint(rec["id"]); got != r.id {
		t.Errorf("%s: matched record id %s (%T), want exactly %s: %s", path, got, rec["id"], r.id, raw)
	}
	if got, ok := rec["amount"].(string); !ok || got != r.amount {
		t.Errorf("%s: matched record amount %v, want the text %q: %s", path, rec["amount"], r.amount, raw)
	}
}

// exactOverHTTP: raw HTTP/JSON, the amount sent as a JSON number (its
// digits bound as written) and the id as a string.
func exactOverHTTP(t *testing.T, httpAddr string, l *exactLedger, r exactRow) {
	body := fmt.Sprintf(`{"deploymentName": %q, "effects": %q, "params": {"account": %q, "id": %q, "amount": %s}}`,
		l.deployment, exactEffects, r.account, r.id, r.amount)
	begun := postExactJSON(t, "http://"+httpAddr+"/v1/sessions", body)
	sid, _ := begun["sessionId"].(string)
	if sid == "" {
		t.Fatalf("Begin over HTTP: %v", begun)
	}
	l.insert(t, r)
	v := postExactJSON(t, "http://"+httpAddr+"/v1/sessions/"+sid+":verify", "{}")
	effects, _ := v["effects"].([]any)
	if v["outcome"] != "VERIFIED" || len(effects) != 3 {
		t.Fatalf("Verify over HTTP: outcome %v with %d effects, want VERIFIED with 3: %v", v["outcome"], len(effects), v)
	}
	for i, want := range []string{"", r.id, r.amount} {
		e, _ := effects[i].(map[string]any)
		recs, _ := e["matchedRecords"].([]any)
		if e["verdict"] != "CONFIRMED" || len(recs) != 1 {
			t.Fatalf("effect %d over HTTP: %v, want CONFIRMED with one matched record", i, e)
		}
		if i > 0 && e["observedValue"] != want {
			t.Errorf("effect %d over HTTP observed %v, want exactly %s", i, e["observedValue"], want)
		}
		raw, _ := json.Marshal(recs[0])
		checkExactRecord(t, "HTTP", raw, r)
	}
}

// postJSON posts body and decodes the answer with numbers kept as text.
func postExactJSON(t *testing.T, url, body string) map[string]any {
	t.Helper()
	res, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %v (%v)", url, res.StatusCode, out, err)
	}
	return out
}

// exactPython is what the Python client does: begin, insert, verify, and
// print what the caller sees. Python's json keeps an integer's digits.
const exactPython = `
import json, sqlite3, sys
from verifierd import Client
url, deployment, effects, db, account, id_, amount = sys.argv[1:]
c = Client(url)
s = c.begin(deployment, effects=effects, params={"account": account, "id": id_, "amount": amount})
con = sqlite3.connect(db)
con.execute("INSERT INTO ledger VALUES (?, ?, ?)", (int(id_), account, amount))
con.commit()
con.close()
r = c.verify(s.session_id)
print(json.dumps({"outcome": r.outcome, "effects": [
    {"verdict": e.verdict, "observedValue": e.observed_value, "matchedRecords": e.matched_records} for e in r.effects]}))
`

// exactThroughPython: the Python client (clients/python), over HTTP.
func exactThroughPython(t *testing.T, httpAddr string, l *exactLedger, r exactRow) {
	var path string
	if err := l.db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", exactPython, "http://"+httpAddr, l.deployment, exactEffects, path, r.account, r.id, r.amount)
	abs, err := filepath.Abs("../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+abs)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("the Python client: %v\n%s", err, stderr)
	}
	var got struct {
		Outcome string
		Effects []struct {
			Verdict        string
			ObservedValue  *string
			MatchedRecords []json.RawMessage
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the Python client printed %s: %v", out, err)
	}
	if got.Outcome != "VERIFIED" || len(got.Effects) != 3 {
		t.Fatalf("the Python client: outcome %s with %d effects, want VERIFIED with 3: %s", got.Outcome, len(got.Effects), out)
	}
	for i, want := range []string{"", r.id, r.amount} {
		e := got.Effects[i]
		if e.Verdict != "CONFIRMED" || len(e.MatchedRecords) != 1 {
			t.Fatalf("effect %d through Python: %+v, want CONFIRMED with one matched record", i, e)
		}
		if i > 0 && (e.ObservedValue == nil || *e.ObservedValue != want) {
			t.Errorf("effect %d through Python observed %v, want exactly %s", i, e.ObservedValue, want)
		}
		checkExactRecord(t, "Python", e.MatchedRecords[0], r)
	}
}

// exactControl: the row written differs from the expected one by less
// than a double tells apart (the test checks that first); the id and the
// amount contracts are REFUTED, the outcome RECONCILIATION_REQUIRED.
func exactControl(t *testing.T, d *daemon, l *exactLedger) {
	expect := exactRow{"acct-control", "9007199254741001", "0.1"}
	write := exactRow{"acct-control", "9007199254741000", "0.1000000000000000055511151231257827"}
	for _, pair := range [][2]string{{expect.id, write.id}, {expect.amount, write.amount}} {
		a, _ := strconv.ParseFloat(pair[0], 64)
		b, _ := strconv.ParseFloat(pair[1], 64)
		if a != b {
			t.Fatalf("control: %s and %s are different doubles; the control must pick values a double merges", pair[0], pair[1])
		}
	}
	c, err := client.Dial(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := verifyWithGoClient(t, c, l, expect, write)
	if res.Outcome != client.ReconciliationRequired || len(res.Effects) != 3 {
		t.Fatalf("control: outcome %s with %d effects, want RECONCILIATION_REQUIRED with 3: %+v", res.Outcome, len(res.Effects), res.Effects)
	}
	for i, want := range []string{"CONFIRMED", "REFUTED", "REFUTED"} {
		if e := res.Effects[i]; e.Verdict != want {
			t.Errorf("control effect %d: %s (%+v), want %s", i, e.Verdict, e.Reasons, want)
		}
	}
	if v := res.Effects[1].ObservedValue; v == nil || *v != write.id {
		t.Errorf("control: observed id %v, want exactly %s", v, write.id)
	}
}
