package uireadback

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
)

// The intended save of every scenario: one new triage encounter.
const (
	savedNote = "Follow-up in 2 weeks"
	savedDate = "2026-05-06"
)

func intended(patient string) recordapp.Encounter {
	return recordapp.Encounter{PatientID: patient, Type: "Triage", Note: savedNote, Date: savedDate}
}

// scenario is one run of the step: a patient with a colleague's earlier
// encounter, a read before, the automation's save (which its own screen
// shows as saved), a read after, and the daemon's judge.
type scenario struct {
	name string
	// note is the run's note parameter; savedNote when empty.
	note string
	// fresh patients start with no encounters at all.
	fresh bool
	// save is what actually landed. colleague is the id of the colleague's
	// earlier row (0 for a fresh patient).
	save func(ac *actor, patient string, colleague int)
	// before is a display fault in place from the start; after one that
	// appears after the save.
	before, after recordapp.Faults
	password      string
	timeout       time.Duration
}

type scenarioResult struct {
	before, after read
	step          stepVerdict
}

func (sc scenario) run(t *testing.T, a *app, patient string) scenarioResult {
	t.Helper()
	note := sc.note
	if note == "" {
		note = savedNote
	}
	ac := signInActor(t, a)
	colleague := 0
	if !sc.fresh {
		colleague = ac.save(recordapp.Encounter{PatientID: patient, Type: "Vitals", Note: "BP 120/80, pulse 72 (colleague)", Date: "2026-05-05"})
	} else {
		a.AddPatient(patient)
	}
	password := sc.password
	if password == "" {
		password = recordapp.ReaderPassword
	}
	c := adapterClient(t, request(t, a.section(), patient, password))
	timeout := sc.timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	a.SetFaults(sc.before)
	var res scenarioResult
	// The scenario's timeout is for the after read, which its faults slow
	// down; the before read must be usable (or refused for its own reason),
	// so on a loaded machine one that timed out is made again with more
	// time.
	res.before = mustPatientCapture(t, c, false, max(timeout, 20*time.Second))
	sc.save(ac, patient, colleague)
	a.SetFaults(sc.after)
	if sc.timeout != 0 {
		// A scenario with its own timeout tests that the after read times
		// out: no second chance.
		res.after = capture(t, c, true, timeout)
	} else {
		res.after = mustPatientCapture(t, c, true, timeout)
	}
	a.SetFaults(recordapp.Faults{})
	res.step = judgeStep(t, c, map[string]string{"patient_id": patient, "note": note}, res.before, res.after)
	return res
}

// TestCorrectSavesConfirm: every correct save is CONFIRMED and the step
// VERIFIED.
func TestCorrectSavesConfirm(t *testing.T) {
	a := startApp(t)
	saveAs := func(note string) func(*actor, string, int) {
		return func(ac *actor, p string, _ int) {
			e := intended(p)
			e.Note = note
			ac.save(e)
		}
	}
	tests := []scenario{
		{name: "new triage row", save: saveAs(savedNote)},
		{name: "first row of a patient with none", fresh: true, save: saveAs(savedNote)},
		{name: "markup characters in the note", note: `Check BP <140/90> & "review"`, save: saveAs(`Check BP <140/90> & "review"`)},
		{name: "non-ASCII note", note: "Zoë: naïve reaction, café", save: saveAs("Zoë: naïve reaction, café")},
	}
	confirmed := 0
	for i, sc := range tests {
		t.Run(sc.name, func(t *testing.T) {
			r := sc.run(t, a, "c"+string(rune('a'+i)))
			if !r.before.Reachable || !r.after.Reachable {
				t.Fatalf("reads: before %v %q, after %v %q", r.before.Reachable, r.before.Reason, r.after.Reachable, r.after.Reason)
			}
			if got, want := r.step.String(), "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"; got != want {
				t.Errorf("step = %s\nwant   %s\nafter: %v", got, want, r.after.Records)
				return
			}
			confirmed++
		})
	}
	t.Logf("correct saves confirmed: %d/%d", confirmed, len(tests))
}

