package toproto_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/internal/fromproto"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
)

// FuzzRecordRoundTrip: any JSON object, decoded, encodes to JSON that
// decodes to the same record; the encoding is canonical (stable).
func FuzzRecordRoundTrip(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":"x"}`, `{"s":"<&>\u2028é\t"}`, `{"n":-1.5e-7,"o":{"k":[true,null]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var r sdk.Record
		if dec.Decode(&r) != nil || r == nil {
			return
		}
		enc, err := toproto.Record(r)
		if err != nil {
			t.Fatalf("encode %v: %v", r, err)
		}
		back, err := fromproto.Record(enc)
		if err != nil {
			t.Fatalf("decode %q: %v", enc, err)
		}
		if diff := cmp.Diff(r, back); diff != "" {
			t.Fatalf("round trip of %q via %q (-in +out):\n%s", in, enc, diff)
		}
		again, _ := toproto.Record(back)
		if !bytes.Equal(enc, again) {
			t.Fatalf("encoding is not stable: %q then %q", enc, again)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	rec := sdk.Record{"id": int64(99999), "exact": json.Number("12345678901234567890.5"), "name": "row 99999", "patient_id": "p1", "type": "Triage"}
	for range b.N {
		if _, err := toproto.Record(rec); err != nil {
			b.Fatal(err)
		}
	}
}
