package judge

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// recs decodes a JSON list of records the way a read would deliver them.
func recs(t testing.TB, js string) []Record {
	t.Helper()
	tree, err := DecodeJSON([]byte(js))
	if err != nil {
		t.Fatalf("records %s: %v", js, err)
	}
	list, ok := tree.([]any)
	if !ok {
		t.Fatalf("records %s: not a list", js)
	}
	out := make([]Record, len(list))
	for i, r := range list {
		out[i] = r.(map[string]any)
	}
	return out
}

func read(t testing.TB, js string) Snapshot {
	t.Helper()
	return Snapshot{Reachable: true, Records: recs(t, js)}
}

var down = Snapshot{Reachable: false, Reason: "connection refused"}

// summary is the comparable part of a verdict.
type summary struct {
	Decision      Decision
	Class         Class
	Codes         []string
	Observed      *int
	Expected      *int
	ObservedValue *string
	ExpectedValue *string
}

func summarize(v Verdict) summary {
	return summary{v.Decision, v.Class, v.Codes(), v.ObservedCount, v.ExpectedCount, v.ObservedValue, v.ExpectedValue}
}

func okv(codes ...string) summary {
	return summary{Decision: Confirmed, Class: ClassConfirmed, Codes: codes}
}

type judgeCase struct {
	name     string
	contract string
	params   map[string]string
	before   Snapshot
	after    Snapshot
	opts     Options
	want     summary
	// matched, if non-nil, lists the "id" canonical texts of the matched records.
	matched []string
	// lost and changed, if non-nil, are the verdict's Lost and Changed.
	lost, changed []string
}

func runJudgeCases(t *testing.T, tests []judgeCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.contract, tc.params)
			v := Judge(c, tc.before, tc.after, tc.opts)
			if d := cmp.Diff(tc.want, summarize(v)); d != "" {
				t.Errorf("verdict (-want +got):\n%s\nreasons: %+v", d, v.Reasons)
			}
			if v.ContractHash != c.Hash {
				t.Errorf("ContractHash %s, want %s", v.ContractHash, c.Hash)
			}
			if len(v.Reasons) == 0 {
				t.Errorf("no reasons")
			}
			for _, r := range v.Reasons {
				if r.Message == "" {
					t.Errorf("reason %s has no message", r.Code)
				}
			}
			if tc.lost != nil {
				if d := cmp.Diff(tc.lost, v.Lost, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("Lost (-want +got):\n%s", d)
				}
			}
			if tc.changed != nil {
				if d := cmp.Diff(tc.changed, v.Changed, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("Changed (-want +got):\n%s", d)
				}
			}
			if tc.matched != nil {
				got := []string{}
				for _, r := range v.Matched {
					id, _ := Canon(r["id"])
					got = append(got, id)
				}
				if d := cmp.Diff(tc.matched, got); d != "" {
					t.Errorf("matched ids (-want +got):\n%s", d)
				}
			}
		})
	}
}

// with fills counts into a summary.
func (s summary) with(observed, expected int) summary {
	s.Observed, s.Expected = new(observed), new(expected)
	return s
}

func refuted(class Class, codes ...string) summary {
	return summary{Decision: Refuted, Class: class, Codes: codes}
}

func indet(class Class, codes ...string) summary {
	return summary{Decision: Indeterminate, Class: class, Codes: codes}
}

// docs/contracts.md §2: canonical text of record values.
func TestCanon(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
		has  bool
	}{
		{"int", json.Number("1"), "1", true},
		{"integral float text", json.Number("1.0"), "1", true},
		{"fraction", json.Number("42.5"), "42.5", true},
		{"trailing zero fraction", json.Number("42.50"), "42.5", true},
		{"exponent", json.Number("1e3"), "1000", true},
		{"exponent upper", json.Number("1E3"), "1000", true},
		{"negative exponent", json.Number("1e-3"), "0.001", true},
		{"fraction with exponent", json.Number("-1.5e1"), "-15", true},
		{"negative zero", json.Number("-0"), "0", true},
		{"zero with fraction", json.Number("0.000"), "0", true},
		{"negative zero fraction", json.Number("-0.0"), "0", true},
		{"negative", json.Number("-7"), "-7", true},
		{"not a JSON number: plus", json.Number("+1"), "+1", true},
		{"not a JSON number: leading zero", json.Number("01.50"), "01.50", true},
		{"not a JSON number: bare point", json.Number("1."), "1.", true},
		{"float64 integral", 1.0, "1", true},
		{"float64 fraction", 42.5, "42.5", true},
		{"float64 negative zero", math.Copysign(0, -1), "0", true},
		{"int Go", 7, "7", true},
		{"true", true, "true", true},
		{"false", false, "false", true},
		{"string exact", " Triage ", " Triage ", true},
		{"string case", "TRIAGE", "TRIAGE", true},
		{"string unicode", "Zoë", "Zoë", true},
		{"empty string", "", "", true},
		{"null", nil, "", false},
		{"object compact sorted", map[string]any{"b": json.Number("1.0"), "a": "x"}, `{"a":"x","b":1}`, true},
		{"array compact", []any{json.Number("1"), "a", true, nil, map[string]any{"z": false, "y": "1"}}, `[1,"a",true,null,{"y":"1","z":false}]`, true},
		{"empty object", map[string]any{}, `{}`, true},
		{"empty array", []any{}, `[]`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, has := Canon(tc.in)
			if d := cmp.Diff(struct {
				S string
				H bool
			}{tc.want, tc.has}, struct {
				S string
				H bool
			}{got, has}); d != "" {
				t.Errorf("Canon(%#v) (-want +got):\n%s", tc.in, d)
			}
		})
	}
}

