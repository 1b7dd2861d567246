package onscreen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/judge"
)

// TestReadPostPaths: a record page that renews its session token with a
// POST as it loads, and shows the record only once that succeeded, cannot
// be re-read at tier 3 under the guards (INDETERMINATE, the refused POST
// and read_post_paths named, nothing reaching the application); declared in
// read_post_paths, that one POST goes through and an honest save confirms
// (by OCR and by selector); any other POST the page makes is still refused,
// and so is the declared path with a query it was not declared with.
func TestReadPostPaths(t *testing.T) {
	unusable := []string{"INDETERMINATE/unavailable/SOR_UNREACHABLE", "INDETERMINATE/unavailable/SOR_UNREACHABLE"}
	tests := []struct {
		name     string
		token    int
		declared []any
		outcome  judge.Outcome
		want     []string
		reason   []string // in the after read's reason
		tokens   bool     // whether renewals reach the application
	}{
		{"refresh not declared", screenapp.TokenOnLoad, nil, judge.ReconciliationRequired, unusable,
			[]string{"non-read request", "POST", screenapp.TokenPath, "read_post_paths"}, false},
		{"refresh declared", screenapp.TokenOnLoad, []any{screenapp.TokenPath}, judge.Verified,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}, nil, true},
		{"refresh declared, another POST", screenapp.TokenAndNotice, []any{screenapp.TokenPath}, judge.ReconciliationRequired, unusable,
			[]string{"non-read request", "POST", screenapp.NoticePath}, true},
		// The declared path with a query it was not declared with is
		// another request: refused (before, the path alone was compared).
		{"refresh declared, POST with a query", screenapp.TokenWithQuery, []any{screenapp.TokenPath}, judge.ReconciliationRequired, unusable,
			[]string{"non-read request", "POST", screenapp.TokenPath}, false},
		{"refresh declared with its query", screenapp.TokenWithQuery, []any{screenapp.TokenPath + "?" + screenapp.TokenQuery}, judge.Verified,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}, nil, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetTokenRefresh(tt.token)
			rec := typed(fmt.Sprintf("token-%d", i))
			p := params(rec)
			sec := a.reopenSection()
			if tt.declared != nil {
				inner(sec)["read_post_paths"] = tt.declared
			}
			c := client(t, request(t, sec, p))
			before := capture(t, c, false)
			if !before.Reachable || len(before.Records) != 0 {
				t.Fatalf("before the save: %+v; want a reachable read of no record", before)
			}
			a.fill(t, rec)
			after := capture(t, c, true)
			checkCodes(t, judgeStep(t, c, reopenEffects, p, before, after), tt.outcome, tt.want)
			for _, w := range tt.reason {
				if !strings.Contains(after.Reason, w) {
					t.Errorf("reason %q; want it to name %q", after.Reason, w)
				}
			}
			time.Sleep(200 * time.Millisecond)
			if n := a.Posts(); n != 1 {
				t.Errorf("the application received %d POSTs besides token renewals; want the automation's one save", n)
			}
			if n := a.Tokens(); (n > 0) != tt.tokens {
				t.Errorf("%d token renewals reached the application; want some: %v", n, tt.tokens)
			}
		})
	}
}
