package judge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// bindOne loads one JSON contract and binds it.
func bindOne(t testing.TB, src string, params map[string]string) *Contract {
	t.Helper()
	e, err := loadOne(t, src)
	if err != nil {
		t.Fatalf("load %s: %v", src, err)
	}
	c, err := Bind(e, params, "effects[0]")
	if err != nil {
		t.Fatalf("bind %s: %v", src, err)
	}
	return c
}

func TestBindParams(t *testing.T) {
	t.Parallel()
	params := map[string]string{"pid": "p1", "note": "Follow-up", "key": "abc", "song": "199", "empty": ""}
	tests := []struct {
		name string
		src  string
		want Contract
	}{
		{
			"match and idempotency_key",
			`{"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": "Triage"}, "idempotency_key": {"param": "key"}}`,
			Contract{Match: []Pair{{"patient_id", "p1", ""}, {"type", "Triage", ""}}, IdempotencyKey: new("abc")},
		},
		{
			"value",
			`{"kind": "field_equals", "match": {"id": "1"}, "field": "note", "value": {"param": "note"}}`,
			Contract{Match: []Pair{{"id", "1", ""}}, Value: new("Follow-up")},
		},
		{
			"empty parameter is bound, not missing",
			`{"kind": "field_equals", "field": "note", "value": {"param": "empty"}}`,
			Contract{Match: []Pair{}, Value: new("")},
		},
		{
			"new_records",
			`{"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": {"param": "song"}}, {"user_id": {"param": "pid"}}], "expected_count": 2}`,
			Contract{Match: []Pair{}, NewRecords: [][]Pair{{{"song_id", "199", ""}, {"user_id", "32", ""}}, {{"user_id", "p1", ""}}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.src, params)
			got := Contract{Match: c.Match, IdempotencyKey: c.IdempotencyKey, Value: c.Value, NewRecords: c.NewRecords}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("bound (-want +got):\n%s", d)
			}
			if c.Hash != HashContract(c) {
				t.Errorf("Hash %s is not HashContract %s", c.Hash, HashContract(c))
			}
		})
	}
}

func TestBindMissingParam(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		src    string
		params map[string]string
		names  []string
		path   string
	}{
		{"match", `{"kind": "record_written", "match": {"patient_id": {"param": "pid"}}}`, nil,
			[]string{"pid"}, "effects[0].match.patient_id.param"},
		{"value", `{"kind": "field_equals", "field": "note", "value": {"param": "note"}}`, map[string]string{"other": "x"},
			[]string{"note"}, "effects[0].value.param"},
		{"idempotency_key", `{"kind": "record_written", "idempotency_key": {"param": "k"}}`, map[string]string{},
			[]string{"k"}, "effects[0].idempotency_key.param"},
		{"new_records", `{"kind": "exact_new_set", "new_records": [{"a": "x"}, {"song_id": {"param": "song"}}], "expected_count": 2}`, nil,
			[]string{"song"}, "effects[0].new_records[1].song_id.param"},
		{"several", `{"kind": "field_equals", "match": {"a": {"param": "alpha"}, "b": {"param": "beta"}}, "field": "f", "value": {"param": "gamma"}, "idempotency_key": {"param": "delta"}}`,
			map[string]string{"beta": "ok"}, []string{"alpha", "gamma", "delta"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := loadOne(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Bind(e, tc.params, "effects[0]")
			if c != nil {
				t.Errorf("Bind returned a contract despite the missing parameter")
			}
			var jerr *refusal.Error
			if !errors.As(err, &jerr) {
				t.Fatalf("got %v, want *refusal.Error", err)
			}
			if jerr.Code != CodeUnboundParam {
				t.Errorf("code %s, want %s", jerr.Code, CodeUnboundParam)
			}
			if tc.path != "" && jerr.Path != tc.path {
				t.Errorf("path %q, want %q", jerr.Path, tc.path)
			}
			if !strings.HasPrefix(jerr.Path, "effects[0]") {
				t.Errorf("path %q does not name the effect", jerr.Path)
			}
			for _, n := range tc.names {
				if !strings.Contains(jerr.Message, n) {
					t.Errorf("message %q does not name parameter %q", jerr.Message, n)
				}
			}
			if strings.Contains(jerr.Message, "beta") {
				t.Errorf("message %q names the bound parameter beta", jerr.Message)
			}
		})
	}
}