func TestCanonicalTextMatching(t *testing.T) {
	t.Parallel()
	rw := func(match string) string {
		return `{"kind": "record_written", "forbid_collateral_loss": false, "match": ` + match + `}`
	}
	empty := read(t, `[]`)
	tests := []judgeCase{
		{name: "1 matches \"1\"", contract: rw(`{"n": "1"}`), before: empty, after: read(t, `[{"id": 1, "n": 1}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "1.0 matches \"1\"", contract: rw(`{"n": "1"}`), before: empty, after: read(t, `[{"id": 1, "n": 1.0}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "1.0 does not match \"1.0\"", contract: rw(`{"n": "1.0"}`), before: empty, after: read(t, `[{"id": 1, "n": 1.0}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "42.5", contract: rw(`{"n": "42.5"}`), before: empty, after: read(t, `[{"id": 1, "n": 42.50}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "1e3 is 1000", contract: rw(`{"n": "1000"}`), before: empty, after: read(t, `[{"id": 1, "n": 1e3}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "-0 is 0", contract: rw(`{"n": "0"}`), before: empty, after: read(t, `[{"id": 1, "n": -0}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "0.000 is 0", contract: rw(`{"n": "0"}`), before: empty, after: read(t, `[{"id": 1, "n": 0.000}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "true", contract: rw(`{"b": "true"}`), before: empty, after: read(t, `[{"id": 1, "b": true}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "True is not true", contract: rw(`{"b": "True"}`), before: empty, after: read(t, `[{"id": 1, "b": true}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "false", contract: rw(`{"b": "false"}`), before: empty, after: read(t, `[{"id": 1, "b": false}]`), want: okv("COUNT_EXACT").with(1, 1)},
		// An object or array matches only an object or array, never the
		// text of its compact JSON (docs/contracts.md §2): a contract's value is text.
		{name: "object never matches its compact JSON", contract: rw(`{"o": "{\"a\":1,\"b\":[true,null]}"}`), before: empty,
			after: read(t, `[{"id": 1, "o": {"b": [true, null], "a": 1.0}}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "array never matches its compact JSON", contract: rw(`{"o": "[1,\"x\"]"}`), before: empty, after: read(t, `[{"id": 1, "o": [1, "x"]}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "string spelling JSON still matches a string", contract: rw(`{"o": "[1,\"x\"]"}`), before: empty, after: read(t, `[{"id": 1, "o": "[1,\"x\"]"}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "string case significant", contract: rw(`{"t": "triage"}`), before: empty, after: read(t, `[{"id": 1, "t": "Triage"}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "string whitespace significant", contract: rw(`{"t": "Triage"}`), before: empty, after: read(t, `[{"id": 1, "t": "Triage "}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "string unicode normalisation significant", contract: rw(`{"t": "Zo\u00eb"}`), before: empty, after: read(t, `[{"id": 1, "t": "Zoe\u0308"}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "string unicode exact", contract: rw(`{"t": "Zoë"}`), before: empty, after: read(t, `[{"id": 1, "t": "Zo\u00eb"}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "numeric string not renormalised", contract: rw(`{"n": "1"}`), before: empty, after: read(t, `[{"id": 1, "n": "1.0"}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "null matches nothing, not empty", contract: rw(`{"note": ""}`), before: empty, after: read(t, `[{"id": 1, "note": null}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "null matches nothing, not None", contract: rw(`{"note": "None"}`), before: empty, after: read(t, `[{"id": 1, "note": null}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "null matches nothing, not null", contract: rw(`{"note": "null"}`), before: empty, after: read(t, `[{"id": 1, "note": null}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "missing matches nothing", contract: rw(`{"note": ""}`), before: empty, after: read(t, `[{"id": 1}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "empty string matches empty string", contract: rw(`{"note": ""}`), before: empty, after: read(t, `[{"id": 1, "note": ""}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "dotted key is literal", contract: rw(`{"patient.id": "p1"}`), before: empty, after: read(t, `[{"id": 1, "patient": {"id": "p1"}}, {"id": 2, "patient.id": "p1"}]`), want: okv("COUNT_EXACT").with(1, 1), matched: []string{"2"}},
		{name: "empty selector matches all", contract: `{"kind": "record_written", "forbid_collateral_loss": false, "expected_count": 3}`, before: empty, after: read(t, `[{"id": 1}, {}, {"x": null}]`), want: okv("COUNT_EXACT").with(3, 3)},
	}
	runJudgeCases(t, tests)
}

// docs/contracts.md §2: a number's canonical text is its exact decimal, so two
// different numbers never share one, however large their exponents.
func TestCanonHugeExponentsDistinct(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{"1e10995116277760", "1e10995116277761"},
		{"1e-10995116277760", "1e-10995116277761"},
		{"1e99999999999999999999", "1e99999999999999999998"},
	}
	for _, p := range pairs {
		a, _ := Canon(json.Number(p[0]))
		b, _ := Canon(json.Number(p[1]))
		if a == b {
			t.Errorf("Canon(%s) == Canon(%s) == %q: different numbers share a canonical text", p[0], p[1], a)
		}
	}
}

// docs/contracts.md §3.3 record_written.
func TestRecordWritten(t *testing.T) {
	t.Parallel()
	const base = `"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}`
	empty := read(t, `[]`)
	one := `{"id": 1, "patient_id": "p1", "type": "Triage"}`
	two := `{"id": 2, "patient_id": "p1", "type": "Triage"}`
	other := `{"id": 9, "patient_id": "p0", "type": "Consult"}`
	tests := []judgeCase{
		{name: "exact", contract: "{" + base + "}", before: empty, after: read(t, "["+one+"]"),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"1"}},
		{name: "over", contract: "{" + base + "}", before: empty, after: read(t, "["+one+","+two+"]"),
			want: refuted(ClassConflicting, "COUNT_OVER").with(2, 1), matched: []string{"1", "2"}},
		{name: "under", contract: "{" + base + "}", before: empty, after: read(t, "["+other+"]"),
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "under but something landed", contract: "{" + base + `, "expected_count": 3}`, before: empty, after: read(t, "["+one+","+two+"]"),
			want: refuted(ClassConflicting, "COUNT_UNDER").with(2, 3)},
		{name: "exact N", contract: "{" + base + `, "expected_count": 2}`, before: empty, after: read(t, "["+one+","+two+"]"),
			want: okv("COUNT_EXACT").with(2, 2)},
		{name: "absence holds", contract: "{" + base + `, "expected_count": 0}`, before: read(t, "["+other+"]"), after: read(t, "["+other+"]"),
			want: okv("COUNT_EXACT").with(0, 0)},
		{name: "absence violated", contract: "{" + base + `, "expected_count": 0}`, before: empty, after: read(t, "["+one+"]"),
			want: refuted(ClassConflicting, "COUNT_OVER").with(1, 0)},
		{name: "count_new_only excludes baseline identity", contract: "{" + base + `, "count_new_only": true}`,
			before: read(t, "["+one+"]"), after: read(t, "["+one+","+two+"]"),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"2"}},
		{name: "count_new_only row already there", contract: "{" + base + `, "count_new_only": true}`,
			before: read(t, "["+one+"]"), after: read(t, "["+one+"]"),
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "count_new_only identity 1 vs \"1\"", contract: "{" + base + `, "count_new_only": true}`,
			before: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage"}]`), after: read(t, `[{"id": "1", "patient_id": "p1", "type": "Triage"}]`),
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "count_new_only identity 1.0 vs 1", contract: "{" + base + `, "count_new_only": true}`,
			before: read(t, `[{"id": 1.0, "patient_id": "p1", "type": "Triage"}]`), after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage"}]`),
			want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "count_new_only baseline match changed identity", contract: "{" + base + `, "count_new_only": true, "forbid_collateral_loss": false}`,
			before: read(t, "["+one+"]"), after: read(t, "["+two+"]"),
			want: okv("COUNT_EXACT").with(1, 1), matched: []string{"2"}},
		{name: "count_new_only without baseline identities (empty baseline)", contract: "{" + base + `, "count_new_only": true}`,
			before: empty, after: read(t, "["+one+"]"),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "count_new_only with custom identity_field", contract: "{" + base + `, "count_new_only": true, "identity_field": "uuid"}`,
			before: read(t, `[{"uuid": "a", "id": 1, "patient_id": "p1", "type": "Triage"}]`),
			after:  read(t, `[{"uuid": "a", "id": 7, "patient_id": "p1", "type": "Triage"}, {"uuid": "b", "id": 1, "patient_id": "p1", "type": "Triage"}]`),
			want:   okv("COUNT_EXACT").with(1, 1), matched: []string{"1"}},
		{name: "count_new_only records without id by whole JSON", contract: `{"kind": "record_written", "match": {"t": "x"}, "count_new_only": true}`,
			before: read(t, `[{"t": "x", "n": 1}]`), after: read(t, `[{"n": 1.0, "t": "x"}, {"t": "x", "n": 2}]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "idempotency key filter", contract: "{" + base + `, "idempotency_key": "abc"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "key": "abc"}, {"id": 2, "patient_id": "p1", "type": "Triage", "key": "xyz"}, {"id": 3, "patient_id": "p1", "type": "Triage"}]`),
			want:  okv("COUNT_EXACT").with(1, 1), matched: []string{"1"}},
		{name: "idempotency key bound from param", contract: "{" + base + `, "idempotency_key": {"param": "k"}}`, params: map[string]string{"k": "xyz"}, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "key": "abc"}, {"id": 2, "patient_id": "p1", "type": "Triage", "key": "xyz"}]`),
			want:  okv("COUNT_EXACT").with(1, 1), matched: []string{"2"}},
		{name: "idempotency key numeric canonical", contract: "{" + base + `, "idempotency_key": "42"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "key": 42.0}]`),
			want:  okv("COUNT_EXACT").with(1, 1)},
		{name: "idempotency key missing", contract: "{" + base + `, "idempotency_key": "abc"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage"}]`),
			want:  refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "idempotency key custom key_field", contract: "{" + base + `, "idempotency_key": "abc", "key_field": "idem"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "key": "abc"}, {"id": 2, "patient_id": "p1", "type": "Triage", "idem": "abc"}]`),
			want:  okv("COUNT_EXACT").with(1, 1), matched: []string{"2"}},
		{name: "idempotency key duplicates", contract: "{" + base + `, "idempotency_key": "abc"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "key": "abc"}, {"id": 2, "patient_id": "p1", "type": "Triage", "key": "abc"}]`),
			want:  refuted(ClassConflicting, "COUNT_OVER").with(2, 1)},
		{name: "collateral loss", contract: "{" + base + "}", before: read(t, "["+other+"]"), after: read(t, "["+one+"]"),
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1)},
		{name: "collateral loss with nothing landed is conflicting", contract: "{" + base + `, "expected_count": 0}`,
			before: read(t, "["+other+"]"), after: empty,
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(0, 0)},
		{name: "matching baseline record vanishing is no loss", contract: "{" + base + "}", before: read(t, "["+two+"]"), after: read(t, "["+one+"]"),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "non-matching baseline record updated in place is no loss", contract: "{" + base + "}",
			before: read(t, `[{"id": 9, "patient_id": "p0", "type": "Consult", "note": "old"}]`),
			after:  read(t, `[{"id": 9, "patient_id": "p0", "type": "Consult", "note": "new"}, `+one+`]`),
			want:   okv("COUNT_EXACT").with(1, 1)},
		{name: "non-matching baseline record now matching is no loss", contract: "{" + base + "}",
			before: read(t, `[{"id": 1, "patient_id": "p1", "type": "Draft"}]`),
			after:  read(t, "["+one+"]"),
			want:   okv("COUNT_EXACT").with(1, 1)},
		{name: "collateral identity 1 vs \"1\" is no loss", contract: "{" + base + "}",
			before: read(t, `[{"id": 9, "patient_id": "p0"}]`),
			after:  read(t, `[{"id": "9", "patient_id": "p0"}, `+one+`]`),
			want:   okv("COUNT_EXACT").with(1, 1)},
		{name: "collateral by whole record, unchanged", contract: "{" + base + "}",
			before: read(t, `[{"name": "x", "n": 1}]`), after: read(t, `[{"n": 1.0, "name": "x"}, `+one+`]`),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "collateral by whole record, changed", contract: "{" + base + "}",
			before: read(t, `[{"name": "x", "n": 1}]`), after: read(t, `[{"name": "x", "n": 2}, `+one+`]`),
			want: refuted(ClassConflicting, "COLLATERAL_LOSS").with(1, 1)},
		{name: "collateral off", contract: "{" + base + `, "forbid_collateral_loss": false}`, before: read(t, "["+other+"]"), after: read(t, "["+one+"]"),
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "reason order under then loss", contract: "{" + base + "}", before: read(t, "["+other+"]"), after: empty,
			want: refuted(ClassConflicting, "COUNT_UNDER", "COLLATERAL_LOSS").with(0, 1)},
		{name: "reason order over then loss", contract: "{" + base + "}", before: read(t, "["+other+"]"), after: read(t, "["+one+","+two+"]"),
			want: refuted(ClassConflicting, "COUNT_OVER", "COLLATERAL_LOSS").with(2, 1)},
		{name: "custom identity_field for collateral", contract: "{" + base + `, "identity_field": "uuid"}`,
			before: read(t, `[{"uuid": "u9", "id": 9, "patient_id": "p0"}]`),
			after:  read(t, `[{"uuid": "u9", "id": 10, "patient_id": "p0"}, `+one+`]`),
			want:   okv("COUNT_EXACT").with(1, 1)},
	}
	runJudgeCases(t, tests)
}

// docs/contracts.md §3.4 field_equals.
func TestFieldEquals(t *testing.T) {
	t.Parallel()
	const base = `"kind": "field_equals", "match": {"patient_id": "p1", "type": "Triage"}, "field": "note"`
	fe := func(value string) string { return "{" + base + `, "value": ` + value + "}" }
	empty := read(t, `[]`)
	tests := []judgeCase{
		{name: "no match", contract: fe(`"N"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p2", "type": "Triage", "note": "N"}]`),
			want: summary{Decision: Refuted, Class: ClassRefuted, Codes: []string{"FIELD_NO_MATCH"}, Observed: new(0), Expected: new(1), ExpectedValue: new("N")}},
		{name: "ambiguous even if values agree", contract: fe(`"N"`), before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}, {"id": 2, "patient_id": "p1", "type": "Triage", "note": "N"}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_AMBIGUOUS"}, Observed: new(2), Expected: new(1), ExpectedValue: new("N")}},
		{name: "equal", contract: fe(`"N"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}]`),
			want:    summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("N"), ExpectedValue: new("N")},
			matched: []string{"1"}},
		{name: "equal canonical number", contract: fe(`"1000"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": 1e3}]`),
			want: summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("1000"), ExpectedValue: new("1000")}},
		{name: "equal param", contract: fe(`{"param": "n"}`), params: map[string]string{"n": "Follow-up"}, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "Follow-up"}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("Follow-up"), ExpectedValue: new("Follow-up")}},
		{name: "mismatch", contract: fe(`"N"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "n"}]`),
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new("n"), ExpectedValue: new("N")}},
		{name: "mismatch blank partial save", contract: fe(`"N"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": ""}]`),
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new(""), ExpectedValue: new("N")}},
		{name: "missing field with value empty is mismatch", contract: fe(`""`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage"}]`),
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ExpectedValue: new("")}},
		{name: "null field with value empty is mismatch", contract: fe(`""`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": null}]`),
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ExpectedValue: new("")}},
		{name: "null field with value None is mismatch", contract: fe(`"None"`), before: empty, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": null}]`),
			want: summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ExpectedValue: new("None")}},
		{name: "baseline not needed", contract: fe(`"N"`), before: down, after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}]`),
			want: summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("N"), ExpectedValue: new("N")}},
		{name: "baseline not used", contract: fe(`"N"`), before: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}, {"id": 5}]`),
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "N"}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("N"), ExpectedValue: new("N")}},
		{name: "idempotency key narrows to one", contract: "{" + base + `, "value": "N", "idempotency_key": "k2"}`, before: empty,
			after: read(t, `[{"id": 1, "patient_id": "p1", "type": "Triage", "note": "X", "key": "k1"}, {"id": 2, "patient_id": "p1", "type": "Triage", "note": "N", "key": "k2"}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("N"), ExpectedValue: new("N")}, matched: []string{"2"}},
		{name: "object field never equals its JSON text", contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "o", "value": "{\"a\":1,\"b\":2}"}`, before: empty,
			after: read(t, `[{"id": 1, "o": {"b": 2, "a": 1.0}}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new(`{"a":1,"b":2}`), ExpectedValue: new(`{"a":1,"b":2}`)}},
		{name: "object selector value never matches", contract: `{"kind": "field_equals", "match": {"o": "{\"a\":1}"}, "field": "id", "value": "1"}`, before: empty,
			after: read(t, `[{"id": 1, "o": {"a": 1}}]`),
			want:  summary{Decision: Refuted, Class: ClassRefuted, Codes: []string{"FIELD_NO_MATCH"}, Observed: new(0), Expected: new(1), ExpectedValue: new("1")}},
		{name: "object idempotency key never matches", contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "id", "value": "1", "idempotency_key": "[1]"}`, before: empty,
			after: read(t, `[{"id": 1, "key": [1]}]`),
			want:  summary{Decision: Refuted, Class: ClassRefuted, Codes: []string{"FIELD_NO_MATCH"}, Observed: new(0), Expected: new(1), ExpectedValue: new("1")}},
	}
	runJudgeCases(t, tests)
}

// docs/contracts.md §3.5 exact_new_set.
func TestExactNewSet(t *testing.T) {
	t.Parallel()
	const two = `"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2`
	const scoped = `"kind": "exact_new_set", "match": {"user_id": "32"}, "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2`
	empty := read(t, `[]`)
	pre := `{"id": 0, "user_id": "7", "song_id": "1"}`
	a := `{"id": 1, "user_id": "32", "song_id": "199"}`
	b := `{"id": 2, "user_id": "32", "song_id": "9"}`
	tests := []judgeCase{
		{name: "exact", contract: "{" + two + "}", before: read(t, "["+pre+"]"), after: read(t, "["+pre+","+a+","+b+"]"),
			want: okv("SET_EXACT").with(2, 2), matched: []string{"1", "2"}},
		{name: "identity missing in after", contract: "{" + two + "}", before: read(t, "["+pre+"]"), after: read(t, "["+pre+","+a+`,{"user_id": "32", "song_id": "9"}]`),
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "identity missing in before out of scope", contract: "{" + scoped + "}", before: read(t, `[{"user_id": "7", "song_id": "1"}]`), after: read(t, "["+a+","+b+"]"),
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "identity missing in after out of scope", contract: "{" + scoped + "}", before: empty, after: read(t, "["+a+","+b+`,{"user_id": "7"}]`),
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "identity null is missing", contract: "{" + two + "}", before: read(t, `[{"id": null, "user_id": "7"}]`), after: read(t, "["+a+","+b+"]"),
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "custom identity_field missing", contract: "{" + two + `, "identity_field": "uuid"}`, before: empty, after: read(t, "["+a+","+b+"]"),
			want: indet(ClassIndeterminate, "IDENTITY_MISSING")},
		{name: "in-place update is not an addition", contract: "{" + two + "}",
			before: read(t, `[{"id": 1, "user_id": "32", "song_id": "5"}, {"id": 2, "user_id": "32", "song_id": "6"}]`), after: read(t, "["+a+","+b+"]"),
			want: refuted(ClassRefuted, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY").with(0, 2)},
		{name: "identity 1 vs \"1\" is not an addition", contract: `{"kind": "exact_new_set", "new_records": [{"s": "x"}]}`,
			before: read(t, `[{"id": 1, "s": "x"}]`), after: read(t, `[{"id": "1", "s": "x"}]`),
			want: refuted(ClassRefuted, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY").with(0, 1)},
		{name: "one missing", contract: "{" + two + "}", before: empty, after: read(t, "["+a+"]"),
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY").with(1, 2)},
		{name: "cardinality and undeclared", contract: "{" + two + "}", before: empty, after: read(t, "["+a+","+b+`,{"id": 3, "user_id": "32", "song_id": "500"}]`),
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_UNDECLARED").with(3, 2)},
		{name: "swap: right count, wrong member", contract: "{" + two + "}", before: empty, after: read(t, "["+a+`,{"id": 3, "user_id": "32", "song_id": "500"}]`),
			want: refuted(ClassConflicting, "SET_MEMBER_MULTIPLICITY", "SET_UNDECLARED").with(2, 2)},
		{name: "repeated selector satisfied", contract: `{"kind": "exact_new_set", "new_records": [{"s": "x"}, {"s": "x"}], "expected_count": 2}`,
			before: empty, after: read(t, `[{"id": 1, "s": "x"}, {"id": 2, "s": "x"}]`),
			want: okv("SET_EXACT").with(2, 2)},
		{name: "repeated selector under-added", contract: `{"kind": "exact_new_set", "new_records": [{"s": "x"}, {"s": "x"}], "expected_count": 2}`,
			before: empty, after: read(t, `[{"id": 1, "s": "x"}, {"id": 2, "s": "y"}]`),
			want: refuted(ClassConflicting, "SET_MEMBER_MULTIPLICITY", "SET_UNDECLARED").with(2, 2)},
		{name: "repeated selector over-added", contract: `{"kind": "exact_new_set", "new_records": [{"s": "x"}, {"s": "y"}], "expected_count": 2}`,
			before: empty, after: read(t, `[{"id": 1, "s": "x"}, {"id": 2, "s": "x"}]`),
			want: refuted(ClassConflicting, "SET_MEMBER_MULTIPLICITY").with(2, 2)},
		{name: "one record satisfies several members", contract: `{"kind": "exact_new_set", "new_records": [{"u": "32"}, {"s": "9"}], "expected_count": 2}`,
			before: empty, after: read(t, `[{"id": 1, "u": "32", "s": "9"}]`),
			want: refuted(ClassConflicting, "SET_CARDINALITY").with(1, 2)},
		{name: "overlapping members over-satisfied", contract: `{"kind": "exact_new_set", "new_records": [{"u": "32"}, {"s": "9"}], "expected_count": 2}`,
			before: empty, after: read(t, `[{"id": 1, "u": "32", "s": "9"}, {"id": 2, "u": "32", "s": "8"}]`),
			want: refuted(ClassConflicting, "SET_MEMBER_MULTIPLICITY").with(2, 2)},
		{name: "out-of-scope addition ignored", contract: "{" + scoped + "}", before: empty, after: read(t, "["+a+","+b+`,{"id": 3, "user_id": "7", "song_id": "1"}]`),
			want: okv("SET_EXACT").with(2, 2)},
		{name: "scope loss", contract: "{" + scoped + "}", before: read(t, `[{"id": 5, "user_id": "32", "song_id": "77"}]`), after: read(t, "["+a+","+b+"]"),
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(2, 2)},
		{name: "scope loss with nothing added is conflicting", contract: `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`,
			before: read(t, `[{"id": 5, "user_id": "32"}]`), after: empty,
			want: refuted(ClassConflicting, "SET_SCOPE_LOSS").with(0, 0)},
		{name: "out-of-scope loss ignored", contract: "{" + scoped + "}", before: read(t, "["+pre+"]"), after: read(t, "["+a+","+b+"]"),
			want: okv("SET_EXACT").with(2, 2)},
		{name: "scope loss off", contract: "{" + scoped + `, "forbid_collateral_loss": false}`, before: read(t, `[{"id": 5, "user_id": "32", "song_id": "77"}]`), after: read(t, "["+a+","+b+"]"),
			want: okv("SET_EXACT").with(2, 2)},
		{name: "in-scope record moved out of scope is no loss", contract: "{" + scoped + "}", before: read(t, `[{"id": 5, "user_id": "32", "song_id": "77"}]`),
			after: read(t, "["+a+","+b+`,{"id": 5, "user_id": "8", "song_id": "77"}]`),
			want:  okv("SET_EXACT").with(2, 2)},
		{name: "all reasons in order", contract: "{" + scoped + "}", before: read(t, `[{"id": 5, "user_id": "32", "song_id": "77"}]`),
			after: read(t, "["+a+`,{"id": 3, "user_id": "32", "song_id": "500"},{"id": 4, "user_id": "32", "song_id": "501"}]`),
			want:  refuted(ClassConflicting, "SET_CARDINALITY", "SET_MEMBER_MULTIPLICITY", "SET_UNDECLARED", "SET_SCOPE_LOSS").with(3, 2)},
		{name: "empty set confirms", contract: `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`,
			before: read(t, "["+pre+"]"), after: read(t, "["+pre+"]"),
			want: okv("SET_EXACT").with(0, 0)},
		{name: "empty set with addition", contract: `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`,
			before: empty, after: read(t, "["+a+"]"),
			want: refuted(ClassConflicting, "SET_CARDINALITY", "SET_UNDECLARED").with(1, 0)},
		{name: "param member", contract: `{"kind": "exact_new_set", "new_records": [{"song_id": {"param": "s"}}]}`, params: map[string]string{"s": "9"},
			before: empty, after: read(t, "["+b+"]"),
			want: okv("SET_EXACT").with(1, 1)},
	}
	runJudgeCases(t, tests)
}

func TestExactNewSetUndeclaredMessage(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`, nil)
	var after strings.Builder
	after.WriteString("[")
	for i := range 7 {
		if i > 0 {
			after.WriteString(",")
		}
		fmt.Fprintf(&after, `{"id": %d, "s": "x"}`, 101+i)
	}
	after.WriteString("]")
	v := Judge(c, read(t, `[]`), read(t, after.String()), Options{})
	if d := cmp.Diff([]string{"SET_CARDINALITY", "SET_UNDECLARED"}, v.Codes()); d != "" {
		t.Fatalf("codes (-want +got):\n%s", d)
	}
	msg := v.Reasons[1].Message
	if !regexp.MustCompile(`(^|\D)7(\D|$)`).MatchString(msg) {
		t.Errorf("SET_UNDECLARED message %q does not give the exact count 7", msg)
	}
	samples := 0
	for i := range 7 {
		if strings.Contains(msg, fmt.Sprint(101+i)) {
			samples++
		}
	}
	if samples < 1 || samples > 5 {
		t.Errorf("SET_UNDECLARED message %q gives %d samples, want 1..5", msg, samples)
	}
}

// docs/contracts.md §3.1 and §3.2.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	good := read(t, `[{"id": 1, "patient_id": "p1"}]`)
	tests := []judgeCase{
		{name: "after down record_written", contract: `{"kind": "record_written", "match": {"patient_id": "p1"}}`, before: good, after: down,
			want: indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{name: "after down field_equals", contract: `{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "id", "value": "1"}`, before: good, after: down,
			want: summary{Decision: Indeterminate, Class: ClassUnavailable, Codes: []string{"SOR_UNREACHABLE"}, ExpectedValue: new("1")}},
		{name: "after down exact_new_set", contract: `{"kind": "exact_new_set", "new_records": [{"a": "b"}]}`, before: good, after: down,
			want: indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{name: "both down: after first", contract: `{"kind": "record_written"}`, before: down, after: down,
			want: indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{name: "baseline needed: record_written collateral on (default)", contract: `{"kind": "record_written", "match": {"patient_id": "p1"}}`, before: down, after: good,
			want: indet(ClassIndeterminate, "BASELINE_UNREACHABLE")},
		{name: "baseline needed: count_new_only without collateral", contract: `{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "forbid_collateral_loss": false}`, before: down, after: good,
			want: indet(ClassIndeterminate, "BASELINE_UNREACHABLE")},
		{name: "baseline needed: exact_new_set", contract: `{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}]}`, before: down, after: good,
			want: indet(ClassIndeterminate, "BASELINE_UNREACHABLE")},
		{name: "baseline needed: exact_new_set collateral off", contract: `{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "forbid_collateral_loss": false}`, before: down, after: good,
			want: indet(ClassIndeterminate, "BASELINE_UNREACHABLE")},
		{name: "baseline not needed: record_written collateral off", contract: `{"kind": "record_written", "match": {"patient_id": "p1"}, "forbid_collateral_loss": false}`, before: down, after: good,
			want: okv("COUNT_EXACT").with(1, 1)},
		{name: "baseline not needed: field_equals", contract: `{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "id", "value": "1"}`, before: down, after: good,
			want: summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("1"), ExpectedValue: new("1")}},
	}
	runJudgeCases(t, tests)

	c := bindOne(t, `{"kind": "record_written"}`, nil)
	if v := Judge(c, good, down, Options{}); !v.Unavailable {
		t.Errorf("after unreachable: Unavailable not set")
	}
	if v := Judge(c, down, good, Options{}); v.Unavailable {
		t.Errorf("baseline unreachable: Unavailable set")
	}
}

func TestNeedsBaseline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want bool
	}{
		{`{"kind": "record_written"}`, true},
		{`{"kind": "record_written", "forbid_collateral_loss": false}`, false},
		{`{"kind": "record_written", "forbid_collateral_loss": false, "count_new_only": true}`, true},
		{`{"kind": "field_equals", "field": "f", "value": "v"}`, false},
		{`{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "forbid_collateral_loss": false}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			t.Parallel()
			if got := NeedsBaseline(bindOne(t, tc.src, nil)); got != tc.want {
				t.Errorf("NeedsBaseline = %v, want %v", got, tc.want)
			}
		})
	}
}

// docs/contracts.md §3.6 freshness.
func TestFreshness(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fresh := Options{Freshness: &Freshness{Field: "ts", WindowS: 60, Now: now}}
	const rw = `{"kind": "record_written", "match": {"p": "1"}}`
	empty := read(t, `[]`)
	withTS := func(ts string) Snapshot {
		return read(t, `[{"id": 1, "p": "1", "ts": `+ts+`}]`)
	}
	stale := indet(ClassStale, "STALE")
	tests := []judgeCase{
		{name: "epoch number", contract: rw, before: empty, after: withTS(`1767268800`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "epoch number fractional", contract: rw, before: empty, after: withTS(`1767268770.5`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "epoch number old", contract: rw, before: empty, after: withTS(`1767268739`), opts: fresh, want: stale},
		{name: "epoch numeric string", contract: rw, before: empty, after: withTS(`"1767268790"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "epoch numeric string old", contract: rw, before: empty, after: withTS(`"1767268700"`), opts: fresh, want: stale},
		{name: "rfc3339 Z", contract: rw, before: empty, after: withTS(`"2026-01-01T11:59:30Z"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "rfc3339 fractional seconds", contract: rw, before: empty, after: withTS(`"2026-01-01T11:59:30.123456Z"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "rfc3339 offset", contract: rw, before: empty, after: withTS(`"2026-01-01T13:59:30+02:00"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "rfc3339 negative offset", contract: rw, before: empty, after: withTS(`"2026-01-01T06:59:30-05:00"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "rfc3339 offset old", contract: rw, before: empty, after: withTS(`"2026-01-01T11:59:30+02:00"`), opts: fresh, want: stale},
		{name: "no offset is UTC", contract: rw, before: empty, after: withTS(`"2026-01-01T11:59:30"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "no offset is UTC, not local", contract: rw, before: empty, after: withTS(`"2026-01-01T13:59:30"`), opts: fresh, want: stale},
		{name: "age equal to window is fresh", contract: rw, before: empty, after: withTS(`"2026-01-01T11:59:00Z"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "age equal to window epoch is fresh", contract: rw, before: empty, after: withTS(`1767268740`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "1s over window is stale", contract: rw, before: empty, after: withTS(`"2026-01-01T11:58:59Z"`), opts: fresh, want: stale},
		{name: "future within window is fresh", contract: rw, before: empty, after: withTS(`"2026-01-01T12:01:00Z"`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "future beyond window is stale", contract: rw, before: empty, after: withTS(`"2026-01-01T12:01:01Z"`), opts: fresh, want: stale},
		{name: "unparseable is stale", contract: rw, before: empty, after: withTS(`"yesterday"`), opts: fresh, want: stale},
		{name: "empty string is stale", contract: rw, before: empty, after: withTS(`""`), opts: fresh, want: stale},
		{name: "bool is stale", contract: rw, before: empty, after: withTS(`true`), opts: fresh, want: stale},
		{name: "null is stale", contract: rw, before: empty, after: withTS(`null`), opts: fresh, want: stale},
		{name: "missing is stale", contract: rw, before: empty, after: read(t, `[{"id": 1, "p": "1"}]`), opts: fresh, want: stale},
		{name: "one stale record among fresh demotes", contract: `{"kind": "record_written", "match": {"p": "1"}, "expected_count": 2}`, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "ts": "2026-01-01T11:59:59Z"}, {"id": 2, "p": "1", "ts": "2025-01-01T00:00:00Z"}]`), opts: fresh, want: stale},
		{name: "unmatched stale record ignored", contract: rw, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "ts": "2026-01-01T11:59:59Z"}, {"id": 2, "p": "2", "ts": "2025-01-01T00:00:00Z"}]`), opts: fresh, want: okv("COUNT_EXACT").with(1, 1)},
		{name: "confirmed absence not demoted", contract: `{"kind": "record_written", "match": {"p": "1"}, "expected_count": 0}`, before: empty,
			after: read(t, `[{"id": 2, "p": "2"}]`), opts: fresh, want: okv("COUNT_EXACT").with(0, 0)},
		{name: "refuted not demoted", contract: rw, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "ts": "2020-01-01T00:00:00Z"}, {"id": 2, "p": "1", "ts": "2020-01-01T00:00:00Z"}]`), opts: fresh,
			want: refuted(ClassConflicting, "COUNT_OVER").with(2, 1)},
		{name: "field_equals stale", contract: `{"kind": "field_equals", "match": {"p": "1"}, "field": "n", "value": "x"}`, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "n": "x", "ts": "2020-01-01T00:00:00Z"}]`), opts: fresh,
			want: summary{Decision: Indeterminate, Class: ClassStale, Codes: []string{"STALE"}, ObservedValue: new("x"), ExpectedValue: new("x")}},
		{name: "exact_new_set stale", contract: `{"kind": "exact_new_set", "new_records": [{"p": "1"}]}`, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "ts": "2020-01-01T00:00:00Z"}]`), opts: fresh, want: stale},
		{name: "exact_new_set fresh", contract: `{"kind": "exact_new_set", "new_records": [{"p": "1"}]}`, before: empty,
			after: read(t, `[{"id": 1, "p": "1", "ts": "2026-01-01T11:59:59Z"}]`), opts: fresh, want: okv("SET_EXACT").with(1, 1)},
		{name: "no freshness setting", contract: rw, before: empty, after: withTS(`"2020-01-01T00:00:00Z"`), want: okv("COUNT_EXACT").with(1, 1)},
	}
	runJudgeCases(t, tests)
}

// docs/contracts.md §3.6: only a record older than the window is stale, however
// wide the deployment sets the window.
func TestFreshnessWideWindow(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, w := range []float64{1e9, 1e10, 1e12} {
		opts := Options{Freshness: &Freshness{Field: "ts", WindowS: w, Now: now}}
		v := Judge(c, read(t, `[]`), read(t, `[{"id": 1, "p": "1", "ts": "2026-01-01T12:00:00Z"}]`), opts)
		if v.Decision != Confirmed {
			t.Errorf("window %gs: a record written now is %s %v", w, v.Decision, v.Reasons)
		}
	}
}

func TestFreshnessStaleShape(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
	opts := Options{Freshness: &Freshness{Field: "ts", WindowS: 60, Now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}}
	v := Judge(c, read(t, `[]`), read(t, `[{"id": 1, "p": "1", "ts": "2026-01-01T11:58:59Z"}]`), opts)
	if v.ObservedCount != nil || v.ExpectedCount != nil {
		t.Errorf("stale verdict has counts %v/%v, want nil", v.ObservedCount, v.ExpectedCount)
	}
	if !v.Stale || len(v.Reasons) != 1 || v.Reasons[0].Code != ReasonStale {
		t.Errorf("stale verdict: Stale=%v reasons=%+v, want the single reason STALE", v.Stale, v.Reasons)
	}
	if got := OutcomeOf([]Verdict{v}); got != ReconciliationRequired {
		t.Errorf("outcome %s, want RECONCILIATION_REQUIRED", got)
	}
}

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   any
		ok   bool
	}{
		{"json number", json.Number("1767268800"), true},
		{"json number fraction zero", json.Number("1767268800.0"), true},
		{"float64", 1767268800.0, true},
		{"int", 1767268800, true},
		{"int64", int64(1767268800), true},
		{"numeric string", "1767268800", true},
		{"numeric string padded", " 1767268800 ", true},
		{"Z", "2026-01-01T12:00:00Z", true},
		{"lowercase z", "2026-01-01T12:00:00z", true},
		{"offset", "2026-01-01T14:00:00+02:00", true},
		{"negative offset", "2026-01-01T07:00:00-05:00", true},
		{"offset no colon", "2026-01-01T14:00:00+0200", true},
		{"no offset", "2026-01-01T12:00:00", true},
		{"space separator", "2026-01-01 12:00:00Z", true},
		{"fraction", "2026-01-01T12:00:00.000Z", true},
		{"garbage", "noon", false},
		{"empty", "", false},
		{"nil", nil, false},
		{"bool", true, false},
		{"object", map[string]any{}, false},
		{"NaN string", "NaN", false},
		{"Inf string", "Inf", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTimestamp(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseTimestamp(%#v) = %v, %v; want ok=%v", tc.in, got, err, tc.ok)
			}
			if tc.ok && !got.Equal(want) {
				t.Errorf("ParseTimestamp(%#v) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// docs/contracts.md §4 result classes.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		v               Verdict
		absenceNotProof bool
		want            Class
	}{
		{"confirmed", Verdict{Decision: Confirmed, ObservedCount: new(1)}, false, ClassConfirmed},
		{"confirmed absence-not-proof", Verdict{Decision: Confirmed, ObservedCount: new(0)}, true, ClassConfirmed},
		{"stale", Verdict{Decision: Indeterminate, Stale: true}, false, ClassStale},
		{"unavailable", Verdict{Decision: Indeterminate, Unavailable: true}, false, ClassUnavailable},
		{"indeterminate", Verdict{Decision: Indeterminate, Reasons: []Reason{{Code: ReasonBaselineUnreachable}}}, false, ClassIndeterminate},
		{"indeterminate absence-not-proof", Verdict{Decision: Indeterminate}, true, ClassIndeterminate},
		{"refuted nothing landed", Verdict{Decision: Refuted, ObservedCount: new(0), Reasons: []Reason{{Code: ReasonCountUnder}}}, false, ClassRefuted},
		{"refuted nil count", Verdict{Decision: Refuted, Reasons: []Reason{{Code: ReasonCountUnder}}}, false, ClassRefuted},
		{"refuted observed > 0", Verdict{Decision: Refuted, ObservedCount: new(1), Reasons: []Reason{{Code: ReasonCountUnder}}}, false, ClassConflicting},
		{"refuted collateral loss", Verdict{Decision: Refuted, ObservedCount: new(0), Reasons: []Reason{{Code: ReasonCountUnder}, {Code: ReasonCollateralLoss}}}, false, ClassConflicting},
		{"refuted scope loss", Verdict{Decision: Refuted, ObservedCount: new(0), Reasons: []Reason{{Code: ReasonSetScopeLoss}}}, false, ClassConflicting},
		{"absence not proof", Verdict{Decision: Refuted, ObservedCount: new(0), Reasons: []Reason{{Code: ReasonCountUnder}}}, true, ClassConflicting},
		{"absence not proof field no match", Verdict{Decision: Refuted, ObservedCount: new(0), Reasons: []Reason{{Code: ReasonFieldNoMatch}}}, true, ClassConflicting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(&tc.v, Options{AbsenceNotProof: tc.absenceNotProof}); got != tc.want {
				t.Errorf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAbsenceNotProofThroughJudge(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
	v := Judge(c, read(t, `[]`), read(t, `[]`), Options{AbsenceNotProof: true})
	if d := cmp.Diff(refuted(ClassConflicting, "COUNT_UNDER").with(0, 1), summarize(v)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got := OutcomeOf([]Verdict{v}); got != ReconciliationRequired {
		t.Errorf("outcome %s, want RECONCILIATION_REQUIRED (never HALTED_BEFORE_EFFECT)", got)
	}
	v = Judge(c, read(t, `[]`), read(t, `[]`), Options{})
	if v.Class != ClassRefuted || OutcomeOf([]Verdict{v}) != HaltedBeforeEffect {
		t.Errorf("without AbsenceNotProof: class %s outcome %s, want refuted HALTED_BEFORE_EFFECT", v.Class, OutcomeOf([]Verdict{v}))
	}
}

func TestStepOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		classes []Class
		want    Outcome
	}{
		{"one confirmed", []Class{ClassConfirmed}, Verified},
		{"all confirmed", []Class{ClassConfirmed, ClassConfirmed, ClassConfirmed}, Verified},
		{"one refuted", []Class{ClassRefuted}, HaltedBeforeEffect},
		{"all refuted", []Class{ClassRefuted, ClassRefuted}, HaltedBeforeEffect},
		{"confirmed and refuted", []Class{ClassConfirmed, ClassRefuted}, ReconciliationRequired},
		{"refuted and confirmed", []Class{ClassRefuted, ClassConfirmed}, ReconciliationRequired},
		{"refuted and conflicting", []Class{ClassRefuted, ClassConflicting}, ReconciliationRequired},
		{"conflicting", []Class{ClassConflicting}, ReconciliationRequired},
		{"stale", []Class{ClassStale}, ReconciliationRequired},
		{"unavailable", []Class{ClassUnavailable}, ReconciliationRequired},
		{"indeterminate", []Class{ClassIndeterminate}, ReconciliationRequired},
		{"confirmed and stale", []Class{ClassConfirmed, ClassStale}, ReconciliationRequired},
		{"refuted and indeterminate", []Class{ClassRefuted, ClassIndeterminate}, ReconciliationRequired},
		{"empty proves nothing", nil, ReconciliationRequired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := StepOutcome(tc.classes); got != tc.want {
				t.Errorf("StepOutcome(%v) = %s, want %s", tc.classes, got, tc.want)
			}
			vs := make([]Verdict, len(tc.classes))
			for i, c := range tc.classes {
				vs[i].Class = c
			}
			if got := OutcomeOf(vs); got != tc.want {
				t.Errorf("OutcomeOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStepOutcomeThroughJudge(t *testing.T) {
	t.Parallel()
	write := bindOne(t, `{"kind": "record_written", "match": {"type": "Triage"}, "forbid_collateral_loss": false}`, nil)
	read2 := bindOne(t, `{"kind": "field_equals", "match": {"type": "Triage"}, "field": "note", "value": "N"}`, nil)
	absent := bindOne(t, `{"kind": "record_written", "match": {"type": "Consult"}, "forbid_collateral_loss": false}`, nil)
	before := read(t, `[]`)
	after := read(t, `[{"id": 1, "type": "Triage", "note": "N"}]`)
	if got := OutcomeOf([]Verdict{Judge(write, before, after, Options{}), Judge(read2, before, after, Options{})}); got != Verified {
		t.Errorf("write and read-back: %s, want VERIFIED", got)
	}
	if got := OutcomeOf([]Verdict{Judge(write, before, after, Options{}), Judge(absent, before, after, Options{})}); got != ReconciliationRequired {
		t.Errorf("one landed one absent: %s, want RECONCILIATION_REQUIRED", got)
	}
	if got := OutcomeOf([]Verdict{Judge(absent, before, after, Options{}), Judge(absent, before, after, Options{})}); got != HaltedBeforeEffect {
		t.Errorf("nothing landed: %s, want HALTED_BEFORE_EFFECT", got)
	}
}

// docs/contracts.md §4: a plugin can demote a verdict but never promote one.
func TestDemote(t *testing.T) {
	t.Parallel()
	confirmed := func() Verdict {
		c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
		return Judge(c, read(t, `[]`), read(t, `[{"id": 1, "p": "1"}]`), Options{})
	}
	refutedNothing := func() Verdict {
		c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
		return Judge(c, read(t, `[]`), read(t, `[]`), Options{})
	}
	indeterminate := func() Verdict {
		c := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}}`, nil)
		return Judge(c, read(t, `[]`), down, Options{})
	}
	tests := []struct {
		name    string
		v       Verdict
		to      Decision
		applied bool
		want    summary
	}{
		{"indeterminate to confirmed ignored", indeterminate(), Confirmed, false, indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{"refuted to confirmed ignored", refutedNothing(), Confirmed, false, refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{"indeterminate to refuted ignored", indeterminate(), Refuted, false, indet(ClassUnavailable, "SOR_UNREACHABLE")},
		{"confirmed to confirmed ignored", confirmed(), Confirmed, false, okv("COUNT_EXACT").with(1, 1)},
		{"confirmed to refuted", confirmed(), Refuted, true, refuted(ClassConflicting, "PLUGIN_DOUBT").with(1, 1)},
		{"confirmed to indeterminate", confirmed(), Indeterminate, true, indet(ClassIndeterminate, "PLUGIN_DOUBT")},
		{"bogus decision ignored", confirmed(), Decision("MAYBE"), false, okv("COUNT_EXACT").with(1, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.v
			applied := Demote(&v, tc.to, "PLUGIN_DOUBT", "the page looked odd", Options{})
			if applied != tc.applied {
				t.Errorf("Demote applied = %v, want %v", applied, tc.applied)
			}
			if d := cmp.Diff(tc.want, summarize(v)); d != "" {
				t.Errorf("after Demote (-want +got):\n%s", d)
			}
			if v.Decision != Confirmed && v.Class == ClassConfirmed {
				t.Errorf("non-confirmed verdict classed confirmed")
			}
		})
	}
	// Default code, and reclassification with absence-not-proof.
	v := confirmed()
	if !Demote(&v, Indeterminate, "", "msg", Options{}) || v.Codes()[0] != ReasonAdapterDemoted {
		t.Errorf("empty code: codes %v, want %s", v.Codes(), ReasonAdapterDemoted)
	}
	// A demotion is reclassified with the adapter's absence-not-proof flag.
	v = confirmed()
	if !Demote(&v, Refuted, "GONE", "msg", Options{AbsenceNotProof: true}) || v.Class != ClassConflicting {
		t.Errorf("confirmed to refuted with absence-not-proof: class %s, want conflicting", v.Class)
	}
}