// TestFaultListCaught: the seven wrong saves that the acting screen shows as
// saved. None may be CONFIRMED; every REFUTED verdict classes as
// conflicting (the adapter declares that absence on a record page is not
// proof), so no step ends HALTED_BEFORE_EFFECT.
func TestFaultListCaught(t *testing.T) {
	a := startApp(t)
	tests := []struct {
		scenario
		want string
	}{
		{scenario{name: "wrong value", save: func(ac *actor, p string, _ int) {
			e := intended(p)
			e.Note = "Follow-up in 3 weeks"
			ac.save(e)
		}}, "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
		{scenario{name: "blank field", save: func(ac *actor, p string, _ int) {
			e := intended(p)
			e.Note = ""
			ac.save(e)
		}}, "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
		{scenario{name: "missing row", save: func(*actor, string, int) {}},
			"RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER REFUTED/conflicting/FIELD_NO_MATCH"},
		{scenario{name: "duplicate row", save: func(ac *actor, p string, _ int) {
			ac.save(intended(p))
			ac.save(intended(p))
		}}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_OVER REFUTED/conflicting/FIELD_AMBIGUOUS"},
		{scenario{name: "row of another patient", save: func(ac *actor, p string, _ int) {
			ac.save(intended(p + "-other"))
		}}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER REFUTED/conflicting/FIELD_NO_MATCH"},
		{scenario{name: "colleague's row overwritten (lost update)", save: func(ac *actor, p string, colleague int) {
			ac.remove(colleague)
			ac.save(intended(p))
		}}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COLLATERAL_LOSS CONFIRMED/confirmed/FIELD_EQUAL"},
		{scenario{name: "save to the wrong record", save: func(ac *actor, p string, colleague int) {
			e := intended(p)
			e.ID = colleague
			ac.update(e)
		}}, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER+EXISTING_RECORD_CHANGED CONFIRMED/confirmed/FIELD_EQUAL"},
	}
	caught := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.run(t, a, "w"+string(rune('a'+i)))
			if !r.before.Reachable || !r.after.Reachable {
				t.Fatalf("reads: before %v %q, after %v %q", r.before.Reachable, r.before.Reason, r.after.Reachable, r.after.Reason)
			}
			got := r.step.String()
			if got != tt.want {
				t.Errorf("step = %s\nwant   %s\nbefore: %v\nafter:  %v", got, tt.want, r.before.Records, r.after.Records)
			}
			refuted := false
			for _, v := range r.step.verdicts {
				if v.Decision == judge.Refuted {
					refuted = true
					if v.Class != judge.ClassConflicting {
						t.Errorf("a REFUTED verdict classes as %s; a record page's refutation must be conflicting", v.Class)
					}
				}
			}
			if r.step.outcome == judge.Verified || r.step.outcome == judge.HaltedBeforeEffect || !refuted {
				t.Errorf("the wrong save was not caught as a reconciliation: %s", got)
				return
			}
			caught++
		})
	}
	t.Logf("fault list caught: %d/%d", caught, len(tests))
}

// TestDisplayProbesStop: a correct save whose record page displays badly
// must stop (INDETERMINATE), never pass.
func TestDisplayProbesStop(t *testing.T) {
	a := startApp(t)
	correct := func(ac *actor, p string, _ int) { ac.save(intended(p)) }
	tests := []struct {
		scenario
		// beforeStops: the fault is there from the start, so the baseline
		// read already stops and the daemon refuses to begin: nothing is
		// written.
		beforeStops bool
		reason      string
	}{
		{scenario{name: "text the page shortens", save: correct, after: recordapp.Faults{ShortenNotes: "marker"}}, false, "truncation marker"},
		{scenario{name: "replica slower than the timeout", save: correct, after: recordapp.Faults{ReplicaDelayMS: 6000}, timeout: 4 * time.Second}, false, "timed out"},
		{scenario{name: "redesign breaks the selectors", save: correct, after: recordapp.Faults{Redesign: true}}, false, "no longer has the structure"},
		{scenario{name: "page posts when it loads", save: correct, before: recordapp.Faults{PostOnLoad: true}, after: recordapp.Faults{PostOnLoad: true}}, true, "non-read request"},
		{scenario{name: "wrong read-back password", save: correct, password: "not-the-password"}, true, "restore the account's access"},
	}
	stopped := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.run(t, a, "d"+string(rune('a'+i)))
			if r.before.Reachable == tt.beforeStops {
				t.Errorf("before read reachable = %v (%q); want %v", r.before.Reachable, r.before.Reason, !tt.beforeStops)
			}
			if r.after.Reachable {
				t.Fatalf("the after read passed as usable with %d records; the probe must stop it", len(r.after.Records))
			}
			if !strings.Contains(r.after.Reason, tt.reason) || !strings.HasPrefix(r.after.Reason, "record page read in a separate session: ") {
				t.Errorf("reason %q; want it to say it is a record page read and mention %q", r.after.Reason, tt.reason)
			}
			for _, v := range r.step.verdicts {
				if v.Decision != judge.Indeterminate {
					t.Errorf("verdict %s/%s; want INDETERMINATE", v.Decision, v.Class)
				}
			}
			if r.step.outcome != judge.ReconciliationRequired {
				t.Errorf("outcome %s; want RECONCILIATION_REQUIRED", r.step.outcome)
				return
			}
			stopped++
		})
	}
	t.Logf("display probes stopped: %d/%d", stopped, len(tests))
}

