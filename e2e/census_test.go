package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestCensusSQL: the clinic's read is one patient's encounters; its census
// reads every encounter id. Through the real daemon and the sql plugin over
// SQLite: an honest save is VERIFIED and says newness came from the census;
// an existing encounter of another patient re-assigned to this one is not
// new (docs/contracts.md §3a: REFUTED, conflicting, EXISTING_RECORD_CHANGED); and
// the same read without a census is refused by require_proven_newness
// before anything is read (exit 3, newness_unproven).
func TestCensusSQL(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := newClinic(t)
	c.save(t, "other", "Follow-up", 1) // encounter 1, another patient's

	b := d.begin(t, c, "honest", "Follow-up")
	c.save(t, "honest", "Follow-up", 1)
	v := d.verify(t, b.SessionID)
	if got := v.summary(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL" {
		t.Errorf("honest save: %s", got)
	}
	if e := v.Effects[0]; e.Newness != "census" || e.CensusScope != "proven" || e.CollateralScope != "collection" {
		t.Errorf("honest save: newness %q census_scope %q collateral_scope %q, want census proven collection", e.Newness, e.CensusScope, e.CollateralScope)
	}

	t.Run("re-assigned existing record", func(t *testing.T) {
		b := d.begin(t, c, "moved", "Follow-up")
		c.run(t, "reassign", c.path, "1", "moved")
		v := d.verify(t, b.SessionID)
		e := v.Effects[0]
		var codes []string
		for _, r := range e.Reasons {
			codes = append(codes, r.Code)
		}
		if e.Verdict != "REFUTED" || e.Result != "conflicting" || !strings.Contains(strings.Join(codes, " "), "EXISTING_RECORD_CHANGED") || v.Outcome != "RECONCILIATION_REQUIRED" {
			t.Errorf("re-assigned: %s, want REFUTED/conflicting with EXISTING_RECORD_CHANGED", v.summary())
		}
	})

	t.Run("no census is refused", func(t *testing.T) {
		dep := writeFile(t, t.TempDir(), "nocensus.yaml", fmt.Sprintf(`effects:
  kind: sql
  sqlite_database: %s
  sql_query: SELECT id, patient_id, type, note FROM encounters WHERE patient_id = :patient_id ORDER BY id
  sql_query_params: {patient_id: {param: patient_id}}
`, filepath.Clean(c.path)))
		out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", c.effects, "--param", "patient_id=p9", "--param", "note=x")
		r := mustJSON[beginOutput](t, out)
		if code != 3 || r.Error == nil || !strings.Contains(r.Error.Message, "newness_unproven") || !strings.Contains(r.Error.Message, "census:") {
			t.Errorf("no census: exit %d, %s; want exit 3 newness_unproven naming census:", code, out)
		}
	})
}
