package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/judge/internal/compact"
)

// scanSnapshot decodes a read with the fast decoder when every element is
// an object (the map path of fuzzSnapshot skips the others).
func scanSnapshot(data []byte, reachable bool) (BatchSnapshot, bool) {
	if !reachable {
		return BatchSnapshot{}, true
	}
	b, err := DecodeRecords(string(data), "records")
	if err != nil {
		return BatchSnapshot{}, false
	}
	return BatchSnapshot{Reachable: true, Batch: b}, true
}

// verdictSummary is everything a verdict says, with the matched records as
// their canonical JSON (the compact path carries numbers canonically).
func verdictSummary(v Verdict) map[string]any {
	matched := make([]string, len(v.Matched))
	for i, r := range v.Matched {
		matched[i] = CanonicalJSON(r)
	}
	reasons := make([]string, len(v.Reasons))
	for i, r := range v.Reasons {
		reasons[i] = r.Code + ": " + r.Message + fmt.Sprint(r.shown)
	}
	deref := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	sref := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return map[string]any{
		"decision": v.Decision, "class": v.Class, "reasons": reasons,
		"observed": deref(v.ObservedCount), "expected": deref(v.ExpectedCount),
		"observed_value": sref(v.ObservedValue), "expected_value": sref(v.ExpectedValue),
		"matched": matched, "hash": v.ContractHash, "stale": v.Stale, "unavailable": v.Unavailable,
	}
}

func checkBatchAgrees(t *testing.T, via string, want, got Verdict) {
	t.Helper()
	if diff := cmp.Diff(verdictSummary(want), verdictSummary(got)); diff != "" {
		t.Fatalf("%s: JudgeBatch differs from Judge (-Judge +JudgeBatch):\n%s", via, diff)
	}
}

// randomRead makes a read whose values exercise canonical text: numbers
// written several ways, strings that spell numbers, booleans, nulls,
// nested values, missing identities, non-ASCII text.
func randomRead(rng *rand.Rand, n int, ordered bool) string {
	values := []string{`"p1"`, `"p2"`, `1`, `1.0`, `"1"`, `10e-1`, `true`, `"true"`, `null`, `{"b":1,"a":[2.50,"x"]}`,
		`[1,2]`, `"Zoë"`, `"Zo\u00eb"`, `"\ud83d\ude00"`, `-0`, `0.000`, `"a\"b"`, `1e400`, `123456789012345678901234567890123`}
	var sb strings.Builder
	sb.WriteByte('[')
	ids := rng.Perm(n * 2)[:n]
	if ordered {
		slices.Sort(ids)
	}
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('{')
		sep := ""
		switch rng.IntN(10) {
		case 0: // no identity
		case 1:
			fmt.Fprintf(&sb, `"id": "%d"`, ids[i])
			sep = ", "
		case 2:
			fmt.Fprintf(&sb, `"id": %s`, values[rng.IntN(len(values))])
			sep = ", "
		default:
			fmt.Fprintf(&sb, `"id": %d`, ids[i])
			sep = ", "
		}
		for _, f := range []string{"patient_id", "type", "key", "note"} {
			if rng.IntN(5) == 0 {
				continue
			}
			fmt.Fprintf(&sb, `%s"%s": %s`, sep, f, values[rng.IntN(len(values))])
			sep = ", "
		}
		sb.WriteByte('}')
	}
	sb.WriteByte(']')
	return sb.String()
}

