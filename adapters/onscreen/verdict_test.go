package onscreen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// reopenEffects is a tier-3 step's contracts: one new record for the run's
// amount, carrying the typed name. The record page does not exist before
// the save, so the step can make a change claim (count_new_only).
const reopenEffects = `
- kind: record_written
  match: {amount: {param: amount}}
  count_new_only: true
- kind: field_equals
  match: {amount: {param: amount}}
  field: name
  value: {param: name}
`

// sameSurfaceEffects is a tier-4 step's contracts: a screen has no before
// state, so no change claim and no collateral check, only what it shows.
const sameSurfaceEffects = `
- kind: record_written
  match: {amount: {param: amount}}
  forbid_collateral_loss: false
- kind: field_equals
  match: {amount: {param: amount}}
  field: name
  value: {param: name}
`

type stepVerdict struct {
	outcome  judge.Outcome
	verdicts []judge.Verdict
}

func (s stepVerdict) String() string {
	var parts []string
	for _, v := range s.verdicts {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", v.Decision, v.Class, strings.Join(v.Codes(), "+")))
	}
	return string(s.outcome) + " " + strings.Join(parts, " ")
}

func snapshot(r captured) judge.Snapshot {
	s := judge.Snapshot{Reachable: r.Reachable, Reason: r.Reason}
	for _, rec := range r.Records {
		s.Records = append(s.Records, judge.Record(rec))
	}
	return s
}

// judgeStep judges effects on the two reads with the daemon's own judge and
// the AbsenceNotProof the adapter declares, as the daemon does.
func judgeStep(t testing.TB, c *adaptertest.Instance, effects string, p map[string]string, before, after captured) stepVerdict {
	t.Helper()
	info, err := c.GetInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	es, err := judge.ParseEffects([]byte(effects), "effects")
	if err != nil {
		t.Fatal(err)
	}
	var out stepVerdict
	for i, e := range es {
		bound, err := judge.Bind(e, p, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			t.Fatal(err)
		}
		out.verdicts = append(out.verdicts, judge.Judge(bound, snapshot(before), snapshot(after), judge.Options{AbsenceNotProof: info.AbsenceNotProof}))
	}
	out.outcome = judge.OutcomeOf(out.verdicts)
	return out
}

func typed(ref string) screenapp.Record {
	return screenapp.Record{Ref: ref, Name: "Grace Hopper", Born: "1906-12-09", Amount: "4,512.75"}
}

// TestReopenVerdicts: the tier-3 read-back re-opens the record page by the
// run's reference and reads it. An honest save confirms; a save only the
// form showed (optimistic) and a save that stored another name are
// refuted, classed conflicting (absence on a screen is not proof); an
// unreadable region is indeterminate.
func TestReopenVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		edit    func(sec map[string]any)
		outcome judge.Outcome
		want    []string // decision/class per effect
	}{
		{"honest save", screenapp.Honest, nil, judge.Verified, []string{"CONFIRMED/confirmed", "CONFIRMED/confirmed"}},
		{"optimistic save", screenapp.Optimistic, nil, judge.ReconciliationRequired, []string{"REFUTED/conflicting", "REFUTED/conflicting"}},
		{"wrong value stored", screenapp.WrongValue, nil, judge.ReconciliationRequired, []string{"CONFIRMED/confirmed", "REFUTED/conflicting"}},
		{"unreadable region", screenapp.Honest, func(sec map[string]any) {
			// A region of blank screen below the record.
			inner(sec)["fields"].([]any)[0].(map[string]any)["region"] = []int{40, 600, 400, 44}
		}, judge.ReconciliationRequired, []string{"INDETERMINATE/unavailable", "INDETERMINATE/unavailable"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(tt.mode)
			rec := typed(fmt.Sprintf("t3-%d", i))
			sec := a.reopenSection()
			if tt.edit != nil {
				tt.edit(sec)
			}
			p := params(rec)
			c := client(t, request(t, sec, p))
			before := capture(t, c, false)
			if !before.Reachable || len(before.Records) != 0 {
				t.Fatalf("before the save: %+v; want a reachable read of no record", before)
			}
			a.fill(t, rec)
			after := capture(t, c, true)
			got := judgeStep(t, c, reopenEffects, p, before, after)
			checkStep(t, got, tt.outcome, tt.want)
			if tt.name == "unreadable region" && !strings.Contains(after.Reason, "field name") {
				t.Errorf("unreadable read's reason %q does not name the field", after.Reason)
			}
		})
	}
}

// TestSameSurfaceVerdicts: the tier-4 read-back reads the screen the save
// left. It catches a value the save's own screen shows wrong, and cannot
// catch an optimistic save: the screen painted what was typed, so it
// confirms (the limit docs/adapters/onscreen.md states).
func TestSameSurfaceVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		outcome judge.Outcome
		want    []string
	}{
		{"honest save", screenapp.Honest, judge.Verified, []string{"CONFIRMED/confirmed", "CONFIRMED/confirmed"}},
		{"wrong value on the screen", screenapp.WrongValue, judge.ReconciliationRequired, []string{"CONFIRMED/confirmed", "REFUTED/conflicting"}},
		{"optimistic save is not caught", screenapp.Optimistic, judge.Verified, []string{"CONFIRMED/confirmed", "CONFIRMED/confirmed"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startApp(t)
			a.SetMode(tt.mode)
			rec := typed(fmt.Sprintf("t4-%d", i))
			p := params(rec)
			c := client(t, request(t, a.sameSurfaceSection(), p))
			before := capture(t, c, false)
			if before.Reachable {
				t.Fatalf("a same-surface read has no before state, yet CaptureBefore was reachable: %+v", before)
			}
			a.fill(t, rec)
			after := capture(t, c, true)
			got := judgeStep(t, c, sameSurfaceEffects, p, before, after)
			checkStep(t, got, tt.outcome, tt.want)
			if _, stored := a.Get(rec.Ref); tt.mode == screenapp.Optimistic && stored {
				t.Fatal("the optimistic save stored the record; the test proves nothing")
			}
		})
	}
}

func checkStep(t *testing.T, got stepVerdict, outcome judge.Outcome, want []string) {
	t.Helper()
	if got.outcome != outcome {
		t.Errorf("outcome %s; want %s (%s)", got.outcome, outcome, got)
	}
	for k, w := range want {
		v := got.verdicts[k]
		if g := string(v.Decision) + "/" + string(v.Class); g != w {
			t.Errorf("effect %d: %s; want %s (%s)", k, g, w, got)
		}
	}
}
