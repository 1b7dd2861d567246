package e2e

import (
	"fmt"
	"testing"
)

// The write-set backend of the adversary matrix: the adv_records table on
// a real PostgreSQL (wal_level=logical), read by a role that row-level
// security narrows (it cannot select a hidden row; the deployment says
// sql_hidden_rows: accepted), with changes: over adv_records and
// adv_notes, so that newness, duplicates and losses are judged on every
// committed row of the log (newness: write_set), hidden or not. The slots
// of its deployments are created by the real verifyctl changes setup
// (setupSlotAs), as an operator would.

// advWriteSetTables are the tables the deployments' changes: declares:
// the read's, and adv_notes, which the read never selects (the write
// outside the read collection).
const advWriteSetTables = "[adv_records, adv_notes]"

// advWriteSetName is the backend's name in the matrix.
const advWriteSetName = "postgres-writeset"

// advPostgresWriteSet starts the backend: its server, tables, policy,
// deployments and their slots.
func advPostgresWriteSet(t *testing.T) *advBackend {
	pg := startWriteSetPostgres(t)
	s := advPostgresTables(t, pg, `CREATE TABLE adv_notes (id bigserial PRIMARY KEY, subject text NOT NULL, note text NOT NULL)`)
	// The read role is the narrowed one: row-level security binds it, so
	// a hidden row is a record the read cannot see and only the write set
	// can.
	source := fmt.Sprintf("  sql_driver: postgres\n  sql_connect_args: {host: 127.0.0.1, port: %d, user: %s, database: %s, sslmode: disable}\n"+
		"  sql_password_env: ADV_DB_PASSWORD\n  sql_hidden_rows: accepted\n  changes: {source: logical, tables: %s}\n",
		pg.Port, pg.Reader.User, pg.Database, advWriteSetTables)
	b := advSQLBackend(t, advWriteSetName, s, source, "adv_records", "%(subject)s", []string{"ADV_DB_PASSWORD=" + pg.Reader.Password})
	b.newness, b.released = "write_set", "CHANGES_UNUSABLE"
	// The write set proves newness; the census of live records adds the
	// loss the log cannot call one (a soft delete is an update).
	main := fmt.Sprintf("effects:\n  kind: sql\n%s  sql_query: SELECT id, subject, type FROM adv_records WHERE subject = %%(subject)s AND deleted_at IS NULL ORDER BY id\n"+
		"  sql_query_params: {subject: {param: subject}}\n  census: {sql_query: SELECT id FROM adv_records WHERE deleted_at IS NULL, census_scope: declared}\n", source)
	b.deployments = advDeployments(t, b.dir, main, "")
	for i, name := range []string{depMain, depSettle} {
		setupSlotAs(t, pg, name, b.deployments[name], "ADV_DB_PASSWORD", i == 0)
	}
	b.hidden = func(t *testing.T, subject, typ string) { s.insertRow(t, subject, typ, true) }
	b.other = func(t *testing.T, subject string) {
		s.exec(t, "INSERT INTO adv_notes (subject, note) VALUES (?, ?)", subject, "written beside the save")
	}
	b.truncate = func(t *testing.T) { s.exec(t, "TRUNCATE adv_records, adv_notes") }
	b.reads = func() int {
		return s.counter("SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE relname = 'adv_records'")
	}
	b.na["late duplicate after Verify|"+colVerify] = "Verify's write set ends at the log position its poll took after its after read; " +
		"the duplicate commits after Verify answered, past that position, so no read and no write set of that Verify can see it. " +
		"FinishRun and RollbackCheck read the log again up to a later position, which holds it"
	return b
}
