package judge

import (
	"strings"
	"testing"
)

// census builds a Census from two JSON lists of records.
func census(t *testing.T, before, after string) *Census {
	t.Helper()
	return &Census{Before: read(t, before), After: read(t, after)}
}

// TestCensus: docs/contracts.md §3a. The reads are narrowed to the run's subject
// (applicant p1); the census reads the whole collection.
func TestCensus(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	const ens = `{"kind": "exact_new_set", "match": {"applicant": "p1"}, "new_records": [{"applicant": "p1"}], "expected_count": 1}`
	const feNew = `{"kind": "field_equals", "match": {"patient": "p1", "code": "bp"}, "field": "value", "value": "120", "new_only": true}`
	none := read(t, `[]`)
	// Record 5 belonged to applicant p2; the automation re-assigned it.
	reassigned := read(t, `[{"id": 5, "applicant": "p1"}]`)
	both := census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 6}]`)
	honest := read(t, `[{"id": 7, "applicant": "p1"}]`)
	grown := census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 6}, {"id": 7}]`)
	tests := []judgeCase{
		{name: "without a census a re-assigned record reads as new", contract: rwNew, before: none, after: reassigned,
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "re-assigned record", contract: rwNew, before: none, after: reassigned, opts: Options{Census: both},
			want: refuted(ClassConflicting, "COUNT_UNDER", "EXISTING_RECORD_CHANGED").with(0, 1)},
		{name: "honest new record", contract: rwNew, before: none, after: honest, opts: Options{Census: grown},
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}},
		{name: "honest new record and a re-assigned one", contract: rwNew, before: none,
			after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`), opts: Options{Census: grown},
			want: refuted(ClassConflicting, "EXISTING_RECORD_CHANGED").with(1, 1), matched: []string{"7"}},
		{name: "a record that already matched is not changed", contract: rwNew, before: read(t, `[{"id": 5, "applicant": "p1"}]`),
			after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`), opts: Options{Census: grown},
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}},
		{name: "a baseline record the census missed is not new", contract: rwNew, before: read(t, `[{"id": 3, "applicant": "p1"}]`),
			after: read(t, `[{"id": 3, "applicant": "p1"}]`), opts: Options{Census: both},
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "loss outside the subject", contract: rwNew, before: none, after: honest,
			opts: Options{Census: census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 7}]`)},
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1)},
		{name: "without a census the loss outside the subject is unseen", contract: rwNew, before: none, after: honest,
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "a record the selector matched may vanish", contract: `{"kind": "record_written", "match": {"id": "5"}, "expected_count": 0}`,
			before: read(t, `[{"id": 5, "applicant": "p1"}]`), after: none,
			opts: Options{Census: census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 6}]`)},
			want: okv("COUNT_EXACT").with(0, 0)},
		{name: "a record moved out of the subject is not lost", contract: `{"kind": "record_written", "match": {"applicant": "p1", "type": "x"}}`,
			before: read(t, `[{"id": 5, "applicant": "p1", "type": "y"}]`), after: read(t, `[{"id": 7, "applicant": "p1", "type": "x"}]`),
			opts: Options{Census: grown}, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "after census unreachable", contract: rwNew, before: none, after: honest,
			opts: Options{Census: &Census{Before: read(t, `[{"id": 5}]`), After: Snapshot{Reason: "timeout", Code: ReasonReadIncomplete}}},
			want: indet(ClassIndeterminate, "CENSUS_UNUSABLE")},
		{name: "before census record without identity", contract: rwNew, before: none, after: honest,
			opts: Options{Census: census(t, `[{"id": 5}, {"uuid": 6}]`, `[{"id": 5}]`)},
			want: indet(ClassIndeterminate, "CENSUS_UNUSABLE")},
		{name: "null identity is no identity", contract: ens, before: none, after: honest,
			opts: Options{Census: census(t, `[{"id": 5}]`, `[{"id": 5}, {"id": null}]`)},
			want: indet(ClassIndeterminate, "CENSUS_UNUSABLE")},
		{name: "a field_equals without new_only does not read the census", contract: `{"kind": "field_equals", "match": {"applicant": "p1"}, "field": "id", "value": "7"}`,
			before: none, after: honest, opts: Options{Census: &Census{}},
			want: summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("7"), ExpectedValue: new("7")}},
		{name: "a matched record without identity", contract: rwNew, before: none, after: read(t, `[{"applicant": "p1"}]`), opts: Options{Census: grown},
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "a matched record without identity, no newness claimed", contract: `{"kind": "record_written", "match": {"applicant": "p1"}}`,
			before: none, after: read(t, `[{"applicant": "p1"}]`), opts: Options{Census: both},
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "exact_new_set re-assigned", contract: ens, before: none, after: reassigned, opts: Options{Census: both},
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY", "EXISTING_RECORD_CHANGED").with(0, 1)},
		{name: "exact_new_set honest", contract: ens, before: none, after: honest, opts: Options{Census: grown},
			want: okv("SET_EXACT").with(1, 1)},
		{name: "exact_new_set loss anywhere in the collection", contract: ens, before: none, after: honest,
			opts: Options{Census: census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 6}, {"id": 7}]`)},
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(1, 1)},
		{name: "exact_new_set in-scope loss", contract: ens, before: read(t, `[{"id": 5, "applicant": "p1"}]`), after: honest,
			opts: Options{Census: census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 6}, {"id": 7}]`)},
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(1, 1)},
		{name: "exact_new_set record left the read but not the collection", contract: ens, before: read(t, `[{"id": 5, "applicant": "p1"}]`), after: honest,
			opts: Options{Census: grown}, want: okv("SET_EXACT").with(1, 1)},
		{name: "field_equals new_only with earlier readings", contract: feNew,
			before: read(t, `[{"id": 1, "patient": "p1", "code": "bp", "value": 118}]`),
			after:  read(t, `[{"id": 1, "patient": "p1", "code": "bp", "value": 118}, {"id": 2, "patient": "p1", "code": "bp", "value": 120}]`),
			opts:   Options{Census: census(t, `[{"id": 1}]`, `[{"id": 1}, {"id": 2}]`)},
			want:   summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("120"), ExpectedValue: new("120")}, matched: []string{"2"}},
		{name: "field_equals new_only re-pointed reading", contract: feNew,
			before: read(t, `[{"id": 1, "patient": "p1", "code": "bp", "value": 118}]`),
			after:  read(t, `[{"id": 1, "patient": "p1", "code": "bp", "value": 118}, {"id": 9, "patient": "p1", "code": "bp", "value": 120}]`),
			opts:   Options{Census: census(t, `[{"id": 1}, {"id": 9}]`, `[{"id": 1}, {"id": 9}]`)},
			want:   summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_NO_MATCH", "EXISTING_RECORD_CHANGED"}, Observed: new(0), Expected: new(1), ExpectedValue: new("120")}},
		{name: "field_equals new_only: new and re-pointed", contract: feNew, before: none,
			after: read(t, `[{"id": 2, "patient": "p1", "code": "bp", "value": 120}, {"id": 9, "patient": "p1", "code": "bp", "value": 120}]`),
			opts:  Options{Census: census(t, `[{"id": 9}]`, `[{"id": 2}, {"id": 9}]`)},
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"EXISTING_RECORD_CHANGED"}, Observed: new(1), Expected: new(1), ObservedValue: new("120"), ExpectedValue: new("120")}},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)
}

