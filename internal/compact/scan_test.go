package compact

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScannerCanonicalText pins the canonical text (docs/contracts.md §2) the
// decoder gives each kind of value.
func TestScannerCanonicalText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json string
		kind ValueKind
		text string
	}{
		{`"p1"`, KindString, "p1"},
		{`" a "`, KindString, " a "},
		{`"Zo\u00eb"`, KindString, "Zoë"},
		{`"\ud83d\ude00"`, KindString, "😀"},
		{`"\ud800"`, KindString, "\ufffd"},
		{"\"a\xffb\"", KindString, "a\ufffdb"},
		{`1`, KindNumber, "1"},
		{`1.0`, KindNumber, "1"},
		{`-0`, KindNumber, "0"},
		{`0.000`, KindNumber, "0"},
		{`42.50`, KindNumber, "42.5"},
		{`1e3`, KindNumber, "1000"},
		{`1.5E-3`, KindNumber, "0.0015"},
		{`-12345678901234567890123456789012345`, KindNumber, "-12345678901234567890123456789012345"},
		{`true`, KindBool, "true"},
		{`false`, KindBool, "false"},
		{`null`, KindNull, ""},
		{`{"b": 1.0, "a": "é"}`, KindObject, `{"a":"\u00e9","b":1}`},
		{`[1, "x", null]`, KindArray, `[1,"x",null]`},
	}
	for _, tt := range tests {
		b, err := DecodeRecords(`[{"v": `+tt.json+`}]`, "records")
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		f := At(b, 0)[0]
		if f.Kind != tt.kind || Text(b, &f) != tt.text {
			t.Errorf("%s: kind %d text %q, want %d %q", tt.json, f.Kind, Text(b, &f), tt.kind, tt.text)
		}
		tree, err := DecodeJSON([]byte(tt.json))
		if err != nil {
			t.Fatal(err)
		}
		if want, has := Canon(tree); has != (tt.kind != KindNull) || want != tt.text {
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
			if got := CanonicalFields(b, At(b, i)); got != want {
				t.Fatalf("record %d: canonical %s, DecodeJSON gives %s", i, got, want)
			}
			if got := CanonicalJSON(b.Record(i)); got != want {
				t.Fatalf("record %d as a map: canonical %s, want %s", i, got, want)
			}
			m, _ := e.(map[string]any)
			for _, fld := range At(b, i) {
				text, has := Canon(m[b.names[fld.Name]])
				if has != (fld.Kind != KindNull) || text != Text(b, &fld) {
					t.Fatalf("record %d field %q: text %q, Canon gives %q (%v)", i, b.names[fld.Name], Text(b, &fld), text, has)
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
	Append(b, r)
	if got, want := CanonicalJSON(b.Record(0)), CanonicalJSON(r); got != want {
		t.Fatalf("round trip %s, want %s", got, want)
	}
	if got, want := CanonicalFields(b, At(b, 0)), CanonicalJSON(r); got != want {
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
	if len(b.names) != 3 || CanonicalJSON(b.Record(1)) != `{"a\nb":4,"c\"d":5,"e":6}` {
		t.Fatalf("names %q, record %s", b.names, CanonicalJSON(b.Record(1)))
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
		if got, w := CanonicalFields(b, At(b, i)), CanonicalFields(want, At(want, i)); got != w {
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
		if _, fast := b.sourceRecord(i); fast != c.fast {
			t.Errorf("%s: taken from the fields = %v, want %v", c.raw, fast, c.fast)
		}
	}
}