// docs/contracts.md §5: the hash is of the bound contract.
func TestHashOfBoundContract(t *testing.T) {
	t.Parallel()
	const want = "sha256:ee92689f85689bbd45ea87b6c554857d0f2f80dea54711581bf79ca6953a698a"
	viaParam := bindOne(t, `{"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": {"param": "t"}}}`,
		map[string]string{"pid": "p1", "t": "Triage"})
	viaLiteral := bindOne(t, `{"kind": "record_written", "match": {"patient_id": {"literal": "p1"}, "type": "Triage"}}`, nil)
	for name, c := range map[string]*Contract{"param": viaParam, "literal": viaLiteral} {
		if c.Hash != want {
			t.Errorf("%s: hash %s, want %s", name, c.Hash, want)
		}
	}
	other := bindOne(t, `{"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": {"param": "t"}}}`,
		map[string]string{"pid": "p2", "t": "Triage"})
	if other.Hash == want {
		t.Errorf("binding another value gave the same hash")
	}
}

func TestHashVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"base", `{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}`,
			"sha256:ee92689f85689bbd45ea87b6c554857d0f2f80dea54711581bf79ca6953a698a"},
		{"count_new_only", `{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}, "count_new_only": true}`,
			"sha256:f0341dde936ba727389d9b55e6adebaf66e2a9a4d1de5777b6b46b23bca951a0"},
		{"idempotency_key", `{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}, "idempotency_key": "abc"}`,
			"sha256:86fa2aaab213d36378032804e3243ce9f449e7f7a927a0dfb7c6b02f58a78a9f"},
		{"forbid_collateral_loss false", `{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}, "forbid_collateral_loss": false}`,
			"sha256:c5f35f49ff29106988adddc39b7f833ef1a94b0509804b10b2b4be96c94b05f9"},
		{"exact_new_set", `{"kind": "exact_new_set", "new_records": [{"user_id": "32", "song_id": "199"}, {"user_id": "32", "song_id": "9"}], "expected_count": 2}`,
			"sha256:edfaa35918793ff1432c6e204474b8fe9ec27d0b279ddb3dc4740356bda64419"},
		{"empty set", `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`,
			"sha256:3250d732be86e65ce02d99e58937a596d6df7645f8cc5a2e3c9f95452b5f5ec3"},
		{"field_equals non-ASCII", `{"kind": "field_equals", "match": {"name": "Zoë"}, "field": "note", "value": "naïve"}`,
			"sha256:08e15f11c870e04b420533ae2f7d453f60b4a6e2d9b61e857a647bc03de86efb"},
		{"base YAML", "kind: record_written\nmatch: {patient_id: p1, type: Triage}",
			"sha256:ee92689f85689bbd45ea87b6c554857d0f2f80dea54711581bf79ca6953a698a"},
		{"field_equals YAML", "kind: field_equals\nmatch: {name: \"Zoë\"}\nfield: note\nvalue: \"naïve\"",
			"sha256:08e15f11c870e04b420533ae2f7d453f60b4a6e2d9b61e857a647bc03de86efb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, tc.src, nil)
			if d := cmp.Diff(tc.want, c.Hash); d != "" {
				t.Errorf("hash (-want +got):\n%s\ninput: %s", d, HashInput(c))
			}
			if d := cmp.Diff(tc.want, HashContract(c)); d != "" {
				t.Errorf("HashContract (-want +got):\n%s", d)
			}
			// The hash is sha256 of HashInput.
			sum := sha256.Sum256([]byte(HashInput(c)))
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != c.Hash {
				t.Errorf("hash %s is not sha256 of HashInput (%s)", c.Hash, got)
			}
		})
	}
}

func TestHashInputFirstVector(t *testing.T) {
	t.Parallel()
	c := bindOne(t, `{"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}}`, nil)
	want := `{"expected_count":1,"field":null,"forbid_collateral_loss":true,"idempotency_key":null,"key_field":"key","kind":"record_written","match":{"patient_id":"p1","type":"Triage"},"value":null}`
	if d := cmp.Diff(want, HashInput(c)); d != "" {
		t.Errorf("HashInput (-want +got):\n%s", d)
	}
}

