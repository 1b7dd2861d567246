// Package client_test runs the Go client (the client module,
// github.com/verifierd/verifierd/client) against a real daemon in process.
// It lives in the daemon's module because it starts the daemon from its
// internal packages, which the client module does not require; the client
// module's own tests (client/) need no daemon.
package client_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/server"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store/bolt"
)

// clinic is a real daemon, in process, on a loopback port: the sql adapter
// reads a SQLite clinic database the test writes to as the automation.
type clinic struct {
	addr string
	pub  ed25519.PublicKey
	db   *sql.DB
}

const (
	clinicDeployment = `effects:
  kind: sql
  sqlite_database: {db}
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
  census:
    sql_query: SELECT id FROM encounters
`
	clinicWorkflow = `schema: verifierd.workflow/v1
name: triage
params:
  patient_id: {}
  note: {}
policy:
  subject_params: [patient_id]
steps:
  - step: save_triage
    intent: "save the triage note"
    risk: irreversible
    enters: [note]
    effects:
      - kind: record_written
        match: {patient_id: {param: patient_id}, type: Triage}
        expected_count: 1
        count_new_only: true
        risk: irreversible
        timeout_s: 1
      - kind: field_equals
        match: {patient_id: {param: patient_id}, type: Triage}
        field: note
        value: {param: note}
        timeout_s: 1
`
	// visitWorkflow is a run of two steps: a triage encounter, then a
	// follow-up whose note names it (its id handed off from the triage).
	visitWorkflow = `schema: verifierd.workflow/v1
name: visit
params:
  patient_id: {}
  note: {}
  triage_id: {}
policy:
  subject_params: [patient_id]
steps:
  - step: triage
    risk: irreversible
    enters: [note]
    effects:
      - {kind: record_written, match: {patient_id: {param: patient_id}, type: Triage}, count_new_only: true, risk: irreversible, timeout_s: 1}
  - step: follow_up
    risk: irreversible
    after: [triage]
    handoffs:
      - {param: triage_id, from: {step: triage, effect: 0, field: id}}
    effects:
      - {kind: record_written, match: {patient_id: {param: patient_id}, type: FollowUp, note: {param: triage_id}}, count_new_only: true, risk: irreversible, timeout_s: 1}
`
	clinicDaemon = `deployments:
  clinic: deployment.yaml
workflows:
  triage: workflow.yaml
  visit: visit.yaml
policy:
  require_change_claim: true
`
)

// startClinic starts the daemon; token, when set, is its API bearer token.
func startClinic(t testing.TB, token string) *clinic {
	t.Helper()
	return startClinicWith(t, server.Options{BearerToken: token})
}

// startClinicWith starts the daemon with the API options opts.
func startClinicWith(t testing.TB, opts server.Options) *clinic {
	t.Helper()
	dir := t.TempDir()
	dep := strings.Replace(clinicDeployment, "{db}", filepath.Join(dir, "clinic.db"), 1)
	for name, text := range map[string]string{"deployment.yaml": dep, "workflow.yaml": clinicWorkflow, "visit.yaml": visitWorkflow, "daemon.yaml": clinicDaemon} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "clinic.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE encounters (id INTEGER PRIMARY KEY, patient_id TEXT NOT NULL, type TEXT NOT NULL, note TEXT)`); err != nil {
		t.Fatal(err)
	}
	daemon, err := config.LoadDaemon(filepath.Join(dir, "daemon.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	workflows, err := session.LoadWorkflows(daemon)
	if err != nil {
		t.Fatal(err)
	}
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host.RegisterInProcess("sql", sqladapter.New)
	st, err := bolt.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	m, err := session.New(session.Options{Host: host, Store: st, Daemon: daemon, Workflows: workflows, Signer: signing.New(priv), EvidenceKey: make([]byte, session.EvidenceKeySize)})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := server.New(m, opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); host.Close(); st.Close() })
	return &clinic{addr: lis.Addr().String(), pub: pub, db: db}
}

// save writes a triage encounter, as the automation's action would.
func (c *clinic) save(patient, note string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.db.ExecContext(ctx, `INSERT INTO encounters (patient_id, type, note) VALUES (?, 'Triage', ?)`, patient, note)
		return err
	}
}
