package judge

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestTemplateValues: {template: "Patient/{patient_id}"} composes literal
// text with run parameters (sdk/param's placeholders) at bind time, and the
// bound contract — its values and its hash — is the literal it expands to.
func TestTemplateValues(t *testing.T) {
	t.Parallel()
	params := map[string]string{"patient_id": "p1", "enc": "e-7", "amount": "1234.50"}
	viaTemplate := bindOne(t, `{"kind": "field_equals", "match": {"subject": {"template": "Patient/{patient_id}"}, "context": {"template": "Encounter/{enc}/{patient_id}"}},
		"field": "note", "value": {"template": "seen by {patient_id}"}, "idempotency_key": {"template": "k-{enc}"}}`, params)
	viaLiteral := bindOne(t, `{"kind": "field_equals", "match": {"subject": "Patient/p1", "context": "Encounter/e-7/p1"},
		"field": "note", "value": "seen by p1", "idempotency_key": "k-e-7"}`, nil)
	if d := cmp.Diff(viaLiteral.Match, viaTemplate.Match); d != "" {
		t.Errorf("bound match (-literal +template):\n%s", d)
	}
	if *viaTemplate.Value != "seen by p1" || *viaTemplate.IdempotencyKey != "k-e-7" {
		t.Errorf("bound value %q, key %q", *viaTemplate.Value, *viaTemplate.IdempotencyKey)
	}
	if viaTemplate.Hash != viaLiteral.Hash {
		t.Errorf("template hash %s, literal hash %s: a template must hash as the literal it expands to", viaTemplate.Hash, viaLiteral.Hash)
	}
	// A template in new_records, and a typed template (checked when bound).
	set := bindOne(t, `{"kind": "exact_new_set", "new_records": [{"ref": {"template": "Patient/{patient_id}"}}], "expected_count": 1}`, params)
	if got := set.NewRecords[0][0].Value; got != "Patient/p1" {
		t.Errorf("new_records value %q, want Patient/p1", got)
	}
	typed := bindOne(t, `{"kind": "record_written", "match": {"amount": {"template": "{amount}", "as": "decimal"}}}`, params)
	if typed.Match[0].Value != "1234.5" || typed.Match[0].As != AsDecimal {
		t.Errorf("typed template bound to %+v, want 1234.5 as decimal", typed.Match[0])
	}
	// It judges as the literal does.
	after := read(t, `[{"id": 1, "subject": "Patient/p1", "context": "Encounter/e-7/p1", "note": "seen by p1", "key": "k-e-7"}]`)
	v := Judge(viaTemplate, read(t, `[]`), after, Options{})
	if v.Decision != Confirmed || v.ContractHash != viaLiteral.Hash {
		t.Errorf("template contract: %s %v hash %s", v.Decision, v.Codes(), v.ContractHash)
	}
}

// TestTemplateMissingParam: a placeholder the run does not supply is the
// refusal an unbound {param} is (UNBOUND_PARAM), naming every missing
// parameter and the template's path.
func TestTemplateMissingParam(t *testing.T) {
	t.Parallel()
	e, err := loadOne(t, `{"kind": "record_written", "match": {"subject": {"template": "Patient/{patient_id}/{visit}"}, "type": {"param": "t"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Bind(e, map[string]string{"visit": "v1"}, "effects[0]")
	var jerr *refusal.Error
	if c != nil || !errors.As(err, &jerr) {
		t.Fatalf("got %v, %v; want an *refusal.Error", c, err)
	}
	if jerr.Code != CodeUnboundParam || jerr.Path != "effects[0].match.subject.template" {
		t.Errorf("code %s path %q, want %s at effects[0].match.subject.template", jerr.Code, jerr.Path, CodeUnboundParam)
	}
	for _, n := range []string{`"patient_id"`, `"t"`} {
		if !strings.Contains(jerr.Message, n) {
			t.Errorf("message %q does not name %s", jerr.Message, n)
		}
	}
	if strings.Contains(jerr.Message, "visit") {
		t.Errorf("message %q names the bound parameter visit", jerr.Message)
	}
	// A typed template whose expansion does not parse names its parameter.
	e, err = loadOne(t, `{"kind": "record_written", "match": {"n": {"template": "{amount}", "as": "integer"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Bind(e, map[string]string{"amount": "12.5"}, "effects[0]"); err == nil || !strings.Contains(err.Error(), "amount") || !strings.Contains(err.Error(), "effects[0].match.n.template") {
		t.Errorf("typed template that does not parse: %v", err)
	}
}

// TestTemplateLoadRefusals: a malformed template is refused when the
// contract loads, naming the template's path and the fix.
func TestTemplateLoadRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, path, hint string
	}{
		{"empty", `{"kind": "record_written", "match": {"s": {"template": ""}}}`, "effects[0].match.s.template", "names no run parameter"},
		{"no placeholder", `{"kind": "record_written", "match": {"s": {"template": "Patient/1"}}}`, "effects[0].match.s.template", "literal"},
		{"unclosed brace", `{"kind": "record_written", "match": {"s": {"template": "Patient/{patient_id"}}}`, "effects[0].match.s.template", "brace"},
		{"stray closing brace", `{"kind": "field_equals", "field": "f", "value": {"template": "{a}}"}}`, "effects[0].value.template", "brace"},
		{"not text", `{"kind": "record_written", "idempotency_key": {"template": 7}}`, "effects[0].idempotency_key.template", "Patient/{patient_id}"},
		{"with another key", `{"kind": "record_written", "match": {"s": {"template": "{a}", "param": "a"}}}`, "effects[0].match.s", "exactly one key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadOne(t, tc.src)
			var jerr *refusal.Error
			if !errors.As(err, &jerr) {
				t.Fatalf("got %v, want *refusal.Error", err)
			}
			if jerr.Path != tc.path || !strings.Contains(jerr.Message, tc.hint) {
				t.Errorf("refusal %q at %q; want path %q and %q in the message", jerr.Message, jerr.Path, tc.path, tc.hint)
			}
		})
	}
}