// TestJudgeBatchAgrees judges random reads with random contracts of every
// kind through Judge (maps) and JudgeBatch (compact, built from the maps
// and by the fast decoder) and requires the same verdicts.
func TestJudgeBatchAgrees(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 14))
	contracts := []string{
		`{"kind": "record_written", "match": {"patient_id": "p1"}}`,
		`{"kind": "record_written", "match": {"patient_id": "1"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": "true"}, "idempotency_key": "1", "forbid_collateral_loss": false}`,
		`{"kind": "record_written", "match": {}, "expected_count": 3, "identity_field": "note"}`,
		`{"kind": "record_written", "match": {"note": "{\"a\":[2.5,\"x\"],\"b\":1}"}}`,
		`{"kind": "field_equals", "match": {"patient_id": "p2"}, "field": "note", "value": "Zoë"}`,
		`{"kind": "field_equals", "match": {"id": "1"}, "field": "type", "value": "1"}`,
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "match": {"type": "p2"}, "new_records": [{"note": "1"}, {"note": "1"}], "expected_count": 2}`,
		`{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "forbid_collateral_loss": false}`,
		// Typed comparison (§2a) and read-backs of new records.
		`{"kind": "record_written", "match": {"patient_id": {"literal": "1", "as": "decimal"}}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": {"literal": "TRUE", "as": "boolean"}}, "idempotency_key": {"literal": "1.0", "as": "integer"}}`,
		`{"kind": "field_equals", "match": {"patient_id": {"literal": "1.0", "as": "integer"}}, "field": "note", "value": {"literal": "1", "as": "decimal"}, "new_only": true}`,
		`{"kind": "field_equals", "match": {"type": "p2"}, "field": "note", "value": {"literal": "true", "as": "boolean"}}`,
		`{"kind": "exact_new_set", "new_records": [{"note": {"literal": "1", "as": "decimal"}}], "expected_count": 1}`,
	}
	bound := bindContracts(t, contracts)
	// A census of random identities: usable unless a record lacks "id".
	randomCensus := func(rng *rand.Rand, reads ...Snapshot) *Census {
		ids := func() Snapshot {
			s := Snapshot{Reachable: rng.IntN(12) != 0, Records: []Record{}}
			if !s.Reachable {
				return s
			}
			for _, r := range reads {
				for _, rec := range r.Records {
					if id, ok := rec["id"]; ok && rng.IntN(4) != 0 {
						s.Records = append(s.Records, Record{"id": id})
					}
				}
			}
			for range rng.IntN(3) {
				s.Records = append(s.Records, Record{"id": json.Number(strconv.Itoa(rng.IntN(24)))})
			}
			if rng.IntN(10) == 0 {
				s.Records = append(s.Records, Record{"uuid": "x"})
			}
			return s
		}
		return &Census{Before: ids(), After: ids()}
	}
	confirmed, changed := 0, 0
	for round := range 400 {
		ordered := round%2 == 0
		beforeJS, afterJS := randomRead(rng, rng.IntN(12), ordered), randomRead(rng, rng.IntN(12), ordered)
		before, ok1 := fuzzSnapshot([]byte(beforeJS), true)
		after, ok2 := fuzzSnapshot([]byte(afterJS), true)
		if !ok1 || !ok2 {
			t.Fatalf("round %d: generated reads do not decode", round)
		}
		bb, ok1 := scanSnapshot([]byte(beforeJS), true)
		ab, ok2 := scanSnapshot([]byte(afterJS), true)
		if !ok1 || !ok2 {
			t.Fatalf("round %d: the fast decoder refused generated reads", round)
		}
		opts := Options{}
		if round%3 != 0 {
			opts.Census = randomCensus(rng, before, after)
		}
		for _, c := range bound {
			v := Judge(c, before, after, opts)
			if v.Decision == Confirmed {
				confirmed++
			}
			if slices.Contains(v.Codes(), ReasonExistingRecordChanged) {
				changed++
			}
			checkBatchAgrees(t, "BatchOf", v, JudgeBatch(c, BatchOf(before), BatchOf(after), opts))
			checkBatchAgrees(t, "compact.Scanner", v, JudgeBatch(c, bb, ab, opts))
		}
	}
	if confirmed == 0 || changed == 0 {
		t.Fatalf("%d confirmed, %d existing records changed: the generator does not exercise the judge", confirmed, changed)
	}
}