// TestNewOnly: field_equals new_only without a census judges the records
// new since the baseline, and needs the baseline.
func TestNewOnly(t *testing.T) {
	t.Parallel()
	const feNew = `{"kind": "field_equals", "match": {"patient": "p1"}, "field": "value", "value": "120", "new_only": true}`
	earlier := read(t, `[{"id": 1, "patient": "p1", "value": 118}, {"patient": "p1", "value": 117}]`)
	tests := []judgeCase{
		{name: "earlier readings are not judged", contract: feNew, before: earlier,
			after: read(t, `[{"patient": "p1", "value": 117}, {"id": 1, "patient": "p1", "value": 118}, {"id": 2, "patient": "p1", "value": 120}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("120"), ExpectedValue: new("120")}, matched: []string{"2"}},
		{name: "without new_only the same read is ambiguous", contract: `{"kind": "field_equals", "match": {"patient": "p1"}, "field": "value", "value": "120"}`, before: earlier,
			after: read(t, `[{"id": 1, "patient": "p1", "value": 118}, {"id": 2, "patient": "p1", "value": 120}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_AMBIGUOUS"}, Observed: new(2), Expected: new(1), ExpectedValue: new("120")}},
		{name: "nothing new", contract: feNew, before: earlier, after: earlier,
			want: summary{Decision: Refuted, Class: ClassRefuted, Codes: []string{"FIELD_NO_MATCH"}, Observed: new(0), Expected: new(1), ExpectedValue: new("120")}},
		{name: "an in-place edit is not new", contract: feNew, before: earlier,
			after: read(t, `[{"id": 1, "patient": "p1", "value": 120}]`),
			want:  summary{Decision: Refuted, Class: ClassRefuted, Codes: []string{"FIELD_NO_MATCH"}, Observed: new(0), Expected: new(1), ExpectedValue: new("120")}},
		{name: "baseline unreadable", contract: feNew, before: down, after: earlier,
			want: summary{Decision: Indeterminate, Class: ClassIndeterminate, Codes: []string{"BASELINE_UNREACHABLE"}, ExpectedValue: new("120")}},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)
	c := bindOne(t, feNew, nil)
	if !NeedsBaseline(c) {
		t.Error("new_only does not need the baseline")
	}
	if NeedsBaseline(bindOne(t, `{"kind": "field_equals", "field": "f", "value": "v"}`, nil)) {
		t.Error("a plain field_equals needs the baseline")
	}
	if !strings.Contains(HashInput(c), `"new_only":true`) {
		t.Errorf("hash input %s lacks new_only", HashInput(c))
	}
}

// TestReadCodes: an incomplete read reports its own code; an after read
// that answered in part is indeterminate, not unavailable.
func TestReadCodes(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	ok := read(t, `[]`)
	truncated := Snapshot{Reason: "100 records, the server's page cap", Code: ReasonReadMayBeTruncated}
	incomplete := Snapshot{Reason: "read 99 of 101", Code: ReasonReadIncomplete}
	tests := []judgeCase{
		{name: "after may be truncated", contract: rwNew, before: ok, after: truncated, want: indet(ClassIndeterminate, "READ_MAY_BE_TRUNCATED")},
		{name: "after incomplete", contract: rwNew, before: ok, after: incomplete, want: indet(ClassIndeterminate, "READ_INCOMPLETE")},
		{name: "after unreachable as before", contract: rwNew, before: ok, after: down, want: indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{name: "after code SOR_UNREACHABLE", contract: rwNew, before: ok, after: Snapshot{Code: ReasonSORUnreachable}, want: indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{name: "baseline incomplete", contract: rwNew, before: incomplete, after: ok, want: indet(ClassIndeterminate, "READ_INCOMPLETE")},
		{name: "baseline incomplete, not needed", contract: `{"kind": "record_written", "match": {}, "forbid_collateral_loss": false, "expected_count": 0}`,
			before: incomplete, after: ok, want: okv("COUNT_EXACT").with(0, 0)},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)
	v := Judge(bindOne(t, rwNew, nil), ok, truncated, Options{})
	if !strings.Contains(v.Reasons[0].Message, "page cap") {
		t.Errorf("message %q lacks the read's reason", v.Reasons[0].Message)
	}
}

func TestCensusUsable(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "identity_field": "uuid"}`, nil)
	for _, tc := range []struct {
		name string
		s    Snapshot
		ok   bool
		why  string
	}{
		{"usable", read(t, `[{"uuid": "a"}, {"uuid": 2}]`), true, ""},
		{"empty collection", read(t, `[]`), true, ""},
		{"unreachable", Snapshot{Reason: "refused", Code: ReasonReadMayBeTruncated}, false, "READ_MAY_BE_TRUNCATED"},
		{"record without the field", read(t, `[{"uuid": "a"}, {"id": 2}]`), false, `census record 1 carries no "uuid"`},
	} {
		ok, why := CensusUsable(c, tc.s)
		if ok != tc.ok || !strings.Contains(why, tc.why) || (ok && why != "") {
			t.Errorf("%s: %v %q, want %v mentioning %q", tc.name, ok, why, tc.ok, tc.why)
		}
	}
}
