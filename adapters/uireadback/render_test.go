package uireadback

import (
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
)

// renderDelay is how long after loading the record page the application
// renders its list in TestListRenderedLate: longer than the read's first
// look at the page (ready_selector is there at once), well inside
// navigation_timeout_s (5 s in the tests' section).
const renderDelay = 1500 * time.Millisecond

// TestListRenderedLate: a record page whose container (ready_selector) is
// there at once and whose list appears later is read once its rows or its
// empty state are shown; a page that never shows either is unusable
// (INDETERMINATE), never a read of no records, so the step is never halted
// before its effect on it.
func TestListRenderedLate(t *testing.T) {
	a := startApp(t)
	correct := func(ac *actor, p string, _ int) { ac.save(intended(p)) }
	late := recordapp.Faults{RenderDelayMS: int(renderDelay / time.Millisecond)}

	t.Run("rows rendered after the first look", func(t *testing.T) {
		r := scenario{name: "late rows", save: correct, before: late, after: late}.run(t, a, "late-rows")
		if !r.before.Reachable || len(r.before.Records) != 1 {
			t.Fatalf("before read = %+v; want the colleague's one row", r.before)
		}
		if !r.after.Reachable || len(r.after.Records) != 2 {
			t.Fatalf("after read = %+v; want the colleague's row and the saved one", r.after)
		}
		if r.step.outcome != judge.Verified {
			t.Errorf("step %s; want VERIFIED", r.step)
		}
	})

	t.Run("empty list rendered after the first look", func(t *testing.T) {
		a.AddPatient("late-empty")
		c := adapterClient(t, request(t, a.section(), "late-empty", recordapp.ReaderPassword))
		a.SetFaults(late)
		defer a.SetFaults(recordapp.Faults{})
		r := capture(t, c, true, 20*time.Second)
		if !r.Reachable || len(r.Records) != 0 {
			t.Fatalf("read = %+v; want a successful read of no records (the empty state was shown)", r)
		}
	})

	never := recordapp.Faults{NeverRender: true}
	for _, tt := range []struct {
		name  string
		fresh bool
		save  func(ac *actor, p string, colleague int)
	}{
		{"saved, list never rendered", false, correct},
		// The save failed and the page then never renders its (empty)
		// list: only its empty state could say that nothing was written.
		{"nothing saved, list never rendered", true, func(*actor, string, int) {}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := scenario{name: tt.name, fresh: tt.fresh, save: tt.save, after: never}.run(t, a, strings.ReplaceAll(tt.name, " ", "-"))
			if !r.before.Reachable {
				t.Fatalf("before read unusable: %s", r.before.Reason)
			}
			if r.after.Reachable {
				t.Fatalf("the after read passed as usable with %d records; a page that never rendered its list must be unusable", len(r.after.Records))
			}
			if !strings.Contains(r.after.Reason, "never showed rows nor its empty state") || !strings.Contains(r.after.Reason, "row_selector tr.encounter") {
				t.Errorf("reason %q; want it to say the page never showed rows (row_selector tr.encounter) nor its empty state", r.after.Reason)
			}
			for _, v := range r.step.verdicts {
				if v.Decision != judge.Indeterminate || v.Class != judge.ClassUnavailable {
					t.Errorf("verdict %s/%s; want INDETERMINATE/unavailable", v.Decision, v.Class)
				}
			}
			if r.step.outcome != judge.ReconciliationRequired {
				t.Errorf("outcome %s; want RECONCILIATION_REQUIRED (never HALTED_BEFORE_EFFECT, which invites a retry)", r.step.outcome)
			}
		})
	}
}
