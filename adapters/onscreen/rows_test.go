package onscreen

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/judge"
)

// listSection reads the application's list of records, one record per
// visible table row (row_selector), its fields inside the row. At tier 3
// it re-opens the list, whose #empty says there is no record yet; at tier 4
// it reads the list the automation's tab shows.
func (a *app) listSection(tier3 bool) map[string]any {
	sec := map[string]any{
		"screen":       map[string]any{"cdp_url": cdpURL, "page_url_prefix": a.URL + "/"},
		"row_selector": "tr.row",
		"fields": []any{
			map[string]any{"param": "name", "selector": "td.name"},
			map[string]any{"param": "amount", "selector": "td.amount"},
		},
	}
	if tier3 {
		sec["renavigate"] = []any{
			map[string]any{"open": a.URL + "/list"},
			map[string]any{"wait": map[string]any{"selector": "#records"}},
		}
		sec["absent_selector"] = "#empty"
	} else {
		sec["same_surface"] = true
	}
	return map[string]any{"kind": Kind, "onscreen": sec}
}

// showList points the automation's tab at the list of records, as an
// application that lands there after a save.
func (a *app) showList(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(a.tab, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(a.URL+"/list")); err != nil {
		t.Fatal(err)
	}
}

// checkCodes checks each effect's decision, class and reason codes
// (decision/class/CODE+CODE).
func checkCodes(t *testing.T, got stepVerdict, outcome judge.Outcome, want []string) {
	t.Helper()
	if got.outcome != outcome {
		t.Errorf("outcome %s; want %s (%s)", got.outcome, outcome, got)
	}
	for k, w := range want {
		v := got.verdicts[k]
		if g := fmt.Sprintf("%s/%s/%s", v.Decision, v.Class, strings.Join(v.Codes(), "+")); g != w {
			t.Errorf("effect %d: %s; want %s (%s)", k, g, w, got)
		}
	}
}

// TestRowsVerdicts: with row_selector every visible row of the screen is a
// record, so a double submit that the screen plainly shows as two rows is
// refuted (COUNT_OVER), at tier 3 (count_new_only on a list that had no
// rows at Begin) and at tier 4 (record_written on the list the save left).
// An honest save confirms: the hidden template row the list keeps is not
// on screen and is not counted.
func TestRowsVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		tier3   bool
		mode    string
		outcome judge.Outcome
		want    []string
	}{
		{"tier 3 honest save", true, screenapp.Honest, judge.Verified,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}},
		{"tier 3 double submit", true, screenapp.Duplicate, judge.ReconciliationRequired,
			[]string{"REFUTED/conflicting/COUNT_OVER", "REFUTED/conflicting/FIELD_AMBIGUOUS"}},
		{"tier 4 honest save", false, screenapp.Honest, judge.Verified,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}},
		{"tier 4 double submit", false, screenapp.Duplicate, judge.ReconciliationRequired,
			[]string{"REFUTED/conflicting/COUNT_OVER", "REFUTED/conflicting/FIELD_AMBIGUOUS"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(tt.mode)
			rec := typed(fmt.Sprintf("rows-%d", i))
			p := params(rec)
			c := client(t, request(t, a.listSection(tt.tier3), p))
			before := capture(t, c, false)
			effects := sameSurfaceEffects
			if tt.tier3 {
				effects = reopenEffects
				if !before.Reachable || len(before.Records) != 0 {
					t.Fatalf("before the save: %+v; want a reachable read of no record (#empty)", before)
				}
			}
			a.fill(t, rec)
			a.showList(t)
			after := capture(t, c, true)
			wantRows := 1
			if tt.mode == screenapp.Duplicate {
				wantRows = 2
			}
			if !after.Reachable || len(after.Records) != wantRows {
				t.Fatalf("after the save: %+v; want %d records, one per visible row", after, wantRows)
			}
			for _, r := range after.Records {
				if r["id"] != "/list" || r["name"] != rec.Name || r["amount"] != rec.Amount {
					t.Errorf("row record %v; want id /list and the typed values", r)
				}
			}
			checkCodes(t, judgeStep(t, c, effects, p, before, after), tt.outcome, tt.want)
		})
	}
}