func TestHashIgnores(t *testing.T) {
	t.Parallel()
	base := `"kind": "record_written", "match": {"patient_id": "p1", "type": "Triage"}`
	const want = "sha256:ee92689f85689bbd45ea87b6c554857d0f2f80dea54711581bf79ca6953a698a"
	tests := []struct {
		name  string
		extra string
		same  bool
	}{
		{"risk irreversible", `"risk": "irreversible"`, true},
		{"risk reversible", `"risk": "reversible"`, true},
		{"probe", `"probe": "GET /patients?id=p1"`, true},
		{"timeout_s", `"timeout_s": 300`, true},
		{"timeout_s 0", `"timeout_s": 0`, true},
		{"identity_field id explicit", `"identity_field": "id"`, true},
		{"identity_field other", `"identity_field": "uuid"`, false},
		{"count_new_only false", `"count_new_only": false`, true},
		{"count_new_only true", `"count_new_only": true`, false},
		{"forbid_collateral_loss true explicit", `"forbid_collateral_loss": true`, true},
		{"expected_count 1 explicit", `"expected_count": 1`, true},
		{"expected_count 2", `"expected_count": 2`, false},
		{"key_field key explicit", `"key_field": "key"`, true},
		{"key_field other", `"key_field": "idem"`, false},
		{"empty new_records on record_written", `"new_records": []`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := bindOne(t, "{"+base+", "+tc.extra+"}", nil)
			if (c.Hash == want) != tc.same {
				t.Errorf("hash %s; same as base = %v, want %v\ninput: %s", c.Hash, c.Hash == want, tc.same, HashInput(c))
			}
		})
	}
}

func TestHashIdentityField(t *testing.T) {
	t.Parallel()
	rw := bindOne(t, `{"kind": "record_written", "identity_field": "uuid"}`, nil)
	if !strings.Contains(HashInput(rw), `"identity_field":"uuid"`) {
		t.Errorf("record_written with identity_field uuid: %s", HashInput(rw))
	}
	rwDefault := bindOne(t, `{"kind": "record_written"}`, nil)
	if strings.Contains(HashInput(rwDefault), "identity_field") {
		t.Errorf("record_written with default identity_field hashes it: %s", HashInput(rwDefault))
	}
	fe := bindOne(t, `{"kind": "field_equals", "field": "f", "value": "v", "identity_field": "uuid"}`, nil)
	if !strings.Contains(HashInput(fe), `"identity_field":"uuid"`) {
		t.Errorf("field_equals with identity_field uuid: %s", HashInput(fe))
	}
	ens := bindOne(t, `{"kind": "exact_new_set", "new_records": [], "expected_count": 0}`, nil)
	if !strings.Contains(HashInput(ens), `"identity_field":"id"`) {
		t.Errorf("exact_new_set hashes identity_field always: %s", HashInput(ens))
	}
	if !strings.Contains(HashInput(ens), `"new_records":[]`) {
		t.Errorf("exact_new_set hashes new_records always: %s", HashInput(ens))
	}
	ensUUID := bindOne(t, `{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "identity_field": "uuid"}`, nil)
	if ensUUID.Hash == ens.Hash {
		t.Errorf("exact_new_set identity_field does not change the hash")
	}
	// new_records keep declared order.
	a := bindOne(t, `{"kind": "exact_new_set", "new_records": [{"s": "1"}, {"s": "2"}], "expected_count": 2}`, nil)
	b := bindOne(t, `{"kind": "exact_new_set", "new_records": [{"s": "2"}, {"s": "1"}], "expected_count": 2}`, nil)
	if a.Hash == b.Hash {
		t.Errorf("new_records order does not enter the hash")
	}
	if !strings.Contains(HashInput(a), `"new_records":[{"s":"1"},{"s":"2"}]`) {
		t.Errorf("new_records not in declared order: %s", HashInput(a))
	}
}

func TestCanonicalJSONEscaping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"latin", "Zoë", `"Zo\u00eb"`},
		{"lowercase hex", "É", `"\u00c9"`},
		{"bmp", "€", `"\u20ac"`},
		{"astral surrogate pair", "😀", `"\ud83d\ude00"`},
		{"no HTML escaping", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"control", "a\nb\tc\u0001", `"a\nb\tc\u0001"`},
		{"sorted keys nested", map[string]any{"b": map[string]any{"z": "1", "a": "2"}, "a": []any{"x", true, nil}},
			`{"a":["x",true,null],"b":{"a":"2","z":"1"}}`},
		{"non-ASCII key", map[string]any{"é": "ü"}, `{"\u00e9":"\u00fc"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if d := cmp.Diff(tc.want, CanonicalJSON(tc.in)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	// And inside the hash input.
	c := bindOne(t, `{"kind": "field_equals", "match": {"name": "Zoë <&> 😀"}, "field": "note", "value": "naïve"}`, nil)
	in := HashInput(c)
	for _, want := range []string{`"name":"Zo\u00eb <&> \ud83d\ude00"`, `"value":"na\u00efve"`, `"field":"note"`} {
		if !strings.Contains(in, want) {
			t.Errorf("HashInput %s lacks %s", in, want)
		}
	}
}
