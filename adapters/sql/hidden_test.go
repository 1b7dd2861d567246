package sql

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// TestHiddenRowsRefused: a read through a view, or (PostgreSQL) through a
// table whose row-level security applies to the login, is unusable,
// naming it and sql_hidden_rows, on the real servers: a draft duplicate it
// hides would otherwise be invisible to the count. The base table, a login
// the security does not apply to (the table's owner) and a declared
// sql_hidden_rows: accepted read as before.
func TestHiddenRowsRefused(t *testing.T) {
	forEachEngine(t, true, func(t *testing.T, e *engine) {
		table := e.newTable(t)
		view := table + "_live"
		e.exec(t, fmt.Sprintf("CREATE VIEW %s AS SELECT id, patient_id, type FROM %s WHERE type <> 'Draft'", view, table))
		if e.name == "postgres" {
			e.exec(t, fmt.Sprintf("GRANT SELECT ON %s TO %s", view, e.reader.User))
		}
		e.insert(t, table, "p1", "Triage", nil, nil)
		e.insert(t, table, "p1", "Draft", nil, nil)
		read := func(section map[string]any, as string) (bool, string) {
			t.Helper()
			acct := e.reader
			if as == "admin" {
				acct = e.admin
			}
			c := adaptertest.Configured(t, New, e.request(t, section, acct), nil)
			s := snapshot(t, c, true, 30*time.Second)
			return s.Reachable, s.Reason
		}
		if ok, why := read(e.section("SELECT id, patient_id, type FROM "+view, nil), "reader"); ok || !strings.Contains(why, view) || !strings.Contains(why, "sql_hidden_rows") {
			t.Errorf("a read through the view: reachable %v (%s); want unusable naming the view and sql_hidden_rows", ok, why)
		}
		accepted := e.section("SELECT id, patient_id, type FROM "+view, nil)
		accepted["sql_hidden_rows"] = "accepted"
		if ok, why := read(accepted, "reader"); !ok {
			t.Errorf("a read through the view with sql_hidden_rows: accepted: unreachable (%s)", why)
		}
		if ok, why := read(e.section("SELECT id, patient_id, type FROM "+table, nil), "reader"); !ok {
			t.Errorf("a read of the base table: unreachable (%s)", why)
		}
		if e.name != "postgres" {
			return
		}
		e.exec(t, "ALTER TABLE "+table+" ENABLE ROW LEVEL SECURITY",
			fmt.Sprintf("CREATE POLICY live ON %s FOR SELECT TO %s USING (type <> 'Draft')", table, e.reader.User))
		if ok, why := read(e.section("SELECT id, patient_id, type FROM "+table, nil), "reader"); ok || !strings.Contains(why, "row-level security") || !strings.Contains(why, table) {
			t.Errorf("a read under row-level security: reachable %v (%s); want unusable naming it", ok, why)
		}
		if ok, why := read(e.section("SELECT id, patient_id, type FROM "+table, nil), "admin"); !ok {
			t.Errorf("the table's owner, whom the policy does not bind: unreachable (%s)", why)
		}
	})
}

// TestRelationNames: every bare word (folded) and quoted name of a query.
func TestRelationNames(t *testing.T) {
	got := relationNames(`SELECT a.id FROM Encounters a JOIN "Live View" v ON v.id = a.id WHERE note = 'x FROM y'`, dialect{})
	for _, want := range []string{"encounters", "Live View", "select"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("relationNames = %v, want %q among them", got, want)
		}
	}
	for _, g := range got {
		if g == "x" || g == "y" {
			t.Errorf("relationNames = %v: a string literal's words are no names", got)
		}
	}
}
