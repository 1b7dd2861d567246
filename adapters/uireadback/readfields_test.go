package uireadback

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// captureFor reads once through c, after the automation acted, with the
// contracts' read fields and values as the daemon sends them.
func captureFor(t *testing.T, c *adaptertest.Instance, fields []string, expected map[string][]string) read {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	capt, err := c.CaptureAfter(ctx, sdk.CaptureRequest{CaptureID: "fields", Timeout: 20 * time.Second, EffectKind: "record_written",
		IdentityField: "id", ReadFields: fields, ExpectedValues: expected})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := capt.Records()
	if err != nil {
		t.Fatal(err)
	}
	return read{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}
}

// TestTruncationOnlyInReadFields: with the section's default markers, a
// "..." in a field no contract of the read looks at (the note, for a
// contract that counts triage rows) no longer makes the read unusable, nor
// does a date that does not parse in an unread date field; the same value
// in a field a contract reads still does, and so does every field when the
// daemon sends no list (an older daemon) or the contracts read a field the
// page does not carry.
func TestTruncationOnlyInReadFields(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(recordapp.Encounter{PatientID: "rf1", Type: "Triage", Note: "Call back... maybe", Date: "soon"})
	c := adapterClient(t, request(t, a.section(), "rf1", recordapp.ReaderPassword))
	params := map[string]string{"patient_id": "rf1"}
	const countOnly = "- kind: record_written\n  match: {patient_id: {param: patient_id}, type: triage}\n"
	countFields := []string{"patient_id", "type"}
	countValues := map[string][]string{"patient_id": {"rf1"}, "type": {"triage"}}

	r := captureFor(t, c, countFields, countValues)
	if !r.Reachable || len(r.Records) != 1 {
		t.Fatalf("a count of triage rows: %v %q %v; want the one row, read", r.Reachable, r.Reason, r.Records)
	}
	if rec := r.Records[0]; rec["note"] != "Call back... maybe" || rec["date"] != "soon" {
		t.Errorf("unread fields reported as %q, %q; want them as shown", rec["note"], rec["date"])
	}
	if got := judgeEffects(t, c, countOnly, params, read{Reachable: true}, r).String(); got != "VERIFIED CONFIRMED/confirmed/COUNT_EXACT" {
		t.Errorf("step = %s", got)
	}

	unusableRead := []struct {
		name, why string
		fields    []string
	}{
		{"a contract reads the note", "field note: the value contains the truncation marker", []string{"patient_id", "type", "note"}},
		{"a contract reads the date", "field date: the value does not parse with date_format", []string{"patient_id", "type", "date"}},
		{"no list (an older daemon)", "field date: the value does not parse with date_format", nil},
		{"a field the page does not carry", "field date: the value does not parse with date_format", []string{"patient_id", "type", "ticket"}},
	}
	for _, tt := range unusableRead {
		t.Run(tt.name, func(t *testing.T) {
			r := captureFor(t, c, tt.fields, countValues)
			if r.Reachable || !strings.Contains(r.Reason, tt.why) {
				t.Fatalf("read %v %q; want unusable: %s", r.Reachable, r.Reason, tt.why)
			}
			unavailable(t, judgeEffects(t, c, countOnly, params, read{Reachable: true}, r))
		})
	}
}

