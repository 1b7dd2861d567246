package onscreen

import (
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/judge"
)

// listDelay is how long after loading the list page the application
// renders its rows or its empty state in TestListRenderedLate: longer than
// the read's first look (the table is there at once), well inside
// navigation_timeout_s (the default, 10 s).
const listDelay = 1500 * time.Millisecond

// TestListRenderedLate: a list whose rows (or empty state) appear after the
// page has loaded is read once they are shown, at tier 3 and tier 4, and
// with ready_selector once that is shown; a list that never renders is
// unusable (INDETERMINATE), never a read of no record.
func TestListRenderedLate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		tier3 bool
		ready string
	}{
		{"tier 3", true, ""},
		{"tier 4", false, ""},
		{"tier 3 with ready_selector", true, "body[data-loaded]"},
		{"tier 4 with ready_selector", false, "body[data-loaded]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetListDelay(int(listDelay / time.Millisecond))
			rec := typed("late-" + strings.ReplaceAll(tt.name, " ", "-"))
			p := params(rec)
			sec := a.listSection(tt.tier3)
			if tt.ready != "" {
				inner(sec)["ready_selector"] = tt.ready
			}
			c := client(t, request(t, sec, p))
			before := capture(t, c, false)
			effects := sameSurfaceEffects
			if tt.tier3 {
				effects = reopenEffects
				if !before.Reachable || len(before.Records) != 0 {
					t.Fatalf("before the save: %+v; want a reachable read of no record (#empty, rendered late)", before)
				}
			}
			a.fill(t, rec)
			a.showList(t)
			after := capture(t, c, true)
			if !after.Reachable || len(after.Records) != 1 || after.Records[0]["name"] != rec.Name {
				t.Fatalf("after the save: %+v; want the saved row, rendered late", after)
			}
			checkCodes(t, judgeStep(t, c, effects, p, before, after), judge.Verified,
				[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"})
		})
	}

	for _, tt := range []struct {
		name, ready, reason string
	}{
		{"never rendered", "", "never showed rows (row_selector tr.row) nor its empty state (absent_selector #empty)"},
		{"never ready", "body[data-loaded]", "never showed ready_selector body[data-loaded] and then rows"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			rec := typed("never-" + strings.ReplaceAll(tt.name, " ", "-"))
			p := params(rec)
			sec := a.listSection(true)
			inner(sec)["navigation_timeout_s"] = 3
			if tt.ready != "" {
				inner(sec)["ready_selector"] = tt.ready
			}
			c := client(t, request(t, sec, p))
			before := capture(t, c, false)
			a.fill(t, rec)
			a.SetListDelay(screenapp.ListNeverRenders)
			after := capture(t, c, true)
			if after.Reachable {
				t.Fatalf("after the save: read as usable with %d records; a list that never rendered must be unusable", len(after.Records))
			}
			if !strings.Contains(after.Reason, tt.reason) {
				t.Errorf("reason %q; want it to say %q", after.Reason, tt.reason)
			}
			checkCodes(t, judgeStep(t, c, reopenEffects, p, before, after), judge.ReconciliationRequired,
				[]string{"INDETERMINATE/unavailable/SOR_UNREACHABLE", "INDETERMINATE/unavailable/SOR_UNREACHABLE"})
		})
	}
}
