package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/receipt"
)

// TestWriteSetPostgres: the clinic's read is one patient's encounters on a
// real PostgreSQL (wal_level=logical) whose read role cannot see notes
// marked hidden (row-level security), and the candidate declares
// changes: (the write set, read by the daemon from the deployment's
// logical replication slot). Through the real daemon and the sql plugin:
// an honest save is VERIFIED with newness write_set in the signed receipt;
// a double submit, a duplicate the read role cannot see, an existing
// record re-pointed to the patient or edited into scope, another's record
// deleted, and, under forbid_other_writes, a soft delete outside the read
// collection are all caught; a truncation leaves the write set incomplete
// (INDETERMINATE CHANGES_UNUSABLE).
func TestWriteSetPostgres(t *testing.T) {
	pg := startWriteSetPostgres(t)
	ctx := context.Background()
	exec := func(stmts ...string) {
		t.Helper()
		if err := pg.Exec(ctx, pg.Database, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE encounters_ws (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text)",
		"ALTER TABLE encounters_ws ENABLE ROW LEVEL SECURITY",
		fmt.Sprintf("CREATE POLICY reader_sees ON encounters_ws FOR SELECT TO %s USING (note IS DISTINCT FROM 'hidden')", pg.Reader.User),
		"INSERT INTO encounters_ws (patient_id, type, note) VALUES ('other', 'Triage', 'old')") // id 1, another patient's

	dir := t.TempDir()
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{
		config: "secrets:\n  allow: [VERIFIER_DB_*]\n",
		env:    []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password},
		args:   []string{"--http-listen", httpAddr},
	})
	clinic := &clinicDB{deployment: writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: >-
    SELECT id, patient_id, type, note FROM encounters_ws
    WHERE patient_id = %%(patient_id)s ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  changes: {source: logical, tables: [encounters_ws]}
  # The read goes through row-level security; the write set sees every
  # committed row, hidden or not, so the operator accepts the read's.
  sql_hidden_rows: accepted
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: VERIFIER_DB_PASSWORD
`, pg.Port, pg.Reader.User, pg.Database)),
		effects: writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  timeout_s: 2
`)}
	name := d.register(t, clinic.deployment)
	setupSlot(t, pg, name, clinic.deployment)

	insert := func(patient, note string) string {
		return fmt.Sprintf("INSERT INTO encounters_ws (patient_id, type, note) VALUES ('%s', 'Triage', '%s')", patient, note)
	}
	exec("INSERT INTO encounters_ws (patient_id, type, note) VALUES ('p-6', 'Other', 'x')", // id 2: edited into scope below
		"INSERT INTO encounters_ws (patient_id, type, note) VALUES ('bystander', 'Triage', 'x')") // id 3: deleted below
	tests := []struct {
		name, patient string
		act           []string
		want          string
		incomplete    bool // the write set is not complete
	}{
		{"honest", "p-1", []string{insert("p-1", "x")}, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT", false},
		{"double submit", "p-2", []string{insert("p-2", "x"), insert("p-2", "x")}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER", false},
		{"duplicate the read role cannot see", "p-3", []string{insert("p-3", "x"), insert("p-3", "hidden")}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER", false},
		{"re-pointed existing record", "p-4", []string{"UPDATE encounters_ws SET patient_id = 'p-4' WHERE id = 1"}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER+EXISTING_RECORD_CHANGED", false},
		{"existing record edited into scope", "p-6", []string{"UPDATE encounters_ws SET type = 'Triage' WHERE id = 2"}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER+EXISTING_RECORD_CHANGED", false},
		{"another's record deleted", "p-7", []string{insert("p-7", "x"), "DELETE FROM encounters_ws WHERE id = 3"}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COLLATERAL_LOSS", false},
		// Last: it empties the table. A TRUNCATE carries no row images, so
		// the write set is not complete: never CONFIRMED.
		{"truncation", "p-8", []string{insert("p-8", "x"), "TRUNCATE encounters_ws"}, "RECONCILIATION_REQUIRED INDETERMINATE/indeterminate/CHANGES_UNUSABLE", true},
	}
	t.Run("write outside the read collection", func(t *testing.T) {
		strict := &clinicDB{deployment: clinic.deployment, effects: writeFile(t, dir, "strict.yaml", `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
  count_new_only: true
  forbid_other_writes: true
  timeout_s: 2
`)}
		b := d.begin(t, strict, "p-5", "x")
		// A soft delete of a record outside the read collection.
		exec(insert("p-5", "x"), "UPDATE encounters_ws SET note = 'deleted' WHERE id = 3")
		v := d.verify(t, b.SessionID)
		if got := v.summary(); !strings.HasPrefix(got, "RECONCILIATION_REQUIRED REFUTED/conflicting/") || !strings.Contains(got, "OTHER_WRITE") {
			t.Errorf("verify = %s, want REFUTED with OTHER_WRITE\n%s", got, d.logs())
		}
	})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := d.begin(t, clinic, tt.patient, "x")
			exec(tt.act...)
			v := d.verify(t, b.SessionID)
			if got := v.summary(); got != tt.want {
				t.Errorf("verify = %s\nwant     %s\n%s", got, tt.want, d.logs())
			}
			checkWriteSetReceipt(t, v, !tt.incomplete)
			if tt.name == "honest" {
				// The console shows the write set's span and its count.
				page := httpGet(t, "http://"+httpAddr+"/console/sessions/"+b.SessionID)
				if !strings.Contains(page, "<th>Write set</th>") || !strings.Contains(page, "1 change(s)") || strings.Contains(page, "not readable") {
					t.Errorf("the console's session page does not show a readable write set of 1 change:\n%s", page)
				}
			}
		})
	}
}

// checkWriteSetReceipt: the result and its signed receipt say the effect
// was judged on the write set, with its positions and change count.
func checkWriteSetReceipt(t *testing.T, v verifyOutput, complete bool) {
	t.Helper()
	env, err := receipt.ParseEnvelope(v.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Effects []struct {
			Newness  string `json:"newness"`
			WriteSet *struct {
				Source    string `json:"source"`
				From, To  string
				Changes   int  `json:"changes"`
				Complete  bool `json:"complete"`
				Reachable bool `json:"reachable"`
			} `json:"write_set"`
		} `json:"effects"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil || len(p.Effects) != 1 {
		t.Fatalf("receipt payload %s: %v", env.Payload, err)
	}
	e := p.Effects[0]
	if v.Effects[0].Newness != "write_set" || e.Newness != "write_set" || e.WriteSet == nil || e.WriteSet.Source != "logical" ||
		e.WriteSet.Complete != complete || !e.WriteSet.Reachable || (complete && e.WriteSet.Changes < 1) || e.WriteSet.From == "" || e.WriteSet.To == "" {
		t.Errorf("receipt effect: newness %q (result %q), write_set %+v; want write_set, a span with changes, complete %v", e.Newness, v.Effects[0].Newness, e.WriteSet, complete)
	}
}

// startWriteSetPostgres starts a PostgreSQL of its own for the test.
func startWriteSetPostgres(t *testing.T) *sqlservers.Postgres {
	t.Helper()
	parent, err := os.MkdirTemp("", "e2e-ws-")
	if err == nil {
		err = os.Chmod(parent, 0o755) // the server runs as its own user
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	pg, err := sqlservers.StartPostgres(parent)
	if pg != nil {
		t.Cleanup(func() { pg.Close() })
	}
	if errors.Is(err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if err != nil {
		log := ""
		if pg != nil {
			log = pg.Log()
		}
		t.Fatalf("PostgreSQL could not start: %v\n%s", err, log)
	}
	return pg
}

// setupSlot runs verifyctl changes preflight, setup (as the
// administrator), the GRANTs setup prints, and preflight again, checking
// what each reports.
func setupSlot(t *testing.T, pg *sqlservers.Postgres, name, deployment string) {
	t.Helper()
	setupSlotAs(t, pg, name, deployment, "VERIFIER_DB_PASSWORD", true)
}

// setupSlotAs is setupSlot for a deployment whose sql_password_env is
// passwordEnv (the read role's password); ungranted says the read role
// has no REPLICATION yet (the first slot of the server), which the first
// preflight must then name.
func setupSlotAs(t *testing.T, pg *sqlservers.Postgres, name, deployment, passwordEnv string, ungranted bool) {
	t.Helper()
	env := []string{passwordEnv + "=" + pg.Reader.Password, "PG_ADMIN_PASSWORD=" + pg.Admin.Password}
	args := []string{"--deployment-name", name, "--deployment", deployment}
	out, code := verifyctl(t, env, append([]string{"changes", "preflight"}, args...)...)
	if code != 3 || !strings.Contains(out, "replication slot verifierd_"+name+" does not exist") || strings.Contains(out, "REPLICATION") != ungranted {
		t.Fatalf("preflight before setup: exit %d, %s; want exit 3 naming the missing slot (and the REPLICATION grant: %v)", code, out, ungranted)
	}
	out, code = verifyctl(t, env, append([]string{"changes", "setup", "--user", pg.Admin.User, "--password-env", "PG_ADMIN_PASSWORD"}, args...)...)
	var setup struct {
		Slot   string   `json:"slot"`
		Grants []string `json:"grants"`
	}
	if err := json.Unmarshal([]byte(out), &setup); err != nil || code != 0 || setup.Slot != "verifierd_"+name || len(setup.Grants) != 1 {
		t.Fatalf("setup: exit %d, %s", code, out)
	}
	if err := pg.Exec(context.Background(), pg.Database, setup.Grants...); err != nil {
		t.Fatalf("the GRANTs setup printed: %v", err)
	}
	if out, code = verifyctl(t, env, append([]string{"changes", "preflight"}, args...)...); code != 0 || !strings.Contains(out, `"problems": []`) {
		t.Fatalf("preflight after setup: exit %d, %s", code, out)
	}
}

// TestWriteSetPostgresSlotLifecycle: status and the daemon's preflight
// report the slot; after drop, the daemon's preflight names the missing
// slot and a Begin of a changes: candidate is refused (the write set cannot be
// read: do not actuate), never judged without it.
func TestWriteSetPostgresSlotLifecycle(t *testing.T) {
	pg := startWriteSetPostgres(t)
	if err := pg.Exec(context.Background(), pg.Database, "CREATE TABLE enc_life (id bigserial PRIMARY KEY, patient_id text NOT NULL, type text, note text)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{config: "secrets:\n  allow: [VERIFIER_DB_*]\n", env: []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password}})
	clinic := &clinicDB{deployment: writeFile(t, dir, "deployment.yaml", fmt.Sprintf(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id, type, note FROM enc_life WHERE patient_id = %%(patient_id)s ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  changes: {source: logical, tables: [enc_life]}
  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}
  sql_password_env: VERIFIER_DB_PASSWORD
`, pg.Port, pg.Reader.User, pg.Database)),
		effects: writeFile(t, dir, "effects.yaml", "- {kind: record_written, match: {patient_id: {param: patient_id}}, count_new_only: true, timeout_s: 2}\n")}
	name := d.register(t, clinic.deployment)
	setupSlot(t, pg, name, clinic.deployment)
	env := []string{"VERIFIER_DB_PASSWORD=" + pg.Reader.Password, "PG_ADMIN_PASSWORD=" + pg.Admin.Password}
	args := []string{"--deployment-name", name, "--deployment", clinic.deployment}
	if out, code := verifyctl(t, env, append([]string{"changes", "status"}, args...)...); code != 0 || !strings.Contains(out, `"exists": true`) || !strings.Contains(out, `"retained_bytes"`) {
		t.Fatalf("status: exit %d, %s", code, out)
	}
	if out, code := d.ctl(t, "preflight", "--deployment-name", name, "--param", "patient_id=p-0"); code != 0 || !strings.Contains(out, `"reachable": true`) {
		t.Fatalf("daemon preflight with the slot: exit %d, %s\n%s", code, out, d.logs())
	}
	if out, code := verifyctl(t, env, append([]string{"changes", "drop", "--user", pg.Admin.User, "--password-env", "PG_ADMIN_PASSWORD"}, args...)...); code != 0 || !strings.Contains(out, `"dropped": true`) {
		t.Fatalf("drop: exit %d, %s", code, out)
	}
	if out, _ := d.ctl(t, "preflight", "--deployment-name", name, "--param", "patient_id=p-0"); !strings.Contains(out, `"reachable": false`) || !strings.Contains(out, "verifierd_"+name+" does not exist") {
		t.Errorf("daemon preflight without the slot: %s; want the candidate unreachable, naming the missing slot", out)
	}
	out, code := d.ctl(t, "begin", "--deployment-name", name, "--effects", clinic.effects, "--param", "patient_id=p-1")
	if code != 3 || !strings.Contains(out, "CHANGES_UNUSABLE") || !strings.Contains(out, "verifyctl changes setup") {
		t.Fatalf("begin without the slot: exit %d, %s; want exit 3 CHANGES_UNUSABLE naming verifyctl changes setup", code, out)
	}
}