// TestRowsWithoutRowSelector: without row_selector a field whose selector
// matches two elements on the screen makes the read unusable
// (INDETERMINATE, the reason naming row_selector), never a read of the
// first; one visible match beside a hidden one reads as before.
func TestRowsWithoutRowSelector(t *testing.T) {
	for _, mode := range []string{screenapp.Honest, screenapp.Duplicate} {
		t.Run(mode, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(mode)
			rec := typed("norow-" + mode)
			p := params(rec)
			sec := a.listSection(false)
			delete(inner(sec), "row_selector")
			c := client(t, request(t, sec, p))
			before := capture(t, c, false)
			a.fill(t, rec)
			a.showList(t)
			after := capture(t, c, true)
			got := judgeStep(t, c, sameSurfaceEffects, p, before, after)
			if mode == screenapp.Honest {
				checkCodes(t, got, judge.Verified, []string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"})
				return
			}
			checkCodes(t, got, judge.ReconciliationRequired, []string{"INDETERMINATE/unavailable/SOR_UNREACHABLE", "INDETERMINATE/unavailable/SOR_UNREACHABLE"})
			if !strings.Contains(after.Reason, "matches 2 elements") || !strings.Contains(after.Reason, "row_selector") {
				t.Errorf("reason %q; want the two matches counted and row_selector named", after.Reason)
			}
		})
	}
}

// editSection re-opens the record's edit form, whose controls show the
// values: an input, a select (its option labelled "born ...", its value the
// date) and a textarea.
func (a *app) editSection() map[string]any {
	return map[string]any{
		"kind": Kind,
		"onscreen": map[string]any{
			"screen": map[string]any{"cdp_url": cdpURL, "page_url_prefix": a.URL + "/"},
			"renavigate": []any{
				map[string]any{"open": a.URL + "/edit/{ref}"},
				map[string]any{"wait": map[string]any{"selector": "#edit"}},
			},
			"absent_selector": "#not-found",
			"fields": []any{
				map[string]any{"param": "name", "selector": "#e-name"},
				map[string]any{"param": "born", "selector": "#e-born"},
				map[string]any{"param": "amount", "selector": "#e-amount"},
			},
		},
	}
}

// TestFormControls: input, select and textarea are read by their value (a
// control's displayed text is empty), so an honest save confirms and a
// stored wrong name in an input is refuted; a select's option reads as the
// run's value when its value is, whatever its label. A password input and
// a checkbox are never read: the read is unusable, the password unquoted.
func TestFormControls(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		outcome judge.Outcome
		want    []string
	}{
		{"honest save", screenapp.Honest, judge.Verified,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "CONFIRMED/confirmed/FIELD_EQUAL"}},
		{"wrong value stored", screenapp.WrongValue, judge.ReconciliationRequired,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "REFUTED/conflicting/FIELD_MISMATCH"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(tt.mode)
			rec := typed(fmt.Sprintf("form-%d", i))
			p := params(rec)
			c := client(t, request(t, a.editSection(), p))
			before := capture(t, c, false)
			if !before.Reachable || len(before.Records) != 0 {
				t.Fatalf("before the save: %+v; want a reachable read of no record", before)
			}
			a.fill(t, rec)
			after := capture(t, c, true)
			if !after.Reachable || len(after.Records) != 1 {
				t.Fatalf("after the save: %+v; want one record", after)
			}
			if r := after.Records[0]; r["born"] != rec.Born || r["amount"] != rec.Amount {
				t.Errorf("record %v; want the select read as its value and the textarea as its text", r)
			}
			checkCodes(t, judgeStep(t, c, reopenEffects, p, before, after), tt.outcome, tt.want)
		})
	}
	for _, tt := range []struct{ selector, reason string }{
		{"#e-pass", "password input"},
		{"#e-keep", "checkbox"},
	} {
		t.Run(tt.selector, func(t *testing.T) {
			a := startApp(t)
			rec := typed("form-" + strings.TrimPrefix(tt.selector, "#"))
			a.Put(rec)
			sec := a.editSection()
			inner(sec)["fields"] = []any{map[string]any{"param": "name", "selector": tt.selector}}
			got := capture(t, client(t, request(t, sec, params(rec))), true)
			if got.Reachable || !strings.Contains(got.Reason, tt.reason) || strings.Contains(got.Reason, "hunter2") {
				t.Errorf("read %+v; want unusable, naming the %s, never quoting its value", got, tt.reason)
			}
		})
	}
}

