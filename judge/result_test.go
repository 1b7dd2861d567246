package judge

import (
	"encoding/json"
	"testing"

	"github.com/verifierd/verifierd/internal/compact"
)

// TestEffectResultJSON pins the shown result's JSON byte for byte: it is
// the head of every stored result and every signed receipt, so a change
// here would leave stored results and receipts unverifiable.
func TestEffectResultJSON(t *testing.T) {
	one, two := 1, 2
	obs, exp := `"a"`, `"b"`
	v := Verdict{Decision: Refuted, Class: ClassConflicting,
		Reasons:       []Reason{{Code: "VALUE_MISMATCH", Message: "m"}},
		ObservedCount: &one, ExpectedCount: &two, ObservedValue: &obs, ExpectedValue: &exp,
		ContractHash: "sha256:x", Matched: []Record{{"id": "7", "n": 1.5}}}
	got, err := json.Marshal(ResultOf(v))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verdict":"REFUTED","result":"conflicting","reasons":[{"code":"VALUE_MISMATCH","message":"m"}],` +
		`"observed_count":1,"expected_count":2,"observed_value":"\"a\"","expected_value":"\"b\"",` +
		`"contract_hash":"sha256:x","matched_records":[{"id":"7","n":1.5}]}`
	if string(got) != want {
		t.Fatalf("shown result JSON changed:\n got %s\nwant %s", got, want)
	}
	// Absent counts and values are null; no reasons and no records are
	// empty lists, never null.
	got, _ = json.Marshal(ResultOf(Verdict{Decision: Indeterminate, Class: ClassIndeterminate}))
	want = `{"verdict":"INDETERMINATE","result":"indeterminate","reasons":[],"observed_count":null,"expected_count":null,` +
		`"observed_value":null,"expected_value":null,"contract_hash":"","matched_records":[]}`
	if string(got) != want {
		t.Fatalf("empty shown result JSON changed:\n got %s\nwant %s", got, want)
	}
}

// TestCompactAgreesOnNames: the names the judge publishes are the ones its
// compact form reads and writes.
func TestCompactAgreesOnNames(t *testing.T) {
	for _, c := range []struct{ judge, compact string }{
		{string(AsText), compact.AsText}, {string(AsDecimal), compact.AsDecimal},
		{string(AsInteger), compact.AsInteger}, {string(AsBoolean), compact.AsBoolean},
		{string(IndexWhole), string(compact.IndexWhole)}, {string(IndexPartial), string(compact.IndexPartial)},
	} {
		if c.judge != c.compact {
			t.Errorf("judge says %q, its compact form %q", c.judge, c.compact)
		}
	}
}