// TestUnusablePages: the other pages the adapter must refuse to read as a
// record, each with its reason.
func TestUnusablePages(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(intended("u1"))
	ac.save(recordapp.Encounter{PatientID: "u1", Type: "Vitals", Note: "Patient reports chest pain after exercise", Date: "2026-05-05"})
	a.AddPatient("u-empty")
	tests := []struct {
		name    string
		patient string
		faults  recordapp.Faults
		edit    func(sec map[string]any)
		reason  string
	}{
		{"another record's page", "u1", recordapp.Faults{ShowPatient: "u2"}, nil, "another record's"},
		{"no readable identifier", "u1", recordapp.Faults{HideIdentity: true}, nil, "no readable identifier"},
		{"record that does not exist", "u-missing", recordapp.Faults{}, nil, "does not exist"},
		{"shortened without a marker", "u1", recordapp.Faults{ShortenNotes: "cut"}, nil, "shortened value"},
		{"application down", "u1", recordapp.Faults{Down: true}, nil, "HTTP 503"},
		{"empty page without empty_selector", "u-empty", recordapp.Faults{}, func(sec map[string]any) { delete(inner(sec), "empty_selector") }, "declare empty_selector"},
		{"invalid selector", "u1", recordapp.Faults{}, func(sec map[string]any) { inner(sec)["row_selector"] = "tr[" }, "could not evaluate the configured selectors"},
		{"date that does not parse", "u1", recordapp.Faults{}, func(sec map[string]any) {
			inner(sec)["fields"].(map[string]any)["date"] = map[string]any{"selector": "td.date", "date_format": "%Y-%m-%d"}
		}, "does not parse with date_format"},
		{"field element missing", "u1", recordapp.Faults{}, func(sec map[string]any) {
			inner(sec)["fields"].(map[string]any)["note"] = map[string]any{"selector": "td.notes"}
		}, "td.notes matches nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := a.section()
			if tt.edit != nil {
				tt.edit(sec)
			}
			c := adapterClient(t, request(t, sec, tt.patient, recordapp.ReaderPassword))
			a.SetFaults(tt.faults)
			defer a.SetFaults(recordapp.Faults{})
			r := capture(t, c, true, 20*time.Second)
			if r.Reachable {
				t.Fatalf("read as usable with records %v", r.Records)
			}
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("reason %q; want it to mention %q", r.Reason, tt.reason)
			}
			v := judgeStep(t, c, map[string]string{"patient_id": tt.patient, "note": savedNote}, read{Reachable: true}, r)
			for _, e := range v.verdicts {
				if e.Decision != judge.Indeterminate || e.Class != judge.ClassUnavailable {
					t.Errorf("verdict %s/%s; want INDETERMINATE/unavailable", e.Decision, e.Class)
				}
			}
		})
	}

	// The mitigation the docs recommend: a note read from its title
	// attribute is whole although the page shortens its text.
	t.Run("shortened text read from the title attribute", func(t *testing.T) {
		sec := a.section()
		inner(sec)["fields"].(map[string]any)["note"] = map[string]any{"selector": "td.note", "attribute": "title"}
		c := adapterClient(t, request(t, sec, "u1", recordapp.ReaderPassword))
		a.SetFaults(recordapp.Faults{ShortenNotes: "marker"})
		defer a.SetFaults(recordapp.Faults{})
		r := capture(t, c, true, 20*time.Second)
		if !r.Reachable || len(r.Records) != 2 || r.Records[1]["note"] != "Patient reports chest pain after exercise" {
			t.Errorf("read = %+v; want both rows with the whole note", r)
		}
	})
}

// TestRecordShape: what one row becomes: attribute, casefolded text, a
// date read with date_format in ISO form, collapsed whitespace, and the
// identity field from the page.
func TestRecordShape(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	id := ac.save(recordapp.Encounter{PatientID: "s 1;ä", Type: "Triage", Note: "  two\n\tspaces   here ", Date: "2026-12-31"})
	c := adapterClient(t, request(t, a.section(), "s 1;ä", recordapp.ReaderPassword))
	r := capture(t, c, false, 20*time.Second)
	if !r.Reachable {
		t.Fatal(r.Reason)
	}
	if len(r.Records) != 1 {
		t.Fatalf("records %v", r.Records)
	}
	got := r.Records[0]
	want := map[string]string{"id": strconv.Itoa(id), "type": "triage", "date": "2026-12-31", "note": "two spaces here", "patient_id": "s 1;ä"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v; want %#v (record %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("record has fields %v; want exactly %v", got, want)
	}
}
