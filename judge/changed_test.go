package judge

import (
	"strings"
	"testing"
)

// TestExistingRecordChanged: docs/contracts.md §3a. A matched record
// whose identity existed before the action without being in scope is a
// changed existing record, never new: REFUTED, conflicting, whatever the
// count, with a census and with the baseline alone (a whole read).
func TestExistingRecordChanged(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	const rwType = `{"kind": "record_written", "match": {"applicant": "p1", "type": "Triage"}, "count_new_only": true}`
	const rwKey = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true, "idempotency_key": "k1"}`
	const ens = `{"kind": "exact_new_set", "match": {"applicant": "p1"}, "new_records": [{"applicant": "p1"}], "expected_count": 1}`
	const feNew = `{"kind": "field_equals", "match": {"applicant": "p1"}, "field": "v", "value": "120", "new_only": true}`
	// A whole read: record 5 belonged to p2 and was re-pointed to p1.
	whole := read(t, `[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p2"}]`)
	repointed := read(t, `[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p1"}]`)
	honestAndRepointed := read(t, `[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`)
	unordered := read(t, `[{"id": 7, "applicant": "p1"}, {"id": 5, "applicant": "p1"}, {"id": 4, "applicant": "p2"}]`)
	same := census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 4}, {"id": 5}]`)
	grown := census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 4}, {"id": 5}, {"id": 7}]`)
	changedOnly := refuted(ClassConflicting, "EXISTING_RECORD_CHANGED").with(1, 1)
	alone := refuted(ClassConflicting, "COUNT_UNDER", "EXISTING_RECORD_CHANGED").with(0, 1)
	tests := []judgeCase{
		{name: "whole read: re-pointed alone", contract: rwNew, before: whole, after: repointed, want: alone, changed: []string{"5"}},
		{name: "census: re-pointed alone", contract: rwNew, before: whole, after: repointed, opts: Options{Census: same}, want: alone, changed: []string{"5"}},
		{name: "whole read: honest and re-pointed", contract: rwNew, before: whole, after: honestAndRepointed,
			want: changedOnly, matched: []string{"7"}, changed: []string{"5"}},
		{name: "whole read, unordered: honest and re-pointed", contract: rwNew, before: whole, after: unordered,
			want: changedOnly, matched: []string{"7"}, changed: []string{"5"}},
		{name: "census: honest and re-pointed", contract: rwNew, before: whole, after: honestAndRepointed, opts: Options{Census: grown},
			want: changedOnly, matched: []string{"7"}, changed: []string{"5"}},
		{name: "narrow read, census: honest and re-pointed", contract: rwNew, before: read(t, `[]`),
			after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`), opts: Options{Census: grown},
			want: changedOnly, matched: []string{"7"}, changed: []string{"5"}},
		{name: "already in scope and still in scope is not new", contract: rwNew,
			before: read(t, `[{"id": 5, "applicant": "p1"}]`), after: read(t, `[{"id": 5, "applicant": "p1", "note": "edited"}, {"id": 7, "applicant": "p1"}]`),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}, changed: []string{}},
		{name: "edited into scope", contract: rwType,
			before: read(t, `[{"id": 5, "applicant": "p1", "type": "Note"}]`), after: read(t, `[{"id": 5, "applicant": "p1", "type": "Triage"}]`),
			want: alone, changed: []string{"5"}},
		{name: "census: edited into scope", contract: rwType,
			before: read(t, `[{"id": 5, "applicant": "p1", "type": "Note"}]`), after: read(t, `[{"id": 5, "applicant": "p1", "type": "Triage"}]`),
			opts: Options{Census: census(t, `[{"id": 5}]`, `[{"id": 5}]`)}, want: alone, changed: []string{"5"}},
		{name: "keyed into scope", contract: rwKey,
			before: read(t, `[{"id": 5, "applicant": "p1", "key": "k0"}]`), after: read(t, `[{"id": 5, "applicant": "p1", "key": "k1"}]`),
			want: alone, changed: []string{"5"}},
		{name: "no newness claimed: no rule", contract: `{"kind": "record_written", "match": {"applicant": "p1"}}`,
			before: whole, after: repointed, want: okv("COUNT_EXACT").with(1, 1), changed: []string{}},
		{name: "a record without identity never changes", contract: rwNew,
			before: read(t, `[{"applicant": "p1"}]`), after: read(t, `[{"applicant": "p1"}, {"id": 7, "applicant": "p1"}]`),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}, changed: []string{}},
		{name: "exact_new_set: re-pointed member beside an honest one", contract: ens, before: whole, after: honestAndRepointed,
			want: changedOnly, matched: []string{"7"}, changed: []string{"5"}},
		{name: "exact_new_set, census: re-pointed member alone", contract: ens, before: whole, after: repointed, opts: Options{Census: same},
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY", "EXISTING_RECORD_CHANGED").with(0, 1), changed: []string{"5"}},
		{name: "field_equals new_only: re-pointed reading", contract: feNew,
			before:  read(t, `[{"id": 1, "applicant": "p1", "v": 118}, {"id": 9, "applicant": "p2", "v": 120}]`),
			after:   read(t, `[{"id": 1, "applicant": "p1", "v": 118}, {"id": 9, "applicant": "p1", "v": 120}]`),
			want:    summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_NO_MATCH", "EXISTING_RECORD_CHANGED"}, Observed: new(0), Expected: new(1), ExpectedValue: new("120")},
			changed: []string{"9"}},
		{name: "collateral loss comes after the change", contract: rwNew,
			before: read(t, `[{"id": 3, "applicant": "p3"}, {"id": 5, "applicant": "p2"}]`), after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`),
			want: refuted(ClassConflicting, "EXISTING_RECORD_CHANGED", "COLLATERAL_LOSS").with(1, 1), changed: []string{"5"}, lost: []string{"3"}},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)

	v := Judge(bindOne(t, rwNew, nil), whole, honestAndRepointed, Options{})
	if msg := v.Reasons[0].Message; !strings.Contains(msg, `"5"`) || !strings.Contains(msg, "1 matched record") {
		t.Errorf("EXISTING_RECORD_CHANGED message %q does not name identity 5", msg)
	}
}

// TestReadingMoreNeverWeaker: judging the same action with a census
// beside the reads never gives a weaker verdict than without one: what
// the baseline alone refutes or cannot decide, the census does not
// confirm.
func TestReadingMoreNeverWeaker(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	c := bindOne(t, rwNew, nil)
	before := read(t, `[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p2"}]`)
	for _, afterJS := range []string{
		`[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p1"}]`,
		`[{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`,
		`[{"id": 4, "applicant": "p1"}, {"id": 5, "applicant": "p1"}, {"id": 7, "applicant": "p1"}]`,
	} {
		after := read(t, afterJS)
		ids := `[{"id": 4}, {"id": 5}, {"id": 7}]`
		alone := Judge(c, before, after, Options{})
		withCensus := Judge(c, before, after, Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, ids)})
		if alone.Decision == Confirmed || withCensus.Decision == Confirmed {
			t.Errorf("after %s: confirmed (alone %v, census %v)", afterJS, alone.Codes(), withCensus.Codes())
		}
		if alone.Class != ClassConflicting || withCensus.Class != ClassConflicting {
			t.Errorf("after %s: classes %s alone, %s with census; want conflicting for both", afterJS, alone.Class, withCensus.Class)
		}
	}
}