// TestContractLiteralsSpelling: two contracts read together (so the
// daemon sends no selector) write their values as literals: the type in
// capitals where the page casefolds it, the date as the page shows it.
// With the values the daemon now sends, the honest save is CONFIRMED and a
// save of another date is still REFUTED; without them (an older daemon)
// the literals could not be respelled and the honest save failed.
func TestContractLiteralsSpelling(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	const effects = `
- kind: record_written
  match: {patient_id: {param: patient_id}, type: Triage}
- kind: field_equals
  match: {patient_id: {param: patient_id}, type: Triage}
  field: date
  value: 06/05/2026
`
	fields := []string{"patient_id", "type", "date"}
	tests := []struct {
		patient, date string
		values        bool // the daemon sends the contracts' values
		want          string
	}{
		{"ls1", "2026-05-06", true, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT CONFIRMED/confirmed/FIELD_EQUAL"},
		{"ls2", "2026-05-07", true, "RECONCILIATION_REQUIRED CONFIRMED/confirmed/COUNT_EXACT REFUTED/conflicting/FIELD_MISMATCH"},
		{"ls3", "2026-05-06", false, "RECONCILIATION_REQUIRED REFUTED/conflicting/COUNT_UNDER REFUTED/conflicting/FIELD_NO_MATCH"},
	}
	for _, tt := range tests {
		t.Run(tt.patient, func(t *testing.T) {
			ac.save(recordapp.Encounter{PatientID: tt.patient, Type: "Triage", Note: savedNote, Date: tt.date})
			c := adapterClient(t, request(t, a.section(), tt.patient, recordapp.ReaderPassword))
			var expected map[string][]string
			rf := fields
			if tt.values {
				expected = map[string][]string{"patient_id": {tt.patient}, "type": {"Triage"}, "date": {"06/05/2026"}}
			} else {
				rf = nil
			}
			r := captureFor(t, c, rf, expected)
			if !r.Reachable {
				t.Fatalf("read: %q", r.Reason)
			}
			got := judgeEffects(t, c, effects, map[string]string{"patient_id": tt.patient}, read{Reachable: true}, r).String()
			if got != tt.want {
				t.Errorf("step = %s\nwant   %s\nafter: %v", got, tt.want, r.Records)
			}
		})
	}
}

// TestSpellingsFromDaemon: with the contracts' values sent by the daemon,
// a value read is reported in the one of them that normalises to it, a
// literal included; the run's parameters and the selector are no longer
// consulted; values that disagree leave the value as read.
func TestSpellingsFromDaemon(t *testing.T) {
	layout, iso, err := dateLayout("%d/%m/%Y")
	if err != nil {
		t.Fatal(err)
	}
	typ := field{name: "type", selector: "td", casefold: true}
	date := field{name: "date", selector: "td", layout: layout, isoLayout: iso}
	note := field{name: "note", selector: "td"}
	sp := spellings{
		daemon:   true,
		params:   map[string]string{"t": "TRIAGE", "n": "x  y"},
		selector: map[string]string{"type": "TriAge"},
		expected: map[string][]string{"type": {"Triage"}, "date": {"06/05/2026", "2026-05-07"}, "note": {"a  b", "a b "}},
	}
	tests := []struct {
		f          field
		read, want string
	}{
		{typ, "triage", "Triage"},
		{typ, "vitals", "vitals"},
		{date, "2026-05-06", "06/05/2026"},
		{date, "2026-05-07", "2026-05-07"},
		{date, "2026-05-08", "2026-05-08"},
		{note, "a b", "a b"}, // two values disagree
		{note, "x y", "x y"}, // a parameter no contract compares the note with
	}
	for _, tt := range tests {
		if got := sp.of(tt.f.name, tt.read, tt.f.expected, sp.candidates(tt.f.expected)); got != tt.want {
			t.Errorf("%s read %q = %q; want %q", tt.f.name, tt.read, got, tt.want)
		}
	}
}

// TestReadFieldsSet: the fields whose own checks apply.
func TestReadFieldsSet(t *testing.T) {
	s := &settings{fields: []field{{name: "date"}, {name: "note"}, {name: "type"}}, identity: identity{field: "patient_id"}}
	tests := []struct {
		fields  []string
		checked []string // of date, note, type
	}{
		{nil, []string{"date", "note", "type"}},
		{[]string{"patient_id", "type"}, []string{"type"}},
		{[]string{"note", "date"}, []string{"date", "note"}},
		{[]string{"type", "ticket"}, []string{"date", "note", "type"}},
	}
	for _, tt := range tests {
		b := *s
		b.read = readFields(s, tt.fields)
		var got []string
		for _, f := range s.fields {
			if b.checks(f.name) {
				got = append(got, f.name)
			}
		}
		if strings.Join(got, ",") != strings.Join(tt.checked, ",") {
			t.Errorf("read fields %v check %v; want %v", tt.fields, got, tt.checked)
		}
	}
}

// TestRowsSharingTheIdentity: every row takes the page's identifier as
// identity.field, so when the contracts identify records by that field the
// rows cannot be told apart and a lost row would hide beside an added one:
// a page with several rows is then unusable, while one row, or contracts
// identifying records by another field, still read. The same holds for a
// casefolded field: "ab" and "AB" are two records.
func TestRowsSharingTheIdentity(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(recordapp.Encounter{PatientID: "si1", Type: "Triage", Note: "first", Date: "2026-05-06"})
	c := adapterClient(t, request(t, a.section(), "si1", recordapp.ReaderPassword))
	capture := func(identityField string) read {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		capt, err := c.CaptureAfter(ctx, sdk.CaptureRequest{CaptureID: "ident", Timeout: 20 * time.Second, EffectKind: "record_written", IdentityField: identityField})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := capt.Records()
		if err != nil {
			t.Fatal(err)
		}
		return read{Reachable: capt.Reachable, Reason: capt.Reason, Records: recs}
	}
	if r := capture("patient_id"); !r.Reachable || len(r.Records) != 1 {
		t.Fatalf("one row identified by patient_id: %v %q %d records; want it read", r.Reachable, r.Reason, len(r.Records))
	}
	ac.save(recordapp.Encounter{PatientID: "si1", Type: "Follow-up", Note: "second", Date: "2026-05-07"})
	if r := capture("patient_id"); r.Reachable || !strings.Contains(r.Reason, "rows cannot be told apart") {
		t.Fatalf("two rows identified by the page's patient_id: %v %q; want unusable, rows cannot be told apart", r.Reachable, r.Reason)
	}
	if r := capture("id"); !r.Reachable || len(r.Records) != 2 {
		t.Fatalf("two rows identified by another field: %v %q %d records; want both read", r.Reachable, r.Reason, len(r.Records))
	}
	// type is casefolded (the test section): identifiers differing only
	// in case would merge, so rows identified by it are not read.
	if r := capture("type"); r.Reachable || !strings.Contains(r.Reason, "casefolded") {
		t.Fatalf("two rows identified by a casefolded field: %v %q; want unusable, casefolded", r.Reachable, r.Reason)
	}
}

// TestFieldShownTwiceInARow: a row that shows a field twice (the note and
// an amendment, both td.note) has two values of it. For a contract that
// reads the note the read is unusable, naming the row and the field, since
// reading the first would hide the second; for a contract that does not,
// the note is reported as the list of both.
func TestFieldShownTwiceInARow(t *testing.T) {
	a := startApp(t)
	ac := signInActor(t, a)
	ac.save(recordapp.Encounter{PatientID: "tw1", Type: "Triage", Note: savedNote, Amended: "amended note", Date: savedDate})
	c := adapterClient(t, request(t, a.section(), "tw1", recordapp.ReaderPassword))

	r := captureFor(t, c, []string{"patient_id", "type", "note"}, nil)
	if r.Reachable {
		t.Fatalf("the note shown twice read as usable (%v); a contract reads it, so the read must be unusable", r.Records)
	}
	if want := "record row 1 of 1, field note: its selector td.note matches 2 elements in the row"; !strings.Contains(r.Reason, want) {
		t.Errorf("reason %q; want it to say %q", r.Reason, want)
	}
	v := judgeEffects(t, c, effectsYAML, map[string]string{"patient_id": "tw1", "note": savedNote}, read{Reachable: true}, r)
	if v.outcome != judge.ReconciliationRequired {
		t.Errorf("step %s; want RECONCILIATION_REQUIRED, never HALTED_BEFORE_EFFECT", v)
	}

	r = captureFor(t, c, []string{"patient_id", "type"}, nil)
	if !r.Reachable || len(r.Records) != 1 {
		t.Fatalf("a count of triage rows: %v %q %v; want the one row", r.Reachable, r.Reason, r.Records)
	}
	if got, want := fmt.Sprint(r.Records[0]["note"]), fmt.Sprint([]any{savedNote, "amended note"}); got != want {
		t.Errorf("note = %s; want both values, %s", got, want)
	}
}
