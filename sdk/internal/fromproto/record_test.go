package fromproto

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var recordSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"id":"1","n":-0.5e+10,"t":true,"f":false,"z":null}`,
	`{"a":"x","a":"y"}`, `{"s":"Zo\u00eb"}`, `{"s":"tab\there"}`, `{"o":{"a":[1,2]}}`,
	`{"n":01}`, `{"n":1.}`, `{"n":-}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`, `[1]`, `null`,
	`{"a":tru}`, `{"a":"unterminated}`, "{\"a\":\"\xff\"}", `{"big":123456789012345678901234567890}`,
	// Nesting at and past the limit (the record is the first level).
	`{"o":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`,
	`{"o":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
	`{"o":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
}

func TestFastAndSlowRecordAgree(t *testing.T) {
	t.Parallel()
	for _, in := range recordSeeds {
		checkAgree(t, []byte(in))
	}
}

// A plugin's record nested past the limit is refused before decoding.
func TestRecordRefusesDeepNesting(t *testing.T) {
	if _, err := Record([]byte(`{"o":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`)); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
	_, err := Record([]byte(`{"o":` + strings.Repeat("[", 1_500_000) + strings.Repeat("]", 1_500_000) + `}`))
	if err == nil || !strings.Contains(err.Error(), "o[0][0]") || !strings.Contains(err.Error(), "more than 64 levels") {
		t.Fatalf("1.5M levels: %v", err)
	}
}

func checkAgree(t *testing.T, b []byte) {
	t.Helper()
	fast, ok := flatRecord(b)
	slow, err := slowRecord(b)
	if !ok {
		return // the fast path declined; only the slow path answers
	}
	if err != nil {
		t.Fatalf("%q: fast path accepted %v, encoding/json refused: %v", b, fast, err)
	}
	if diff := cmp.Diff(slow, fast); diff != "" {
		t.Fatalf("%q: fast and slow decodes differ (-slow +fast):\n%s", b, diff)
	}
}

// FuzzRecord checks that the fast flat-record parser never accepts what
// encoding/json refuses and never decodes differently.
func FuzzRecord(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgree(t, b)
		if r, err := Record(b); err == nil && r == nil {
			t.Fatalf("%q: nil record without an error", b)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	rec := []byte(`{"exact":12345678901234567890.5,"id":99999,"name":"row 99999","patient_id":"p1","type":"Triage"}`)
	for _, tc := range []struct {
		name string
		fn   func([]byte) (map[string]any, error)
	}{
		{"fast", func(b []byte) (map[string]any, error) { r, err := Record(b); return r, err }},
		{"encoding_json", func(b []byte) (map[string]any, error) { r, err := slowRecord(b); return r, err }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				if _, err := tc.fn(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	_ = json.Number("")
}