// TestScannerCanonicalText pins the canonical text (docs/contracts.md §2) the
// decoder gives each kind of value.
func TestScannerCanonicalText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json string
		kind compact.ValueKind
		text string
	}{
		{`"p1"`, compact.KindString, "p1"},
		{`" a "`, compact.KindString, " a "},
		{`"Zo\u00eb"`, compact.KindString, "Zoë"},
		{`"\ud83d\ude00"`, compact.KindString, "😀"},
		{`"\ud800"`, compact.KindString, "\ufffd"},
		{"\"a\xffb\"", compact.KindString, "a\ufffdb"},
		{`1`, compact.KindNumber, "1"},
		{`1.0`, compact.KindNumber, "1"},
		{`-0`, compact.KindNumber, "0"},
		{`0.000`, compact.KindNumber, "0"},
		{`42.50`, compact.KindNumber, "42.5"},
		{`1e3`, compact.KindNumber, "1000"},
		{`1.5E-3`, compact.KindNumber, "0.0015"},
		{`-12345678901234567890123456789012345`, compact.KindNumber, "-12345678901234567890123456789012345"},
		{`true`, compact.KindBool, "true"},
		{`false`, compact.KindBool, "false"},
		{`null`, compact.KindNull, ""},
		{`{"b": 1.0, "a": "é"}`, compact.KindObject, `{"a":"\u00e9","b":1}`},
		{`[1, "x", null]`, compact.KindArray, `[1,"x",null]`},
	}
	for _, tt := range tests {
		b, err := DecodeRecords(`[{"v": `+tt.json+`}]`, "records")
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		f := b.At(0)[0]
		if f.Kind != tt.kind || b.Text(&f) != tt.text {
			t.Errorf("%s: kind %d text %q, want %d %q", tt.json, f.Kind, b.Text(&f), tt.kind, tt.text)
		}
		tree, err := DecodeJSON([]byte(tt.json))
		if err != nil {
			t.Fatal(err)
		}
		if want, has := Canon(tree); has != (tt.kind != compact.KindNull) || want != tt.text {
			t.Errorf("%s: Canon gives %q (%v), the decoder %q", tt.json, want, has, tt.text)
		}
	}
}

// TestScannerRefusals: bad input is refused with the path of the fault.
func TestScannerRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct{ input, path string }{
		{`[{"id": 1}, {"id": 1, "id": 2}]`, "records[1].id"},
		{`[{"id": 01}]`, "records[0].id"},
		{`[{"id": 1.}]`, "records[0].id"},
		{`[{"id": -}]`, "records[0].id"},
		{`[{"id": tru}]`, "records[0].id"},
		{`[{"id": "x}]`, "records[0].id"},
		{`[{"id": "\x"}]`, "records[0].id"},
		{"[{\"id\": \"a\tb\"}]", "records[0].id"},
		{`[{"id": 1,}]`, "records[0]"},
		{`[{"id" 1}]`, "records[0].id"},
		{`[{"id": {"a": 1, "a": 2}}]`, "records[0].id"},
		{`[{"id": [1,}]`, "records[0].id"},
		{`[{"id": 1}`, "records[0]"},
		{`[1]`, "records[0]"},
		{`[{"id": 1}] x`, ""},
		{`{"id": 1}`, "records"},
	}
	for _, tt := range tests {
		_, err := DecodeRecords(tt.input, "records")
		if err == nil {
			t.Errorf("%s: accepted", tt.input)
			continue
		}
		se, ok := errors.AsType[*SyntaxError](err)
		if !ok || se.Path != tt.path || se.Msg == "" {
			t.Errorf("%s: %v (path %q), want a *SyntaxError at %q", tt.input, err, pathOf(err), tt.path)
		}
		if _, jerr := DecodeJSON([]byte(tt.input)); jerr == nil && !strings.HasPrefix(tt.input, "[1]") && !strings.HasPrefix(tt.input, `{"id"`) {
			t.Errorf("%s: DecodeJSON accepts what the scanner refuses", tt.input)
		}
	}
}

func pathOf(err error) string {
	if se, ok := errors.AsType[*SyntaxError](err); ok {
		return se.Path
	}
	return "?"
}

