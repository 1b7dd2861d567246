package judge

import (
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestCanonDecimal pins the canonical form of §2a's decimal text.
func TestCanonDecimal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"1234.5", "1234.5", true},
		{"1234.50", "1234.5", true},
		{"1.2345e3", "1234.5", true},
		{"1.2345E+3", "1234.5", true},
		{"+1234.500", "1234.5", true},
		{"001234.5", "1234.5", true},
		{"-0", "0", true},
		{"-0.000", "0", true},
		{"24.0", "24", true},
		{"2.4e1", "24", true},
		{"-3e2", "-300", true},
		{"5e-1", "0.5", true},
		{"0.0000012", "0.0000012", true},
		{"123456789012345678901234567890.10", "123456789012345678901234567890.1", true},
		{"1e99999999999999999999", "1e99999999999999999999", true},
		{"", "", false},
		{"+", "", false},
		{"1.", "", false},
		{".5", "", false},
		{"1e", "", false},
		{"1e+", "", false},
		{" 1", "", false},
		{"1 ", "", false},
		{"1,234.5", "", false},
		{"1_000", "", false},
		{"0x10", "", false},
		{"NaN", "", false},
		{"Infinity", "", false},
		{"1/2", "", false},
		{"--1", "", false},
		{"１２", "", false},
	} {
		got, ok := compact.CanonDecimal(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("compact.CanonDecimal(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// decimalGrammar is §2a's decimal text, written independently of the judge.
var decimalGrammar = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// ratOf parses decimal text with math/big, independently of compact.CanonDecimal.
func ratOf(s string) (*big.Rat, bool) {
	if !decimalGrammar.MatchString(s) {
		return nil, false
	}
	// big.Rat reads exponents; keep them small enough to compute.
	if i := strings.IndexAny(s, "eE"); i >= 0 && len(s)-i > 5 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// TestTypedEqualityAgreesWithBigRat: two decimal texts have the same
// canonical form exactly when math/big says their values are equal.
func TestTypedEqualityAgreesWithBigRat(t *testing.T) {
	t.Parallel()
	texts := []string{"0", "-0", "0.0", "1", "1.0", "01", "+1", "1e0", "10e-1", "0.1e1", "1234.5", "1234.50", "1.2345e3",
		"12345e-1", "2", "2.5", "-2.5", "-25e-1", "24", "24.0", "2.4e1", "240e-1", "1e3", "1000", "1000.000", "999.9999",
		"0.001", "1e-3", "1E-3", "+0.0010", "7", "-7", "7.0000001"}
	for _, a := range texts {
		ra, _ := ratOf(a)
		ca, okA := compact.CanonDecimal(a)
		if !okA || ra == nil {
			t.Fatalf("%q does not parse", a)
		}
		for _, b := range texts {
			rb, _ := ratOf(b)
			cb, _ := compact.CanonDecimal(b)
			if (ca == cb) != (ra.Cmp(rb) == 0) {
				t.Errorf("%q and %q: canonical %q / %q, but big.Rat equal = %v", a, b, ca, cb, ra.Cmp(rb) == 0)
			}
			// Integer: both integral and equal.
			ia, okIA := typedText(AsInteger, compact.KindString, a)
			ib, okIB := typedText(AsInteger, compact.KindString, b)
			if okIA != ra.IsInt() || okIB != rb.IsInt() {
				t.Errorf("integer parse of %q: %v (IsInt %v); of %q: %v (IsInt %v)", a, okIA, ra.IsInt(), b, okIB, rb.IsInt())
			}
			if okIA && okIB && (ia == ib) != (ra.Cmp(rb) == 0) {
				t.Errorf("integers %q and %q: %q / %q", a, b, ia, ib)
			}
		}
	}
}

func TestTypedTextKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		as   As
		kind compact.ValueKind
		text string
		want string
		ok   bool
	}{
		{AsDecimal, compact.KindNumber, "1234.5", "1234.5", true},
		{AsDecimal, compact.KindString, "1234.50", "1234.5", true},
		{AsDecimal, compact.KindBool, "true", "", false},
		{AsDecimal, compact.KindObject, `{"a":1}`, "", false},
		{AsDecimal, compact.KindString, "12,5", "", false},
		{AsInteger, compact.KindNumber, "24", "24", true},
		{AsInteger, compact.KindString, "24.0", "24", true},
		{AsInteger, compact.KindNumber, "24.5", "", false},
		{AsInteger, compact.KindString, "1e400", "1" + strings.Repeat("0", 400), true},
		{AsBoolean, compact.KindBool, "true", "true", true},
		{AsBoolean, compact.KindString, "TRUE", "true", true},
		{AsBoolean, compact.KindString, "False", "false", true},
		{AsBoolean, compact.KindString, "yes", "", false},
		{AsBoolean, compact.KindString, "1", "", false},
		{AsBoolean, compact.KindNumber, "1", "", false},
		{"", compact.KindString, "x", "x", true},
		{"", compact.KindNumber, "1", "1", true},
		{"", compact.KindObject, `{}`, "", false},
		{"", compact.KindArray, `[]`, "", false},
		{"", compact.KindNull, "", "", false},
	} {
		got, ok := typedText(tc.as, tc.kind, tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("typedText(%q, %d, %q) = %q, %v; want %q, %v", tc.as, tc.kind, tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

// TestLoadAs: `as` at load, and its refusals naming the path.
func TestLoadAs(t *testing.T) {
	t.Parallel()
	e, err := loadOne(t, `{"kind": "field_equals", "match": {"n": {"literal": "2.0", "as": "integer"}, "p": {"param": "pid", "as": "text"}},
		"field": "amount", "value": {"param": "amount", "as": "decimal"}, "idempotency_key": {"literal": "TRUE", "as": "boolean"}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := Selector{"n": {Literal: "2.0", As: "integer"}, "p": {Param: "pid"}}
	if d := cmp.Diff(want, e.Match); d != "" {
		t.Errorf("match (-want +got):\n%s", d)
	}
	if *e.Value != (Value{Param: "amount", As: "decimal"}) || *e.IdempotencyKey != (Value{Literal: "TRUE", As: "boolean"}) {
		t.Errorf("value %+v, key %+v", *e.Value, *e.IdempotencyKey)
	}
	for _, tc := range []struct{ name, src, path, text string }{
		{"literal not a decimal", `{"kind": "record_written", "match": {"amount": {"literal": "12,5", "as": "decimal"}}}`, "effects[0].match.amount.literal", "decimal"},
		{"literal not an integer", `{"kind": "record_written", "match": {"n": {"literal": "2.5", "as": "integer"}}}`, "effects[0].match.n.literal", "integer"},
		{"literal not a boolean", `{"kind": "field_equals", "field": "f", "value": {"literal": "yes", "as": "boolean"}}`, "effects[0].value.literal", "boolean"},
		{"member literal", `{"kind": "exact_new_set", "new_records": [{"n": {"literal": "x", "as": "decimal"}}], "expected_count": 1}`, "effects[0].new_records[0].n.literal", "decimal"},
		{"unknown type", `{"kind": "record_written", "match": {"n": {"literal": "2", "as": "number"}}}`, "effects[0].match.n.as", "decimal"},
		{"type not text", `{"kind": "record_written", "match": {"n": {"literal": "2", "as": 1}}}`, "effects[0].match.n.as", "integer"},
		{"as alone", `{"kind": "record_written", "match": {"n": {"as": "decimal"}}}`, "effects[0].match.n", "literal or param"},
		{"as with a number", `{"kind": "record_written", "match": {"n": {"literal": 2, "as": "integer"}}}`, "effects[0].match.n.literal", `"2"`},
		{"new_only on record_written", `{"kind": "record_written", "new_only": true}`, "effects[0].new_only", "count_new_only"},
		{"new_only on exact_new_set", `{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "new_only": true}`, "effects[0].new_only", "field_equals"},
		{"new_only not a bool", `{"kind": "field_equals", "field": "f", "value": "v", "new_only": "yes"}`, "effects[0].new_only", "true or false"},
	} {
		_, err := loadOne(t, tc.src)
		var jerr *refusal.Error
		if !errors.As(err, &jerr) || jerr.Code != CodeInvalidContract || jerr.Path != tc.path || !strings.Contains(jerr.Message, tc.text) {
			t.Errorf("%s: %v, want INVALID_CONTRACT at %s mentioning %q", tc.name, err, tc.path, tc.text)
		}
	}
	// YAML reads the same value objects.
	effs, err := ParseEffects([]byte("- kind: field_equals\n  field: amount\n  value: {param: amount, as: decimal}\n  new_only: true\n"), "effects")
	if err != nil || *effs[0].Value != (Value{Param: "amount", As: "decimal"}) || !effs[0].NewOnly {
		t.Errorf("YAML: %+v, %v", effs, err)
	}
	if _, err := ParseEffects([]byte("- kind: record_written\n  match: {amount: {literal: 12.50, as: decimal}}\n"), "effects"); err == nil ||
		!strings.Contains(err.Error(), `"12.5"`) {
		t.Errorf("YAML number literal: %v, want a refusal suggesting \"12.5\"", err)
	}
	// new_only: false is accepted on every kind, as count_new_only: false is.
	if _, err := loadOne(t, `{"kind": "record_written", "new_only": false}`); err != nil {
		t.Errorf("new_only false: %v", err)
	}
}

// TestBindAs: a bound value under `as` is its canonical form; a run
// parameter that does not parse refuses binding, naming the parameter and
// never quoting its value.
func TestBindAs(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "field_equals", "match": {"n": {"param": "n", "as": "integer"}}, "field": "amount", "value": {"param": "amount", "as": "decimal"}}`,
		map[string]string{"n": "24.0", "amount": "1234.50"})
	if c.Match[0] != (Pair{Field: "n", Value: "24", As: AsInteger}) || *c.Value != "1234.5" || c.ValueAs != AsDecimal {
		t.Errorf("bound %+v value %q as %q", c.Match, *c.Value, c.ValueAs)
	}
	_, err := Bind(mustLoad(t, `{"kind": "field_equals", "field": "amount", "value": {"param": "amount", "as": "decimal"}}`),
		map[string]string{"amount": "1 234,50 EUR"}, "effects[0]")
	var jerr *refusal.Error
	if !errors.As(err, &jerr) || jerr.Code != CodeUnboundParam || jerr.Path != "effects[0].value.param" ||
		!strings.Contains(jerr.Message, `"amount"`) || !strings.Contains(jerr.Message, "decimal") || strings.Contains(jerr.Message, "EUR") {
		t.Errorf("unparseable param: %v", err)
	}
	// An effect built in Go skips the loader: Bind still refuses its literal.
	_, err = Bind(Effect{Kind: RecordWritten, Match: Selector{"n": {Literal: "x", As: "integer"}}}, nil, "effects[0]")
	if !errors.As(err, &jerr) || jerr.Code != CodeInvalidContract || jerr.Path != "effects[0].match.n.literal" {
		t.Errorf("Go-built literal: %v", err)
	}
	// A missing parameter is named first: it is the more basic fault.
	_, err = Bind(mustLoad(t, `{"kind": "record_written", "match": {"a": {"param": "a", "as": "integer"}, "b": {"param": "b"}}}`),
		map[string]string{"a": "x"}, "effects[0]")
	if !errors.As(err, &jerr) || jerr.Code != CodeUnboundParam || !strings.Contains(jerr.Message, "missing run parameter") {
		t.Errorf("missing and unparseable: %v", err)
	}
}

func mustLoad(t *testing.T, src string) Effect {
	t.Helper()
	e, err := loadOne(t, src)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestHashAs: `as: text` and new_only: false change no hash (the §5
// vectors hold), and the canonical shape of a typed value is
// {"as": type, "value": canonical form}.
func TestHashAs(t *testing.T) {
	t.Parallel()
	const base = "sha256:ee92689f85689bbd45ea87b6c554857d0f2f80dea54711581bf79ca6953a698a"
	text := bindOne(t, `{"kind": "record_written", "match": {"patient_id": {"literal": "p1", "as": "text"}, "type": {"param": "t", "as": "text"}}}`,
		map[string]string{"t": "Triage"})
	if text.Hash != base {
		t.Errorf("as: text changed the hash: %s\n%s", text.Hash, HashInput(text))
	}
	fe := bindOne(t, `{"kind": "field_equals", "match": {"name": "Zoë"}, "field": "note", "value": {"literal": "naïve", "as": "text"}, "new_only": false}`, nil)
	if fe.Hash != "sha256:08e15f11c870e04b420533ae2f7d453f60b4a6e2d9b61e857a647bc03de86efb" {
		t.Errorf("field_equals vector changed: %s", fe.Hash)
	}
	typed := bindOne(t, `{"kind": "field_equals", "match": {"n": {"literal": "24.0", "as": "integer"}}, "field": "amount",
		"value": {"param": "amount", "as": "decimal"}, "idempotency_key": {"literal": "True", "as": "boolean"}, "new_only": true}`,
		map[string]string{"amount": "1234.50"})
	want := `{"expected_count":1,"field":"amount","forbid_collateral_loss":true,"idempotency_key":{"as":"boolean","value":"true"},"key_field":"key","kind":"field_equals","match":{"n":{"as":"integer","value":"24"}},"new_only":true,"value":{"as":"decimal","value":"1234.5"}}`
	if d := cmp.Diff(want, HashInput(typed)); d != "" {
		t.Errorf("typed hash input (-want +got):\n%s", d)
	}
	// The same values written another way are the same contract.
	same := bindOne(t, `{"kind": "field_equals", "match": {"n": {"literal": "2.4e1", "as": "integer"}}, "field": "amount",
		"value": {"literal": "1.2345e3", "as": "decimal"}, "idempotency_key": {"literal": "TRUE", "as": "boolean"}, "new_only": true}`, nil)
	if same.Hash != typed.Hash {
		t.Errorf("equal typed values hash differently: %s / %s", HashInput(same), HashInput(typed))
	}
	// A typed value never hashes like the text with the same characters.
	asText := bindOne(t, `{"kind": "field_equals", "match": {"n": "24"}, "field": "amount", "value": "1234.5", "idempotency_key": "true", "new_only": true}`, nil)
	if asText.Hash == typed.Hash {
		t.Error("a typed contract hashes like its text twin")
	}
	members := bindOne(t, `{"kind": "exact_new_set", "new_records": [{"n": {"literal": "1.0", "as": "decimal"}}], "expected_count": 1}`, nil)
	if !strings.Contains(HashInput(members), `"new_records":[{"n":{"as":"decimal","value":"1"}}]`) {
		t.Errorf("member hash input %s", HashInput(members))
	}
}

// TestTypedJudgement: `as` in match and in value, equal and not, and a
// side that does not parse, through every form of the judge.
func TestTypedJudgement(t *testing.T) {
	t.Parallel()
	empty := read(t, `[]`)
	fe := func(match, value string) string {
		return `{"kind": "field_equals", "match": ` + match + `, "field": "amount", "value": ` + value + `}`
	}
	rw := func(match string) string {
		return `{"kind": "record_written", "match": ` + match + `, "forbid_collateral_loss": false}`
	}
	dec := `{"param": "amount", "as": "decimal"}`
	tests := []judgeCase{
		{name: "decimal value equal to a number", contract: fe(`{"id": "1"}`, dec), params: map[string]string{"amount": "1234.50"}, before: empty,
			after: read(t, `[{"id": 1, "amount": 1234.5}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("1234.5"), ExpectedValue: new("1234.5")}},
		{name: "decimal value equal to exponent text", contract: fe(`{"id": "1"}`, dec), params: map[string]string{"amount": "1234.5"}, before: empty,
			after: read(t, `[{"id": 1, "amount": "1.2345e3"}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("1234.5"), ExpectedValue: new("1234.5")}},
		{name: "decimal value not equal", contract: fe(`{"id": "1"}`, dec), params: map[string]string{"amount": "1234.50"}, before: empty,
			after: read(t, `[{"id": 1, "amount": 1234.51}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new("1234.51"), ExpectedValue: new("1234.5")}},
		{name: "decimal record side does not parse", contract: fe(`{"id": "1"}`, dec), params: map[string]string{"amount": "1234.50"}, before: empty,
			after: read(t, `[{"id": 1, "amount": "1,234.50"}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new("1,234.50"), ExpectedValue: new("1234.5")}},
		{name: "text value keeps the old rule", contract: fe(`{"id": "1"}`, `{"param": "amount"}`), params: map[string]string{"amount": "1234.50"}, before: empty,
			after: read(t, `[{"id": 1, "amount": 1234.5}]`),
			want:  summary{Decision: Refuted, Class: ClassConflicting, Codes: []string{"FIELD_MISMATCH"}, Observed: new(1), Expected: new(1), ObservedValue: new("1234.5"), ExpectedValue: new("1234.50")}},
		{name: "integer selector matches 24.0 and \"24\"", contract: rw(`{"n": {"literal": "24", "as": "integer"}}`), before: empty,
			after: read(t, `[{"id": 1, "n": 24.0}, {"id": 2, "n": "024"}, {"id": 3, "n": 24.5}, {"id": 4, "n": "24.5"}, {"id": 5, "n": true}]`),
			want:  refuted(ClassConflicting, "COUNT_OVER").with(2, 1), matched: []string{"1", "2"}},
		{name: "integer selector: a fraction never matches", contract: rw(`{"n": {"literal": "24", "as": "integer"}}`), before: empty,
			after: read(t, `[{"id": 1, "n": "24.000001"}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "boolean selector matches any case", contract: rw(`{"b": {"literal": "true", "as": "boolean"}}`), before: empty,
			after: read(t, `[{"id": 1, "b": "TRUE"}]`), want: okv("COUNT_EXACT").with(1, 1)},
		{name: "boolean selector: 1 does not parse", contract: rw(`{"b": {"literal": "true", "as": "boolean"}}`), before: empty,
			after: read(t, `[{"id": 1, "b": 1}, {"id": 2, "b": "yes"}, {"id": 3, "b": false}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "boolean value", contract: `{"kind": "field_equals", "match": {"id": "1"}, "field": "ok", "value": {"literal": "False", "as": "boolean"}}`, before: empty,
			after: read(t, `[{"id": 1, "ok": false}]`),
			want:  summary{Decision: Confirmed, Class: ClassConfirmed, Codes: []string{"FIELD_EQUAL"}, Observed: new(1), Expected: new(1), ObservedValue: new("false"), ExpectedValue: new("false")}},
		{name: "decimal selector on an object never matches", contract: rw(`{"n": {"literal": "1", "as": "decimal"}}`), before: empty,
			after: read(t, `[{"id": 1, "n": {"v": 1}}, {"id": 2, "n": [1]}, {"id": 3, "n": null}, {"id": 4}]`), want: refuted(ClassRefuted, "COUNT_UNDER").with(0, 1)},
		{name: "typed idempotency key", contract: `{"kind": "record_written", "match": {}, "idempotency_key": {"literal": "7", "as": "integer"}, "forbid_collateral_loss": false}`, before: empty,
			after: read(t, `[{"id": 1, "key": "7.0"}, {"id": 2, "key": "7.5"}]`), want: okv("COUNT_EXACT").with(1, 1), matched: []string{"1"}},
		{name: "typed exact_new_set member", contract: `{"kind": "exact_new_set", "new_records": [{"amount": {"literal": "10", "as": "decimal"}}], "expected_count": 1}`,
			before: read(t, `[{"id": 1, "amount": 3}]`), after: read(t, `[{"id": 1, "amount": 3}, {"id": 2, "amount": "10.00"}]`), want: okv("SET_EXACT").with(1, 1)},
	}
	runJudgeCases(t, tests)
	runFormsAgree(t, tests)
}

// runFormsAgree judges every case through each compact form and requires
// Judge's verdict.
func runFormsAgree(t *testing.T, tests []judgeCase) {
	t.Helper()
	for _, tc := range tests {
		c := bindOne(t, tc.contract, tc.params)
		checkFormsAgree(t, tc.name, c, tc.before, tc.after, tc.opts)
	}
}

// checkFormsAgree compares Judge with JudgeBatch on batches built from
// maps, by the fast decoder, streamed under the contract's projection and
// read back from a stored index.
func checkFormsAgree(t *testing.T, name string, c *Contract, before, after Snapshot, opts Options) {
	t.Helper()
	want := Judge(c, before, after, opts)
	checkBatchAgrees(t, name+" BatchOf", want, JudgeBatch(c, batchOf(before), batchOf(after), opts))
	scan := func(s Snapshot) BatchSnapshot {
		out := BatchSnapshot{Reachable: s.Reachable, Reason: s.Reason, Code: s.Code}
		if !s.Reachable {
			return out
		}
		parts := make([]string, len(s.Records))
		for i, r := range s.Records {
			parts[i] = CanonicalJSON(r)
		}
		b, err := compact.DecodeRecords("["+strings.Join(parts, ",")+"]", "records")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out.Batch = b
		return out
	}
	checkBatchAgrees(t, name+" compact.Scanner", want, JudgeBatch(c, scan(before), scan(after), opts))
	group := []*Contract{c}
	stream := func(s Snapshot, p *Projection) BatchSnapshot {
		out := BatchSnapshot{Reachable: s.Reachable, Reason: s.Reason, Code: s.Code}
		if !s.Reachable {
			return out
		}
		rs := NewRecordStream("records", len(s.Records))
		rs.Project(p)
		for _, r := range s.Records {
			if err := rs.Add([]byte(CanonicalJSON(r))); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		out.Batch = rs.Batch()
		return out
	}
	checkBatchAgrees(t, name+" Projection", want, JudgeBatch(c, stream(before, ProjectBaseline(group)), stream(after, ProjectAfter(group)), opts))
	if before.Reachable {
		recs := make([]string, len(before.Records))
		for i, r := range before.Records {
			recs[i] = CanonicalJSON(r)
		}
		ib, _ := indexRead(t, recs, ProjectBaseline(group))
		checkBatchAgrees(t, name+" Index", want, JudgeBatch(c, BatchSnapshot{Reachable: true, Batch: ib}, stream(after, ProjectAfter(group)), opts))
	}
}
