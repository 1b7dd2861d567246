package judge

import (
	"slices"
	"strings"
	"testing"
)

// TestLostAndChangedLists: a verdict lists every identity its loss and
// changed-record reasons count, complete (the messages name at most 5),
// in every form the judge reads (runFormsAgree: maps, compact batches,
// the fast decoder, projected streams, a stored index).
func TestLostAndChangedLists(t *testing.T) {
	t.Parallel()
	const rw = `{"kind": "record_written", "match": {"applicant": "p1"}}`
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	const ens = `{"kind": "exact_new_set", "match": {"applicant": "p1"}, "new_records": [{"applicant": "p1"}], "expected_count": 1}`
	const feNew = `{"kind": "field_equals", "match": {"applicant": "p1"}, "field": "v", "value": "1", "new_only": true}`
	// Seven records of other applicants, one without an identity: all vanish.
	others := read(t, `[{"id": 1, "applicant": "p2"}, {"id": 2, "applicant": "p2"}, {"id": 3, "applicant": "p2"},
		{"id": 4, "applicant": "p2"}, {"id": 5, "applicant": "p2"}, {"id": 6, "applicant": "p2"}, {"applicant": "p3", "n": 7}]`)
	honest := read(t, `[{"id": 9, "applicant": "p1", "v": "1"}]`)
	tests := []judgeCase{
		{name: "record_written: every lost identity", contract: rw, before: others, after: honest,
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1),
			lost: []string{"1", "2", "3", "4", "5", "6", `{"applicant":"p3","n":7}`}, changed: []string{}},
		{name: "exact_new_set: every in-scope lost identity", contract: ens,
			before: read(t, `[{"id": 1, "applicant": "p1"}, {"id": 2, "applicant": "p1"}, {"id": 3, "applicant": "p2"}]`), after: honest,
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(1, 1), lost: []string{"1", "2"}, changed: []string{}},
		{name: "census: loss over the collection", contract: rwNew, before: read(t, `[]`), after: honest,
			opts: Options{Census: census(t, `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}, {"id": 6}]`, `[{"id": 9}]`)},
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1), lost: []string{"1", "2", "3", "4", "5", "6"}, changed: []string{}},
		{name: "census: changed records", contract: rwNew, before: read(t, `[]`),
			after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 6, "applicant": "p1"}, {"id": 9, "applicant": "p1"}]`),
			opts:  Options{Census: census(t, `[{"id": 5}, {"id": 6}]`, `[{"id": 5}, {"id": 6}, {"id": 9}]`)},
			want:  refuted(ClassConflicting, "EXISTING_RECORD_CHANGED").with(1, 1), lost: []string{}, changed: []string{"5", "6"}},
		{name: "census: exact_new_set changed and lost", contract: ens, before: read(t, `[]`),
			after: read(t, `[{"id": 5, "applicant": "p1"}, {"id": 9, "applicant": "p1"}]`),
			opts:  Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 5}, {"id": 9}]`)},
			want:  refuted(ClassConflicting, "EXISTING_RECORD_CHANGED", "SET_SCOPE_LOSS").with(1, 1), lost: []string{"4"}, changed: []string{"5"}},
		{name: "census: field_equals new_only changed", contract: feNew, before: read(t, `[]`),
			after: read(t, `[{"id": 5, "applicant": "p1", "v": "1"}, {"id": 9, "applicant": "p1", "v": "1"}]`),
			opts:  Options{Census: census(t, `[{"id": 5}]`, `[{"id": 5}, {"id": 9}]`)},
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"EXISTING_RECORD_CHANGED"}, Observed: new(1), Expected: new(1), ObservedValue: new("1"), ExpectedValue: new("1")},
			lost:  []string{}, changed: []string{"5"}},
		{name: "confirmed: empty lists", contract: rwNew, before: read(t, `[]`), after: honest,
			want: okv("COUNT_EXACT").with(1, 1), lost: []string{}, changed: []string{}},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)

	// The message stays capped while the list is complete.
	v := Judge(bindOne(t, rw, nil), others, honest, Options{})
	if n := strings.Count(v.Reasons[0].Message, `"`); n != 10 {
		t.Errorf("COLLATERAL_LOSS message quotes %d values, want 5 identities: %s", n/2, v.Reasons[0].Message)
	}
	// A keyed baseline (identities hidden, restored before judging) counts
	// the same records; an identity nothing restores stays its token.
	p := Redaction{RedactFields: []string{"id"}}
	keyed := make([]Record, len(others.Records))
	for i, r := range others.Records {
		keyed[i] = p.KeyBaseline(NewKeyer(testKey), r)
	}
	c := bindOne(t, rw, nil)
	restored := p.NewRestorer(NewKeyer(testKey), []*Contract{c}, honest.Records).Restore(keyed)
	kv := Judge(c, Snapshot{Reachable: true, Records: restored}, honest, Options{})
	if len(kv.Lost) != len(v.Lost) || slices.Contains(kv.Lost, "1") {
		t.Errorf("keyed baseline: Lost %q, want %d tokens, no clear identity", kv.Lost, len(v.Lost))
	}
}