// FuzzScanRecords holds the fast decoder to DecodeJSON (encoding/json with
// duplicate keys refused): the same documents accepted, the same records
// (by canonical JSON), and every refusal a *SyntaxError with a path.
func FuzzScanRecords(f *testing.F) {
	for _, s := range []string{
		`[]`, `[{}]`, `[{"id": 1, "patient_id": "p1"}, {"id": 2.50, "n": null, "b": true}]`,
		`[{"a": {"x": [1, {"y": "z"}]}, "s": "\u00e9\n\ud83d\ude00"}]`, "[{\"a\": \"\xff\"}]",
		`[{"id": 1, "id": 2}]`, `[{"id": 1e999999999}]`, `[{"id": -0.0e-5}]`, ` [ { "a" : 1 } , { "a" : 2 } ] `,
		`[{"a": 1}] [`, `[1]`, `[{"a": 01}]`, `[{"a": "\u12"}]`,
		// The record inside the list is level 2: a field may nest 62 more.
		`[{"a": ` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}]`,
		`[{"a": ` + strings.Repeat("{\"b\":[", 31) + "1" + strings.Repeat("]}", 31) + `}]`,
		`[{"a": ` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}]`,
		`[{"a": ` + strings.Repeat("[", 3000) + `}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		b, err := DecodeRecords(data, "records")
		tree, jerr := DecodeJSON([]byte(data))
		var list []any
		if jerr == nil {
			l, isList := tree.([]any)
			allObjects := isList
			for _, e := range l {
				if _, ok := e.(map[string]any); !ok {
					allObjects = false
				}
			}
			if !allObjects {
				jerr = errors.New("not a list of objects")
			}
			list = l
		}
		if err != nil {
			se, ok := errors.AsType[*SyntaxError](err)
			if !ok || se.Msg == "" || (se.Path != "" && !strings.HasPrefix(se.Path, "records")) {
				t.Fatalf("refusal %#v is not a *SyntaxError with a path", err)
			}
			if jerr == nil {
				t.Fatalf("the scanner refuses (%v) what DecodeJSON accepts", err)
			}
			return
		}
		if jerr != nil {
			t.Fatalf("the scanner accepts what DecodeJSON refuses (%v)", jerr)
		}
		if b.Len() != len(list) {
			t.Fatalf("%d records, DecodeJSON has %d", b.Len(), len(list))
		}
		for i, e := range list {
			want := CanonicalJSON(e)
			if got := b.CanonicalFields(b.At(i)); got != want {
				t.Fatalf("record %d: canonical %s, DecodeJSON gives %s", i, got, want)
			}
			if got := CanonicalJSON(b.Record(i)); got != want {
				t.Fatalf("record %d as a map: canonical %s, want %s", i, got, want)
			}
			m, _ := e.(map[string]any)
			for _, fld := range b.At(i) {
				text, has := Canon(m[b.Names[fld.Name]])
				if has != (fld.Kind != compact.KindNull) || text != b.Text(&fld) {
					t.Fatalf("record %d field %q: text %q, Canon gives %q (%v)", i, b.Names[fld.Name], b.Text(&fld), text, has)
				}
			}
		}
	})
}

// TestBatchRecordRoundTrip: a record in map form turned compact and back
// keeps its canonical JSON.
func TestBatchRecordRoundTrip(t *testing.T) {
	t.Parallel()
	r := Record{"id": json.Number("1.0"), "s": "x", "n": nil, "b": false, "o": map[string]any{"k": []any{json.Number("2")}}, "f": 2.5, "i": 7}
	b := NewBatch()
	b.Append(r)
	if got, want := CanonicalJSON(b.Record(0)), CanonicalJSON(r); got != want {
		t.Fatalf("round trip %s, want %s", got, want)
	}
	if got, want := b.CanonicalFields(b.At(0)), CanonicalJSON(r); got != want {
		t.Fatalf("canonical record %s, want %s", got, want)
	}
	if strconv.Itoa(b.Len()) != "1" {
		t.Fatal("one record appended")
	}
}

// TestScannerNameFastPath: a name seen in the previous record is matched
// without unquoting only when it is written plainly; escaped and control
// characters still go through the full reader.
func TestScannerNameFastPath(t *testing.T) {
	t.Parallel()
	ok := `[{"a\nb": 1, "c\"d": 2, "e": 3}, {"a\nb": 4, "c\"d": 5, "e": 6}, {"e": 7}]`
	b, err := DecodeRecords(ok, "records")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Names) != 3 || CanonicalJSON(b.Record(1)) != `{"a\nb":4,"c\"d":5,"e":6}` {
		t.Fatalf("names %q, record %s", b.Names, CanonicalJSON(b.Record(1)))
	}
	// The raw bytes of a name with a newline are not JSON.
	if _, err := DecodeRecords("[{\"a\\nb\": 1}, {\"a\nb\": 2}]", "records"); err == nil {
		t.Fatal("a raw newline in a name was accepted")
	}
}

// TestDecodeRecordList: records given one JSON object each decode into one
// batch like the same records as an array; a bad part is refused with its
// index.
func TestDecodeRecordList(t *testing.T) {
	t.Parallel()
	parts := [][]byte{[]byte(`{"id": 1, "n": 1.50}`), []byte(` {"id": "2", "s": "Zo\u00eb"} `), []byte(`{}`)}
	b, err := DecodeRecordList(parts, "after.records_json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeRecords(`[{"id": 1, "n": 1.50}, {"id": "2", "s": "Zo\u00eb"}, {}]`, "records")
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 {
		t.Fatalf("%d records, want 3", b.Len())
	}
	for i := range 3 {
		if got, w := b.CanonicalFields(b.At(i)), want.CanonicalFields(want.At(i)); got != w {
			t.Errorf("record %d: %s, want %s", i, got, w)
		}
	}
	for _, tt := range []struct {
		parts [][]byte
		path  string
	}{
		{[][]byte{[]byte(`{"id": 1}`), []byte(`[1]`)}, "after.records_json[1]"},
		{[][]byte{[]byte(`{"id": 1} {}`)}, "after.records_json[0]"},
		{[][]byte{[]byte(`{"id": 1, "id": 2}`)}, "after.records_json[0].id"},
		{[][]byte{[]byte(`{"id": 1`), []byte(`}`)}, "after.records_json[0].id"},
		{[][]byte{[]byte(``)}, "after.records_json[0]"},
	} {
		_, err := DecodeRecordList(tt.parts, "after.records_json")
		if got := pathOf(err); got != tt.path {
			t.Errorf("%q: error %v at %q, want %q", tt.parts, err, got, tt.path)
		}
	}
}

// TestRecordFromFields: a streamed record whose values are all strings,
// booleans, nulls or numbers written canonically is turned back into a map
// from its fields, and that map is the one its source decodes to; any
// other record is left to the decoder, which gives the same map.
func TestRecordFromFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		raw  string
		fast bool
	}{
		{`{"id": 7, "p": "plain", "t": true, "f": false, "z": null}`, true},
		{`{"id": -12, "q": "a\"b\u007f\\", "u": "Zo\u00eb", "raw": "Zoë ✓"}`, true},
		{"{\"bad\": \"\xff\xfe\", \"id\": 0}", true},
		{`{}`, true},
		{`{"n": 2.50}`, false},
		{`{"n": 1e3}`, false},
		{`{"n": -0}`, false},
		{`{"o": {"b": 1}}`, false},
		{`{"a": [1, 2]}`, false},
	}
	rs := NewRecordStream("records", 0)
	for _, c := range cases {
		if err := rs.Add([]byte(c.raw)); err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
	}
	b := rs.Batch()
	for i, c := range cases {
		want, err := DecodeJSON([]byte(c.raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Record(i); !cmp.Equal(map[string]any(got), want) {
			t.Errorf("%s: Record = %#v, want %#v", c.raw, got, want)
		}
		if _, fast := b.SourceRecord(i); fast != c.fast {
			t.Errorf("%s: taken from the fields = %v, want %v", c.raw, fast, c.fast)
		}
	}
}

// bindContracts loads and binds each contract (JSON, no run parameters).
func bindContracts(t *testing.T, contracts []string) []*Contract {
	t.Helper()
	var bound []*Contract
	for i, js := range contracts {
		tree, err := DecodeJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		e, err := LoadEffect(tree, "effects[0]")
		if err != nil {
			t.Fatalf("contract %d: %v", i, err)
		}
		c, err := Bind(e, nil, "effects[0]")
		if err != nil {
			t.Fatal(err)
		}
		bound = append(bound, c)
	}
	return bound
}
