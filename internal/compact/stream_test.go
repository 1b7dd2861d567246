package compact

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestRecordStream decodes records one at a time, past the point where the
// stream sizes itself, and keeps each record's source: Record gives the map
// the source decodes to (numbers keep their text), the fields their
// canonical text.
func TestRecordStream(t *testing.T) {
	t.Parallel()
	for _, hint := range []int{0, 10, 1000, 5000} {
		rs := NewRecordStream("records", hint)
		var raws []string
		buf := make([]byte, 0, 128)
		for i := range 1000 {
			raw := fmt.Sprintf(`{"id": %d, "n": 2.50, "s": "Zo\u00eb %d", "q": "a\"b\u007f", "p": "plain", "o": {"b": 1, "a": [1.0]}, "z": null, "t": true}`, i, i)
			raws = append(raws, raw)
			// The caller's buffer is reused at once (a store's page).
			buf = append(buf[:0], raw...)
			if err := rs.Add(buf); err != nil {
				t.Fatalf("hint %d, record %d: %v", hint, i, err)
			}
			clear(buf)
		}
		b := rs.Batch()
		if b.Len() != 1000 || rs.Len() != 1000 {
			t.Fatalf("hint %d: %d records", hint, b.Len())
		}
		canon := NewCanonicaliser(b)
		for i, raw := range raws {
			want, err := DecodeJSON([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Record(i); !reflect.DeepEqual(got, want) {
				t.Fatalf("hint %d, record %d: %v, want %v", hint, i, got, want)
			}
			if src, ok := Source(b, i); !ok || src != raw {
				t.Fatalf("record %d source %q", i, src)
			}
			if got, want := CanonicalRecord(b, i), CanonicalJSON(want); got != want {
				t.Fatalf("record %d canonical %s, want %s", i, got, want)
			}
			if got, want := string(canon.Append([]byte("x"), i)), "x"+CanonicalJSON(want); got != want {
				t.Fatalf("record %d compact.Canonicaliser %s, want %s", i, got, want)
			}
		}
		if n, _ := Get(b, At(b, 7), NameIndex(b, "n")); n != "2.5" {
			t.Fatalf("canonical text of 2.50 is %q", n)
		}
		if got := b.Record(3)["n"]; got != json.Number("2.50") {
			t.Fatalf("record 3 n = %v, want the source text 2.50", got)
		}
	}
}

// TestRecordStreamRefuses: a record that is not one JSON object is refused
// with its path, the offset within the record, and every later record is
// refused too (the read is incomplete).
func TestRecordStreamRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bad, path, msg string
	}{
		{`{"id": 2, "id": 3}`, "records[1].id", "duplicate key"},
		{`{"id": 2, "o": {"a": 1, "a": 2}}`, "records[1].o", "duplicate"},
		{`{"id": 2,}`, "records[1]", "field name"},
		{`{"id": 2`, "records[1].id", "expected"},
		{`[1]`, "records[1]", "JSON object"},
		{`{"id": 2} {}`, "records[1]", "after the record"},
		{``, "records[1]", "JSON object"},
		{`{"id": tru}`, "records[1].id", "invalid"},
	}
	for _, tt := range tests {
		rs := NewRecordStream("records", 0)
		if err := rs.Add([]byte(`{"id": 1}`)); err != nil {
			t.Fatal(err)
		}
		err := rs.Add([]byte(tt.bad))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Path != tt.path || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("%s: %v, want a syntax error at %s (%s)", tt.bad, err, tt.path, tt.msg)
			continue
		}
		if se.Offset < 0 || se.Offset > len(tt.bad) {
			t.Errorf("%s: offset %d is not within the record", tt.bad, se.Offset)
		}
		if err := rs.Add([]byte(`{"id": 3}`)); err == nil {
			t.Errorf("%s: a record after the bad one was taken", tt.bad)
		}
	}
}