// TestRowsFieldInsideRow: inside a row a field is read from the elements
// its selector matches there that are on screen. A hidden cell that holds
// the typed value (a draft column) beside the visible cell that shows what
// was stored is never read, so a wrong stored name is refuted, not
// confirmed from the hidden cell; two visible matches in one row make the
// read unusable (INDETERMINATE), never a read of the first.
func TestRowsFieldInsideRow(t *testing.T) {
	tests := []struct {
		name, style string
		outcome     judge.Outcome
		want        []string
	}{
		{"hidden cell", "display:none", judge.ReconciliationRequired,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "REFUTED/conflicting/FIELD_MISMATCH"}},
		{"invisible cell", "visibility:hidden", judge.ReconciliationRequired,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "REFUTED/conflicting/FIELD_MISMATCH"}},
		{"transparent cell", "opacity:0", judge.ReconciliationRequired,
			[]string{"CONFIRMED/confirmed/COUNT_EXACT", "REFUTED/conflicting/FIELD_MISMATCH"}},
		{"two visible cells", "", judge.ReconciliationRequired,
			[]string{"INDETERMINATE/unavailable/SOR_UNREACHABLE", "INDETERMINATE/unavailable/SOR_UNREACHABLE"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(screenapp.WrongValue)
			rec := typed(fmt.Sprintf("inrow-%d", i))
			p := params(rec)
			c := client(t, request(t, a.listSection(false), p))
			before := capture(t, c, false)
			a.fill(t, rec)
			a.showList(t)
			// Every row gets a cell of the field's selector before the
			// visible one, holding the typed name.
			script := fmt.Sprintf(`(function () {
				var rows = document.querySelectorAll("tr.row");
				for (var i = 0; i < rows.length; i++) {
					var td = document.createElement("td");
					td.className = "name";
					td.setAttribute("style", %q);
					td.textContent = %q;
					rows[i].insertBefore(td, rows[i].firstChild);
				}
				return rows.length;
			})()`, tt.style, rec.Name)
			ctx, cancel := context.WithTimeout(a.tab, 10*time.Second)
			defer cancel()
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](script)); err != nil {
				t.Fatal(err)
			}
			after := capture(t, c, true)
			if tt.style == "" && (after.Reachable || !strings.Contains(after.Reason, "matches 2 elements")) {
				t.Errorf("after: %+v; want unusable, the two matches in the row counted", after)
			}
			checkCodes(t, judgeStep(t, c, sameSurfaceEffects, p, before, after), tt.outcome, tt.want)
		})
	}
}

// rowsLossEffects: one record for the run's amount, and no other record
// lost (forbid_collateral_loss, the default, written out).
const rowsLossEffects = `
- kind: record_written
  match: {amount: {param: amount}}
  forbid_collateral_loss: true
`

// TestRowsCollateralLoss: rows of a list share the page's address as their
// id, so a row that vanished between Begin and the read cannot be told
// from one that stayed. A save that replaced another record's row (the
// list showed A at Begin and shows only the new B after) must not be
// CONFIRMED with forbid_collateral_loss: the loss check cannot see it, so
// a list that shows rows is no baseline (unusable before the step), and
// the contract is INDETERMINATE.
func TestRowsCollateralLoss(t *testing.T) {
	a := startApp(t)
	other := screenapp.Record{Ref: "loss-a", Name: "Ada Lovelace", Born: "1815-12-10", Amount: "12.00"}
	a.Put(other)
	rec := typed("loss-b")
	p := params(rec)
	c := client(t, request(t, a.listSection(true), p))
	before := capture(t, c, false)
	if before.Reachable || !strings.Contains(before.Reason, "shows 1 row(s) before the step") {
		t.Fatalf("before the save: %+v; want unusable, a list with rows being no baseline", before)
	}
	a.Delete(other.Ref)
	a.fill(t, rec)
	after := capture(t, c, true)
	if !after.Reachable || len(after.Records) != 1 {
		t.Fatalf("after the save: %+v; want the new row only", after)
	}
	got := judgeStep(t, c, rowsLossEffects, p, before, after)
	checkCodes(t, got, judge.ReconciliationRequired, []string{"INDETERMINATE/indeterminate/BASELINE_UNREACHABLE"})
}
