package judge

import (
	"strings"
	"testing"
)

// TestUnexplainedChange: with a census, a verdict that would say nothing
// landed (class refuted, HALTED_BEFORE_EFFECT) also needs the collection
// unchanged between the census reads; otherwise it is conflicting with
// UNEXPLAINED_CHANGE, naming the identities.
func TestUnexplainedChange(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	const rwRemove = `{"kind": "record_written", "match": {"applicant": "p1"}, "expected_count": 1}`
	const feNew = `{"kind": "field_equals", "match": {"applicant": "p1"}, "field": "v", "value": "1", "new_only": true}`
	none := read(t, `[]`)
	under := func(codes ...string) summary {
		return refuted(ClassConflicting, append([]string{"COUNT_UNDER"}, codes...)...).with(0, 1)
	}
	tests := []judgeCase{
		{name: "clean census: still refuted", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 5}, {"id": 4}]`)},
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "appeared elsewhere", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4}]`, `[{"id": 4}, {"id": 8}, {"id": 9}]`)},
			want: under("UNEXPLAINED_CHANGE")},
		{name: "vanished: the selector's own record is excused from loss, not from the census", contract: `{"kind": "record_written", "match": {"applicant": "p1"}, "expected_count": 2}`,
			before: read(t, `[{"id": 4, "applicant": "p1"}]`), after: none,
			opts: Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 5}]`)},
			want: refuted(ClassConflicting, "COUNT_UNDER", "UNEXPLAINED_CHANGE").with(0, 2)},
		{name: "changed in place", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4, "d": "a"}, {"id": 5, "d": "b"}]`, `[{"id": 4, "d": "a"}, {"id": 5, "d": "c"}]`)},
			want: under("UNEXPLAINED_CHANGE")},
		{name: "identities only: a change in place cannot be seen", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 4}, {"id": 5}]`)},
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "one census without details: only appear and vanish", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 4, "d": "a"}, {"id": 5, "d": "c"}]`)},
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "field_equals new_only: nothing new, but a record appeared", contract: feNew, before: none, after: none,
			opts: Options{Census: census(t, `[]`, `[{"id": 3}]`)},
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_NO_MATCH", "UNEXPLAINED_CHANGE"}, Observed: new(0), Expected: new(1), ExpectedValue: new("1")}},
		{name: "already conflicting: no second reason", contract: rwNew, before: none, after: none,
			opts: Options{Census: census(t, `[{"id": 4}, {"id": 5}]`, `[{"id": 4}]`)},
			want: under("COLLATERAL_LOSS")},
		{name: "confirmed: the census is not asked", contract: rwRemove, before: none, after: read(t, `[{"id": 7, "applicant": "p1"}]`),
			opts: Options{Census: census(t, `[{"id": 4}]`, `[{"id": 4}, {"id": 7}, {"id": 8}]`)},
			want: okv("COUNT_EXACT").with(1, 1)},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)

	c := bindOne(t, rwNew, nil)
	var many []string
	for i := range 7 {
		many = append(many, `{"id": `+string(rune('1'+i))+`}`)
	}
	cs := census(t, `[]`, "["+strings.Join(many, ",")+"]")
	v := Judge(c, none, none, Options{Census: cs})
	if got := strings.Join(v.Unexplained, ","); got != "1,2,3,4,5,6,7" {
		t.Errorf("Unexplained %q, want every identity", got)
	}
	msg := v.Reasons[len(v.Reasons)-1].Message
	if !strings.Contains(msg, "7 record(s)") || strings.Count(msg, `"`) != 10 {
		t.Errorf("UNEXPLAINED_CHANGE message %q: want the count and 5 identities", msg)
	}
	if got := StepOutcome([]Class{v.Class}); got != ReconciliationRequired {
		t.Errorf("step outcome %s, want %s", got, ReconciliationRequired)
	}
}
