package session

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/judge"
)

// TestReverifyAppliesCensus: on a real SQLite deployment with a census,
// Verify and Reverify judge through the same path. A step that re-points
// another patient's existing encounter is RECONCILIATION_REQUIRED with
// EXISTING_RECORD_CHANGED; a "repair" that re-points a third patient's
// encounter instead is caught again by Reverify's census (a narrowed read
// alone would see one new encounter and confirm); the real repair (the
// encounter put back, the Triage written) verifies, recording newness
// census.
func TestReverifyAppliesCensus(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "clinic.db")
	rw, err := stdsql.Open("sqlite", db)
	must(t, err)
	t.Cleanup(func() { rw.Close() })
	_, err = rw.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL);
		INSERT INTO encounters (id, patient_id, type) VALUES (1, 'patient-q', 'Triage'), (2, 'patient-r', 'Triage')`)
	must(t, err)
	host, err := pluginhost.New(pluginhost.Options{})
	must(t, err)
	host.RegisterInProcess("sql", sqladapter.New)
	st, err := bolt.Open(t.TempDir())
	must(t, err)
	t.Cleanup(func() { host.Close(); st.Close() })
	m := mustNew(t, Options{Host: host, Store: st, Daemon: &config.Daemon{Policy: callerContracts(nil)}, PollInterval: 5 * time.Millisecond, AllowInline: true})
	dep := fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census: {sql_query: SELECT id FROM encounters}
`, db)
	effects := `[{"kind": "record_written", "match": {"patient_id": {"param": "patient_id"}, "type": "Triage"}, "expected_count": 1, "count_new_only": true, "timeout_s": 0.2}]`
	ctx := context.Background()
	b, err := m.Begin(ctx, BeginRequest{Deployment: []byte(dep), Effects: []byte(effects), Params: map[string]string{"patient_id": "patient-p"}})
	must(t, err)
	exec := func(q string) {
		t.Helper()
		_, err := rw.Exec(q)
		must(t, err)
	}
	check := func(what string, r *Result, outcome judge.Outcome, code string) {
		t.Helper()
		e := r.Effects[0]
		if r.Outcome != outcome || e.Newness != config.NewnessCensus || (code != "" && !slices.Contains(codesOf(e.Reasons), code)) {
			t.Fatalf("%s: %s, effect %s %v newness %q; want %s with %q, newness census", what, r.Outcome, e.Verdict, codesOf(e.Reasons), e.Newness, outcome, code)
		}
	}

	exec(`UPDATE encounters SET patient_id = 'patient-p' WHERE id = 1`)
	v, err := m.Verify(ctx, b.SessionID)
	must(t, err)
	check("verify, re-pointed", v, judge.ReconciliationRequired, judge.ReasonExistingRecordChanged)

	exec(`UPDATE encounters SET patient_id = 'patient-q' WHERE id = 1`)
	exec(`UPDATE encounters SET patient_id = 'patient-p' WHERE id = 2`)
	r1, err := m.Reverify(ctx, b.SessionID, "moved the encounter back")
	must(t, err)
	check("reverify, another re-pointed", r1, judge.ReconciliationRequired, judge.ReasonExistingRecordChanged)

	exec(`UPDATE encounters SET patient_id = 'patient-r' WHERE id = 2`)
	exec(`INSERT INTO encounters (patient_id, type) VALUES ('patient-p', 'Triage')`)
	r2, err := m.Reverify(ctx, b.SessionID, "put both back and wrote the Triage")
	must(t, err)
	check("reverify, repaired", r2, judge.Verified, "")
	if r2.Effects[0].Verdict != judge.Confirmed {
		t.Fatalf("repaired: %s, want CONFIRMED", r2.Effects[0].Verdict)
	}
}
