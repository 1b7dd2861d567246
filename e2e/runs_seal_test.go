package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunSealedOnWhatIsTrue drives the real daemon (bbolt store, the
// sql adapter on a real SQLite table with a census, the document-hash
// adapter on a real folder): a run is sealed on what the system of record
// holds when it is sealed, and rolled back only when every change is gone
// from the whole collection.
func TestRunSealedOnWhatIsTrue(t *testing.T) {
	s := newRunSoR(t)
	d := startDaemon(t, daemonOpts{pluginDir: bins.pluginDir, config: s.config("")})

	t.Run("a halted attempt's late save is not sealed VERIFIED", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-slow")
		first := d.mustStep(t, run, "intake")
		d.verifyStep(t, first, "HALTED_BEFORE_EFFECT")
		retry := d.mustStep(t, run, "intake")
		s.insert(t, "intake", "p-slow", 0, "")
		d.verifyStep(t, retry, "VERIFIED")
		// The first attempt's slow save lands: two intake rows.
		s.insert(t, "intake", "p-slow", 0, "")
		r, code := d.runCmd(t, "run", "finish", "--run", run)
		if code != 4 || r.outcome() != "RECONCILIATION_REQUIRED" || !slices.Contains(r.reasonCodes(), "earlier_attempt_landed") {
			t.Fatalf("finish after the late save: exit %d %s %v; want exit 4, RECONCILIATION_REQUIRED with earlier_attempt_landed", code, r.outcome(), r.Reasons)
		}
		named := false
		for _, rs := range r.Reasons {
			named = named || (rs.Code == "earlier_attempt_landed" && strings.Contains(rs.Message, first))
		}
		if !named {
			t.Errorf("no earlier_attempt_landed reason names the first attempt %s: %v", first, r.Reasons)
		}
	})

	t.Run("re-pointed rows and a renamed letter are not rolled back", func(t *testing.T) {
		run := d.runBegin(t, "ledger", "p-moved")
		d.honestRun(t, s, run, "p-moved", false)
		d.finishVerified(t, run, 1)
		// The "undo" moves the rows to another patient and renames the
		// letter inside the folder the letters deployment reads.
		if _, err := s.db.Exec(`UPDATE records SET patient_id = 'p-elsewhere' WHERE patient_id = 'p-moved'`); err != nil {
			t.Fatal(err)
		}
		letter := filepath.Join(s.letters, "letter-p-moved.txt")
		moved := filepath.Join(s.letters, "letter-zz-archived.txt")
		if err := os.Rename(letter, moved); err != nil {
			t.Fatal(err)
		}
		out, code := d.ctl(t, "run", "rollback-check", "--run", run)
		res := mustJSON[struct {
			RolledBack bool   `json:"rolled_back"`
			Outcome    string `json:"outcome"`
			Remains    []struct {
				Step    string `json:"step"`
				Reasons []struct {
					Code string `json:"code"`
				} `json:"reasons"`
			} `json:"remains"`
		}](t, out)
		got := map[string]int{}
		for _, rm := range res.Remains {
			for _, rs := range rm.Reasons {
				got[rm.Step+"/"+rs.Code]++
			}
		}
		if code != 4 || res.RolledBack || res.Outcome != "VERIFIED" {
			t.Fatalf("rollback-check of moved rows: exit %d rolled_back %v outcome %s; want exit 4, the run still VERIFIED\n%s", code, res.RolledBack, res.Outcome, out)
		}
		for _, want := range []string{"intake/record_remains", "posting/record_remains", "letter/record_remains", "send/record_remains", "letter/artifact_moved"} {
			if got[want] != 1 {
				t.Errorf("remainder %s: %d, want 1 (all: %v)", want, got[want], got)
			}
		}
		// Really undone: the rows deleted, the file gone.
		if _, err := s.db.Exec(`DELETE FROM records WHERE patient_id = 'p-elsewhere'`); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(moved); err != nil {
			t.Fatal(err)
		}
		r, code := d.runCmd(t, "run", "rollback-check", "--run", run)
		if code != 0 || r.outcome() != "ROLLED_BACK_VERIFIED" || len(r.Remains) != 0 {
			t.Fatalf("rollback-check with everything gone: exit %d %s %v; want exit 0, ROLLED_BACK_VERIFIED", code, r.outcome(), r.Remains)
		}
	})
}
