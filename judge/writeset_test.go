package judge

import (
	"strings"
	"testing"
)

// writeSet builds a complete, reachable write set from a JSON list of
// changes ({op, table, before, after}).
func writeSet(t *testing.T, changes string) *WriteSet {
	t.Helper()
	tree, err := DecodeJSON([]byte(changes))
	if err != nil {
		t.Fatalf("changes %s: %v", changes, err)
	}
	ws := &WriteSet{Reachable: true, Complete: true}
	for _, x := range tree.([]any) {
		m := x.(map[string]any)
		ch := Change{Op: m["op"].(string), Table: m["table"].(string)}
		if b, ok := m["before"].(map[string]any); ok {
			ch.Before = b
		}
		if a, ok := m["after"].(map[string]any); ok {
			ch.After = a
		}
		ws.Changes = append(ws.Changes, ch)
	}
	return ws
}

// TestWriteSet: docs/contracts.md §3b. Newness, loss and other writes from
// the net change of each identity; the reads still give a plain
// record_written its count and field_equals its values.
func TestWriteSet(t *testing.T) {
	t.Parallel()
	const rwNew = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true}`
	const rwOnly = `{"kind": "record_written", "match": {"applicant": "p1"}, "count_new_only": true, "forbid_other_writes": true}`
	const ens = `{"kind": "exact_new_set", "match": {"applicant": "p1"}, "new_records": [{"applicant": "p1"}], "expected_count": 1}`
	const feNew = `{"kind": "field_equals", "match": {"applicant": "p1"}, "field": "v", "value": "1", "new_only": true}`
	none := read(t, `[]`)
	honest := read(t, `[{"id": 7, "applicant": "p1", "v": "1"}]`)
	opts := func(changes string) Options { return Options{WriteSet: writeSet(t, changes)} }
	insert7 := `{"op": "insert", "table": "apps", "before": null, "after": {"id": 7, "applicant": "p1", "v": "1"}}`
	repoint5 := `{"op": "update", "table": "apps", "before": {"id": 5, "applicant": "p2"}, "after": {"id": 5, "applicant": "p1"}}`
	delete3 := `{"op": "delete", "table": "apps", "before": {"id": 3, "applicant": "p3"}, "after": null}`
	softDelete3 := `{"op": "update", "table": "apps", "before": {"id": 3, "applicant": "p3", "deleted_at": null}, "after": {"id": 3, "applicant": "p3", "deleted_at": "2026-01-01"}}`
	edit4 := `{"op": "update", "table": "apps", "before": {"id": 4, "applicant": "p2", "v": "a"}, "after": {"id": 4, "applicant": "p2", "v": "b"}}`
	tests := []judgeCase{
		{name: "honest insert", contract: rwNew, before: none, after: honest, opts: opts(`[` + insert7 + `]`),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}},
		{name: "re-pointed beside an honest insert", contract: rwNew, before: none, after: honest, opts: opts(`[` + insert7 + `,` + repoint5 + `]`),
			want: refuted(ClassConflicting, "EXISTING_RECORD_CHANGED").with(1, 1), changed: []string{"5"}},
		{name: "collateral deletion", contract: rwNew, before: none, after: honest, opts: opts(`[` + insert7 + `,` + delete3 + `]`),
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1), lost: []string{"3"}},
		{name: "the contract's own record may be deleted", contract: `{"kind": "record_written", "match": {"id": "3"}, "expected_count": 0}`,
			before: read(t, `[{"id": 3, "applicant": "p3"}]`), after: none, opts: opts(`[` + delete3 + `]`),
			want: okv("COUNT_EXACT").with(0, 0), lost: []string{}},
		{name: "other write allowed by default", contract: rwNew, before: none, after: honest, opts: opts(`[` + insert7 + `,` + edit4 + `]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "other write forbidden", contract: rwOnly, before: none, after: honest, opts: opts(`[` + insert7 + `,` + edit4 + `]`),
			want: refuted(ClassConflicting, "OTHER_WRITE").with(1, 1)},
		{name: "forbidden, nothing else written", contract: rwOnly, before: none, after: honest, opts: opts(`[` + insert7 + `]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "forbidden, no write set", contract: rwOnly, before: none, after: honest,
			want: indet(ClassIndeterminate, "CHANGES_UNUSABLE")},
		{name: "transient write is informational", contract: rwNew, before: none, after: honest,
			opts: opts(`[` + insert7 + `, {"op": "insert", "table": "apps", "before": null, "after": {"id": 8, "applicant": "p1"}}, {"op": "delete", "table": "apps", "before": {"id": 8, "applicant": "p1"}, "after": null}]`),
			want: okv("COUNT_EXACT", "TRANSIENT_WRITE").with(1, 1), matched: []string{"7"}},
		{name: "an update that ends as it began is no change", contract: rwOnly, before: none, after: honest,
			opts: opts(`[` + insert7 + `,` + edit4 + `, {"op": "update", "table": "apps", "before": {"id": 4, "applicant": "p2", "v": "b"}, "after": {"id": 4, "applicant": "p2", "v": "a"}}]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "an insert then an update folds to a new record", contract: rwNew, before: none, after: honest,
			opts: opts(`[{"op": "insert", "table": "apps", "before": null, "after": {"id": 7, "applicant": "p0"}}, {"op": "update", "table": "apps", "before": {"id": 7, "applicant": "p0"}, "after": {"id": 7, "applicant": "p1", "v": "1"}}]`),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}},
		{name: "nothing landed, nothing written: refuted", contract: rwNew, before: none, after: none, opts: opts(`[]`),
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "nothing landed, something written elsewhere", contract: rwNew, before: none, after: none, opts: opts(`[` + edit4 + `]`),
			want: refuted(ClassConflicting, "COUNT_UNDER", "UNEXPLAINED_CHANGE").with(0, 1)},
		{name: "exact_new_set: scope loss", contract: ens, before: none, after: honest,
			opts: opts(`[` + insert7 + `, {"op": "delete", "table": "apps", "before": {"id": 2, "applicant": "p1"}, "after": null}]`),
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(1, 1), lost: []string{"2"}},
		{name: "exact_new_set: re-pointed member", contract: ens, before: none, after: honest, opts: opts(`[` + repoint5 + `]`),
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY", "EXISTING_RECORD_CHANGED").with(0, 1), changed: []string{"5"}},
		{name: "field_equals new_only reads the value from the read", contract: feNew, before: none,
			after: read(t, `[{"id": 1, "applicant": "p1", "v": "0"}, {"id": 7, "applicant": "p1", "v": "1"}]`), opts: opts(`[` + insert7 + `]`),
			want: summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("1"), ExpectedValue: new("1")}, matched: []string{"7"}},
		{name: "incomplete write set", contract: rwNew, before: none, after: honest,
			opts: Options{WriteSet: &WriteSet{Reachable: true, Reason: "the binlog rotated"}},
			want: indet(ClassIndeterminate, "CHANGES_UNUSABLE")},
		{name: "an image without identity", contract: rwNew, before: none, after: honest,
			opts: opts(`[{"op": "insert", "table": "apps", "before": null, "after": {"applicant": "p1"}}]`),
			want: indet(ClassIndeterminate, "CHANGES_UNUSABLE")},
		{name: "an op whose images do not fit", contract: rwNew, before: none, after: honest,
			opts: opts(`[{"op": "insert", "table": "apps", "before": {"id": 7}, "after": {"id": 7, "applicant": "p1"}}]`),
			want: indet(ClassIndeterminate, "CHANGES_UNUSABLE")},
		// The write set judges newness; a census beside it adds the loss
		// it sees (a soft delete: an update the write set cannot call a
		// loss), and must then be readable.
		{name: "the write set judges newness beside a census", contract: rwNew, before: none, after: honest,
			opts: Options{WriteSet: writeSet(t, `[`+insert7+`]`), Census: census(t, `[{"id": 3}]`, `[{"id": 3}, {"id": 7}]`)},
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"7"}},
		{name: "soft delete beside an honest insert, no census", contract: rwNew, before: none, after: honest, opts: opts(`[` + insert7 + `,` + softDelete3 + `]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "soft delete beside an honest insert, seen by the census", contract: rwNew, before: none, after: honest,
			opts: Options{WriteSet: writeSet(t, `[`+insert7+`,`+softDelete3+`]`), Census: census(t, `[{"id": 3}, {"id": 5}]`, `[{"id": 5}, {"id": 7}]`)},
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1), lost: []string{"3"}},
		{name: "a deletion both see is one loss", contract: rwNew, before: none, after: honest,
			opts: Options{WriteSet: writeSet(t, `[`+insert7+`,`+delete3+`]`), Census: census(t, `[{"id": 3}]`, `[{"id": 7}]`)},
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1), lost: []string{"3"}},
		{name: "the contract's own record soft-deleted is not collateral", contract: `{"kind": "record_written", "match": {"applicant": "p3"}, "forbid_collateral_loss": true}`,
			before: read(t, `[{"id": 3, "applicant": "p3"}]`), after: none,
			opts: Options{WriteSet: writeSet(t, `[`+softDelete3+`]`), Census: census(t, `[{"id": 3}]`, `[]`)},
			want: refuted(ClassConflicting, "COUNT_UNDER", "UNEXPLAINED_CHANGE").with(0, 1), lost: []string{}},
		{name: "an unreadable census beside the write set", contract: rwNew, before: none, after: honest,
			opts: Options{WriteSet: writeSet(t, `[`+insert7+`]`), Census: &Census{}},
			want: indet(ClassIndeterminate, "CENSUS_UNUSABLE")},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)

	c := bindOne(t, rwOnly, nil)
	v := Judge(c, none, honest, opts(`[`+insert7+`,`+edit4+`,`+delete3+`]`))
	msg := v.Reasons[len(v.Reasons)-1].Message
	for _, want := range []string{"2 other net change", `update of "4" in apps`, `delete of "3" in apps`} {
		if !strings.Contains(msg, want) {
			t.Errorf("OTHER_WRITE message %q lacks %q", msg, want)
		}
	}
	if !strings.Contains(HashInput(c), `"forbid_other_writes":true`) || strings.Contains(HashInput(bindOne(t, rwNew, nil)), "forbid_other_writes") {
		t.Errorf("forbid_other_writes must be hashed exactly when true: %s", HashInput(c))
	}
	u := Judge(bindOne(t, rwNew, nil), none, honest, Options{WriteSet: &WriteSet{Reachable: true, Reason: "the binlog rotated"}})
	if !strings.Contains(u.Reasons[0].Message, "binlog rotated") {
		t.Errorf("CHANGES_UNUSABLE message %q lacks the reason", u.Reasons[0].Message)
	}
}

// TestForbidOtherWritesLoad: forbid_other_writes is a flag of
// record_written and exact_new_set; elsewhere it is refused at load.
func TestForbidOtherWritesLoad(t *testing.T) {
	t.Parallel()
	_, err := loadOne(t, `{"kind": "field_equals", "field": "f", "value": "v", "forbid_other_writes": true}`)
	if err == nil || !strings.Contains(err.Error(), "forbid_other_writes") || !strings.Contains(err.Error(), "effects[0].forbid_other_writes") {
		t.Errorf("forbid_other_writes on field_equals: %v, want a refusal at effects[0].forbid_other_writes", err)
	}
	if _, err := loadOne(t, `{"kind": "record_written", "forbid_other_writes": "yes"}`); err == nil {
		t.Error("a non-boolean forbid_other_writes loaded")
	}
	ens := bindOne(t, `{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "forbid_other_writes": true}`, nil)
	if !ens.ForbidOtherWrites {
		t.Error("exact_new_set lost forbid_other_writes")
	}
}
