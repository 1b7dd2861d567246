package judge

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// loadOne parses a single contract (JSON or YAML text of one map) as the
// first element of an "effects" list.
func loadOne(t testing.TB, src string) (Effect, error) {
	t.Helper()
	src = strings.TrimSpace(src)
	var doc string
	if strings.HasPrefix(src, "{") {
		doc = "[" + src + "]"
	} else {
		// YAML: indent the map under a list item.
		lines := strings.Split(src, "\n")
		for i, l := range lines {
			if i == 0 {
				lines[i] = "- " + l
			} else {
				lines[i] = "  " + l
			}
		}
		doc = strings.Join(lines, "\n") + "\n"
	}
	effs, err := ParseEffects([]byte(doc), "effects")
	if err != nil {
		return Effect{}, err
	}
	if len(effs) != 1 {
		t.Fatalf("ParseEffects returned %d effects, want 1", len(effs))
	}
	return effs[0], nil
}

// docs/contracts.md §1: every load-time refusal names the rule and the path.
func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		path string
		// hint: substrings the message must contain (how to fix it).
		hint []string
	}{
		// bad / missing kind
		{"bad kind", `{"kind": "record_writen"}`, "effects[0].kind", []string{"record_written"}},
		{"kind not a string", `{"kind": 1}`, "effects[0].kind", []string{"record_written"}},
		{"kind null", `{"kind": null}`, "effects[0].kind", []string{"record_written"}},
		{"missing kind", `{"match": {"a": "b"}}`, "effects[0].kind", []string{"record_written"}},
		// unknown key
		{"unknown key", `{"kind": "record_written", "expected_cnt": 1}`, "effects[0].expected_cnt", []string{"expected_cnt"}},
		{"unknown key typo suggestion", `{"kind": "record_written", "matches": {}}`, "effects[0].matches", []string{"matches", "match"}},
		// non-string literals in match
		{"match int", `{"kind": "record_written", "match": {"id": 1}}`, "effects[0].match.id", []string{`"1"`}},
		{"match bool", `{"kind": "record_written", "match": {"ok": true}}`, "effects[0].match.ok", []string{`"true"`}},
		{"match null", `{"kind": "record_written", "match": {"note": null}}`, "effects[0].match.note", []string{"string"}},
		{"match float", `{"kind": "record_written", "match": {"score": 42.5}}`, "effects[0].match.score", []string{`"42.5"`}},
		{"match list", `{"kind": "record_written", "match": {"tags": ["a"]}}`, "effects[0].match.tags", []string{"string"}},
		{"match not a map", `{"kind": "record_written", "match": ["a"]}`, "effects[0].match", []string{"map"}},
		// non-string literals in new_records
		{"new_records int", `{"kind": "exact_new_set", "new_records": [{"a": "x"}, {"id": 1}], "expected_count": 2}`, "effects[0].new_records[1].id", []string{`"1"`}},
		{"new_records bool", `{"kind": "exact_new_set", "new_records": [{"ok": false}]}`, "effects[0].new_records[0].ok", []string{`"false"`}},
		{"new_records null", `{"kind": "exact_new_set", "new_records": [{"ok": null}]}`, "effects[0].new_records[0].ok", []string{"string"}},
		{"new_records float", `{"kind": "exact_new_set", "new_records": [{"n": 1.5}]}`, "effects[0].new_records[0].n", []string{`"1.5"`}},
		{"new_records list", `{"kind": "exact_new_set", "new_records": [{"n": [1]}]}`, "effects[0].new_records[0].n", []string{"string"}},
		{"new_records not a list", `{"kind": "exact_new_set", "new_records": {"a": "b"}}`, "effects[0].new_records", []string{"list"}},
		{"new_records member not a map", `{"kind": "exact_new_set", "new_records": ["a"]}`, "effects[0].new_records[0]", []string{"map"}},
		// non-string literals in value
		{"value int", `{"kind": "field_equals", "field": "n", "value": 1}`, "effects[0].value", []string{`"1"`}},
		{"value bool", `{"kind": "field_equals", "field": "n", "value": true}`, "effects[0].value", []string{`"true"`}},
		{"value float", `{"kind": "field_equals", "field": "n", "value": 2.50}`, "effects[0].value", []string{`"2.5"`}},
		{"value list", `{"kind": "field_equals", "field": "n", "value": ["a"]}`, "effects[0].value", []string{"string"}},
		// non-string literals in idempotency_key
		{"idempotency_key int", `{"kind": "record_written", "idempotency_key": 7}`, "effects[0].idempotency_key", []string{`"7"`}},
		{"idempotency_key bool", `{"kind": "record_written", "idempotency_key": false}`, "effects[0].idempotency_key", []string{`"false"`}},
		{"idempotency_key float", `{"kind": "record_written", "idempotency_key": 1.0}`, "effects[0].idempotency_key", []string{`"1"`}},
		{"idempotency_key list", `{"kind": "record_written", "idempotency_key": []}`, "effects[0].idempotency_key", []string{"string"}},
		// malformed value objects
		{"value object literal and param", `{"kind": "record_written", "match": {"id": {"literal": "1", "param": "x"}}}`, "effects[0].match.id", []string{"literal", "param"}},
		{"value object unknown key", `{"kind": "record_written", "match": {"id": {"foo": "x"}}}`, "effects[0].match.id", []string{"literal", "param"}},
		{"value object empty", `{"kind": "record_written", "match": {"id": {}}}`, "effects[0].match.id", []string{"literal", "param"}},
		{"value object empty param", `{"kind": "record_written", "match": {"id": {"param": ""}}}`, "effects[0].match.id.param", []string{"param"}},
		{"value object int param", `{"kind": "record_written", "match": {"id": {"param": 1}}}`, "effects[0].match.id.param", []string{"param"}},
		{"value object int literal", `{"kind": "record_written", "match": {"id": {"literal": 1}}}`, "effects[0].match.id.literal", []string{`"1"`}},
		{"value object null literal", `{"kind": "record_written", "match": {"id": {"literal": null}}}`, "effects[0].match.id.literal", []string{"string"}},
		{"malformed value in value", `{"kind": "field_equals", "field": "f", "value": {"foo": "x"}}`, "effects[0].value", []string{"literal", "param"}},
		{"malformed value in idempotency_key", `{"kind": "record_written", "idempotency_key": {"param": 3}}`, "effects[0].idempotency_key.param", []string{"param"}},
		// expected_count
		{"expected_count negative", `{"kind": "record_written", "expected_count": -1}`, "effects[0].expected_count", []string{"expected_count"}},
		{"expected_count fractional", `{"kind": "record_written", "expected_count": 1.5}`, "effects[0].expected_count", []string{"expected_count"}},
		{"expected_count negative fractional", `{"kind": "record_written", "expected_count": -0.5}`, "effects[0].expected_count", []string{"expected_count"}},
		{"expected_count string", `{"kind": "record_written", "expected_count": "1"}`, "effects[0].expected_count", []string{"expected_count"}},
		{"expected_count bool", `{"kind": "record_written", "expected_count": true}`, "effects[0].expected_count", []string{"expected_count"}},
		{"expected_count null", `{"kind": "record_written", "expected_count": null}`, "effects[0].expected_count", []string{"expected_count"}},
		// count_new_only on another kind
		{"count_new_only on field_equals", `{"kind": "field_equals", "field": "f", "value": "v", "count_new_only": true}`, "effects[0].count_new_only", []string{"record_written"}},
		{"count_new_only on exact_new_set", `{"kind": "exact_new_set", "new_records": [{"a": "b"}], "count_new_only": true}`, "effects[0].count_new_only", []string{"record_written"}},
		// new_records on another kind
		{"new_records on record_written", `{"kind": "record_written", "new_records": [{"a": "b"}]}`, "effects[0].new_records", []string{"exact_new_set"}},
		{"new_records on field_equals", `{"kind": "field_equals", "field": "f", "value": "v", "new_records": [{"a": "b"}]}`, "effects[0].new_records", []string{"exact_new_set"}},
		// field / value on another kind
		{"field on record_written", `{"kind": "record_written", "field": "f"}`, "effects[0].field", []string{"field_equals"}},
		{"value on record_written", `{"kind": "record_written", "value": "v"}`, "effects[0].value", []string{"field_equals"}},
		{"field on exact_new_set", `{"kind": "exact_new_set", "new_records": [{"a": "b"}], "field": "f"}`, "effects[0].field", []string{"field_equals"}},
		{"value on exact_new_set", `{"kind": "exact_new_set", "new_records": [{"a": "b"}], "value": "v"}`, "effects[0].value", []string{"field_equals"}},
		// wrongly typed flags
		{"count_new_only string", `{"kind": "record_written", "count_new_only": "true"}`, "effects[0].count_new_only", []string{"true or false"}},
		{"count_new_only int", `{"kind": "record_written", "count_new_only": 1}`, "effects[0].count_new_only", []string{"true or false"}},
		{"forbid_collateral_loss string", `{"kind": "record_written", "forbid_collateral_loss": "no"}`, "effects[0].forbid_collateral_loss", []string{"true or false"}},
		{"forbid_collateral_loss null", `{"kind": "record_written", "forbid_collateral_loss": null}`, "effects[0].forbid_collateral_loss", []string{"true or false"}},
		// key_field
		{"key_field int", `{"kind": "record_written", "idempotency_key": "k", "key_field": 3}`, "effects[0].key_field", []string{"string"}},
		{"key_field bool", `{"kind": "record_written", "key_field": true}`, "effects[0].key_field", []string{"string"}},
		// identity_field typed
		{"identity_field int", `{"kind": "record_written", "identity_field": 1}`, "effects[0].identity_field", []string{"string"}},
		// timeout_s
		{"timeout_s string", `{"kind": "record_written", "timeout_s": "5"}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		{"timeout_s bool", `{"kind": "record_written", "timeout_s": true}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		{"timeout_s negative", `{"kind": "record_written", "timeout_s": -1}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		{"timeout_s over 3600", `{"kind": "record_written", "timeout_s": 3601}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		{"timeout_s just over 3600", `{"kind": "record_written", "timeout_s": 3600.5}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		{"timeout_s null", `{"kind": "record_written", "timeout_s": null}`, "effects[0].timeout_s", []string{"timeout_s", "3600"}},
		// probe
		{"probe int", `{"kind": "record_written", "probe": 1}`, "effects[0].probe", []string{"string"}},
		{"probe map", `{"kind": "record_written", "probe": {"a": "b"}}`, "effects[0].probe", []string{"string"}},
		// exact_new_set count
		{"exact_new_set count mismatch", `{"kind": "exact_new_set", "new_records": [{"a": "1"}, {"a": "2"}], "expected_count": 3}`, "effects[0].expected_count", []string{"expected_count: 2"}},
		{"exact_new_set default count with 2 members", `{"kind": "exact_new_set", "new_records": [{"a": "1"}, {"a": "2"}]}`, "effects[0].expected_count", []string{"expected_count: 2"}},
		{"exact_new_set empty list default count", `{"kind": "exact_new_set", "new_records": []}`, "effects[0].expected_count", []string{"expected_count: 0"}},
		{"exact_new_set missing new_records default count", `{"kind": "exact_new_set"}`, "effects[0].expected_count", []string{"expected_count: 0"}},
		{"exact_new_set empty member", `{"kind": "exact_new_set", "new_records": [{"a": "1"}, {}], "expected_count": 2}`, "effects[0].new_records[1]", []string{"field"}},
		{"exact_new_set empty identity_field", `{"kind": "exact_new_set", "new_records": [{"a": "1"}], "identity_field": ""}`, "effects[0].identity_field", []string{"identity_field"}},
		// field_equals completeness
		{"field_equals without field", `{"kind": "field_equals", "value": "v"}`, "effects[0].field", []string{"field"}},
		{"field_equals without value", `{"kind": "field_equals", "field": "note"}`, "effects[0].value", []string{"value"}},
		{"field_equals null value", `{"kind": "field_equals", "field": "note", "value": null}`, "effects[0].value", []string{"value"}},
		{"field_equals field not string", `{"kind": "field_equals", "field": 1, "value": "v"}`, "effects[0].field", []string{"string"}},
		// risk
		{"risk other word", `{"kind": "record_written", "risk": "dangerous"}`, "effects[0].risk", []string{"reversible", "irreversible"}},
		{"risk capitalised", `{"kind": "record_written", "risk": "Irreversible"}`, "effects[0].risk", []string{"reversible", "irreversible"}},
		{"risk bool", `{"kind": "record_written", "risk": true}`, "effects[0].risk", []string{"reversible", "irreversible"}},
		// YAML forms
		{"yaml int literal", "kind: record_written\nmatch:\n  id: 1", "effects[0].match.id", []string{`"1"`}},
		{"yaml bool literal", "kind: record_written\nmatch:\n  ok: true", "effects[0].match.ok", []string{`"true"`}},
		{"yaml null literal", "kind: record_written\nmatch:\n  ok: ~", "effects[0].match.ok", []string{"string"}},
		{"yaml float literal", "kind: record_written\nmatch:\n  n: 1.0", "effects[0].match.n", []string{`"1"`}},
		{"yaml unknown key", "kind: record_written\nprobee: x", "effects[0].probee", []string{"probee"}},
		{"yaml timeout string", "kind: record_written\ntimeout_s: \"5\"", "effects[0].timeout_s", []string{"timeout_s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadOne(t, tc.src)
			if err == nil {
				t.Fatalf("loaded %s, want refusal at %s", tc.src, tc.path)
			}
			var jerr *refusal.Error
			if !errors.As(err, &jerr) {
				t.Fatalf("error %v is %T, want *refusal.Error", err, err)
			}
			got := struct{ Code, Path string }{jerr.Code, jerr.Path}
			want := struct{ Code, Path string }{CodeInvalidContract, tc.path}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("refusal mismatch (-want +got):\n%s\nmessage: %s", d, jerr.Message)
			}
			if strings.TrimSpace(jerr.Message) == "" {
				t.Fatalf("empty message")
			}
			for _, h := range tc.hint {
				if !strings.Contains(jerr.Message, h) {
					t.Errorf("message %q does not contain the fix hint %q", jerr.Message, h)
				}
			}
			// The refusal must name the key it is about (Error() = path: message).
			key := tc.path[strings.LastIndex(tc.path, ".")+1:]
			if i := strings.Index(key, "["); i > 0 {
				key = key[:i]
			}
			if !strings.Contains(jerr.Error(), key) {
				t.Errorf("Error() %q does not name the key %q", jerr.Error(), key)
			}
		})
	}
}

// Refusals at the list level and for later entries carry the entry's index.
func TestLoadRefusalPathIndex(t *testing.T) {
	t.Parallel()
	_, err := ParseEffects([]byte(`[{"kind": "record_written"}, {"kind": "record_written", "match": {"id": 1}}]`), "effects")
	var jerr *refusal.Error
	if !errors.As(err, &jerr) {
		t.Fatalf("got %v, want *refusal.Error", err)
	}
	if d := cmp.Diff("effects[1].match.id", jerr.Path); d != "" {
		t.Errorf("path (-want +got):\n%s", d)
	}
	_, err = ParseEffects([]byte(`{"kind": "record_written"}`), "effects")
	if !errors.As(err, &jerr) || jerr.Code != CodeInvalidContract || jerr.Path != "effects" {
		t.Errorf("non-list document: got %#v, want INVALID_CONTRACT at effects", err)
	}
}

// Things the spec allows must load.
func TestLoadAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
	}{
		{"count_new_only false on field_equals", `{"kind": "field_equals", "field": "f", "value": "v", "count_new_only": false}`},
		{"count_new_only false on exact_new_set", `{"kind": "exact_new_set", "new_records": [{"a": "b"}], "count_new_only": false}`},
		{"empty new_records on record_written", `{"kind": "record_written", "new_records": []}`},
		{"empty new_records on field_equals", `{"kind": "field_equals", "field": "f", "value": "v", "new_records": []}`},
		{"expected_count 0", `{"kind": "record_written", "expected_count": 0}`},
		{"expected_count integral float", `{"kind": "record_written", "expected_count": 2.0}`},
		{"timeout_s 0", `{"kind": "record_written", "timeout_s": 0}`},
		{"timeout_s 3600", `{"kind": "record_written", "timeout_s": 3600}`},
		{"timeout_s fractional", `{"kind": "record_written", "timeout_s": 0.25}`},
		{"risk irreversible", `{"kind": "record_written", "risk": "irreversible"}`},
		{"risk reversible", `{"kind": "record_written", "risk": "reversible"}`},
		{"probe text", `{"kind": "record_written", "probe": "GET /patients"}`},
		{"empty set", `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`},
		{"repeated member", `{"kind": "exact_new_set", "new_records": [{"a": "b"}, {"a": "b"}], "expected_count": 2}`},
		{"field_equals empty value", `{"kind": "field_equals", "field": "note", "value": ""}`},
		{"param everywhere", `{"kind": "field_equals", "match": {"id": {"param": "i"}}, "field": "note", "value": {"param": "n"}, "idempotency_key": {"param": "k"}, "key_field": "idem"}`},
		{"yaml quoted id", "kind: record_written\nmatch:\n  id: \"1\""},
		{"yaml date-like text", "kind: record_written\nmatch:\n  day: 2026-01-01"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := loadOne(t, tc.src); err != nil {
				t.Fatalf("refused %s: %v", tc.src, err)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got, err := loadOne(t, `{"kind": "record_written"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := Effect{
		Kind:                 RecordWritten,
		Match:                Selector{},
		ExpectedCount:        1,
		KeyField:             "key",
		IdentityField:        "id",
		ForbidCollateralLoss: true,
		Risk:                 Reversible,
		TimeoutS:             5,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
}

func TestLoadLiteralObjectEqualsBareString(t *testing.T) {
	t.Parallel()
	a, err := loadOne(t, `{"kind": "field_equals", "match": {"id": {"literal": "1"}}, "field": "n", "value": {"literal": "x"}, "idempotency_key": {"literal": "k"}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadOne(t, `{"kind": "field_equals", "match": {"id": "1"}, "field": "n", "value": "x", "idempotency_key": "k"}`)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(b, a); d != "" {
		t.Errorf("{literal} differs from bare string (-bare +literal):\n%s", d)
	}
	ca, err := Bind(a, nil, "effects[0]")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Bind(b, nil, "effects[0]")
	if err != nil {
		t.Fatal(err)
	}
	if ca.Hash != cb.Hash {
		t.Errorf("hash of {literal} %s != hash of bare %s", ca.Hash, cb.Hash)
	}
}

func TestLoadYAMLAndJSONIdentical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, json string
	}{
		{
			"record_written full",
			`
- kind: record_written
  match:
    patient_id: {param: pid}
    type: Triage
  expected_count: 2
  count_new_only: true
  idempotency_key: {literal: "abc"}
  key_field: idem
  identity_field: uuid
  forbid_collateral_loss: false
  risk: irreversible
  timeout_s: 12.5
  probe: "GET /x"
`,
			`[{"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": "Triage"},
			  "expected_count": 2, "count_new_only": true, "idempotency_key": {"literal": "abc"},
			  "key_field": "idem", "identity_field": "uuid", "forbid_collateral_loss": false,
			  "risk": "irreversible", "timeout_s": 12.5, "probe": "GET /x"}]`,
		},
		{
			"field_equals and exact_new_set",
			`
- kind: field_equals
  match: {name: "Zoë"}
  field: note
  value: naïve
- kind: exact_new_set
  match: {user_id: "32"}
  new_records:
    - {user_id: "32", song_id: "199"}
    - {user_id: "32", song_id: "9"}
  expected_count: 2
`,
			`[{"kind": "field_equals", "match": {"name": "Zoë"}, "field": "note", "value": "naïve"},
			  {"kind": "exact_new_set", "match": {"user_id": "32"},
			   "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}],
			   "expected_count": 2}]`,
		},
		{
			"minimal",
			"- kind: record_written\n",
			`[{"kind": "record_written"}]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y, err := ParseEffects([]byte(tc.yaml), "effects")
			if err != nil {
				t.Fatalf("YAML: %v", err)
			}
			j, err := ParseEffects([]byte(tc.json), "effects")
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if d := cmp.Diff(j, y); d != "" {
				t.Errorf("YAML and JSON differ (-json +yaml):\n%s", d)
			}
		})
	}
}

func TestLoadYAMLQuotedVersusBareInteger(t *testing.T) {
	t.Parallel()
	e, err := loadOne(t, "kind: record_written\nmatch:\n  id: \"1\"")
	if err != nil {
		t.Fatalf("id: \"1\" refused: %v", err)
	}
	if d := cmp.Diff(Selector{"id": {Literal: "1"}}, e.Match); d != "" {
		t.Errorf("match (-want +got):\n%s", d)
	}
	_, err = loadOne(t, "kind: record_written\nmatch:\n  id: 1")
	var jerr *refusal.Error
	if !errors.As(err, &jerr) {
		t.Fatalf("id: 1 gave %v, want *refusal.Error", err)
	}
	if d := cmp.Diff(struct{ Code, Path string }{CodeInvalidContract, "effects[0].match.id"}, struct{ Code, Path string }{jerr.Code, jerr.Path}); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestLoadDefaultsPerKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want Effect
	}{
		{`{"kind": "field_equals", "field": "note", "value": "x"}`, Effect{
			Kind: FieldEquals, Match: Selector{}, ExpectedCount: 1, KeyField: "key", Field: "note",
			Value: &Value{Literal: "x"}, IdentityField: "id", ForbidCollateralLoss: true, Risk: Reversible, TimeoutS: 5,
		}},
		{`{"kind": "exact_new_set", "new_records": [{"a": "b"}]}`, Effect{
			Kind: ExactNewSet, Match: Selector{}, ExpectedCount: 1, KeyField: "key",
			NewRecords: []Selector{{"a": {Literal: "b"}}}, IdentityField: "id", ForbidCollateralLoss: true, Risk: Reversible, TimeoutS: 5,
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.want.Kind), func(t *testing.T) {
			t.Parallel()
			got, err := loadOne(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// docs/contracts.md §1: "A contract is a map, written in YAML or JSON", and §5 writes
// contracts in YAML flow style. A YAML flow-style document that is not JSON
// must load, identically to its JSON form.
func TestLoadYAMLFlowStyle(t *testing.T) {
	t.Parallel()
	want, err := ParseEffects([]byte(`[{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}]`), "effects")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		`[{kind: record_written, match: {patient_id: p1, type: Triage}}]`,
		"- {kind: record_written, match: {patient_id: p1, type: Triage}}\n",
	} {
		got, err := ParseEffects([]byte(doc), "effects")
		if err != nil {
			t.Errorf("YAML flow style %q refused: %v", doc, err)
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("YAML flow style %q (-json +yaml):\n%s", doc, d)
		}
	}
}
