package sdk_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

type decodeTarget struct {
	Root  string `json:"root"`
	Limit int    `json:"limit"`
	Auth  *struct {
		TokenEnv string `json:"token_env"`
	} `json:"auth"`
	Fields map[string]struct {
		Selector string `json:"selector"`
	} `json:"fields"`
	Extra json.RawMessage `json:"extra"`
	sharedKeys
	Names  map[string]string `json:"names"`
	Tags   []string          `json:"tags"`
	Amount json.Number       `json:"amount"`
	Max    *int              `json:"max"`
}

// sharedKeys are keys several sections share, declared once and embedded.
type sharedKeys struct {
	BaseURL   string `json:"base_url"`
	VerifyTLS *bool  `json:"verify_tls"`
}

func TestDecodeConfigRefusesUnknownKeys(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		raw      string
		kind     string
		wantPath string
		wantMsg  []string
	}{
		"top level":        {`{"root":"/x","rooot":"/y"}`, "", "rooot", []string{`unknown key; "rooot" is not one of: root, limit, auth, fields, extra`, `(did you mean "root"?)`}},
		"with the kind":    {`{"lmit":1}`, "demo", "lmit", []string{"unknown key for kind demo", `"lmit"`, "root, limit"}},
		"nested map":       {`{"auth":{"token":"T"}}`, "demo", "auth.token", []string{`"token" is not one of the keys of auth: token_env`}},
		"map of structs":   {`{"fields":{"note":{"selector":"td","format":"x"}}}`, "", "fields.note.format", []string{"keys of fields.note: selector"}},
		"first in order":   {`{"zz":1,"aa":2}`, "", "aa", []string{"unknown key"}},
		"kind is not data": {`{"kind":"demo","nope":1}`, "", "nope", []string{"not one of: root"}},
		"another kind":     {`{"kind":"other","root":"/x"}`, "demo", "kind", []string{`this adapter reads kind "demo", not "other"`}},
		"embedded keys":    {`{"base_url":"https://h","verify":true}`, "", "verify", []string{"extra, base_url, verify_tls, names"}},
		"not a bool":       {`{"verify_tls":"no"}`, "", "verify_tls", []string{"must be true or false"}},
		"not a string":     {`{"root":5}`, "", "root", []string{"must be a string"}},
		"not whole":        {`{"max":1.5}`, "", "max", []string{"must be a whole number"}},
		"map entry":        {`{"names":{"code":["x"]}}`, "", "names.code", []string{"must be a string"}},
		"not a map":        {`{"names":"x"}`, "", "names", []string{"must be a map"}},
		"not a list":       {`{"tags":"x"}`, "", "tags", []string{"must be a list"}},
		"list item":        {`{"tags":["a",1]}`, "", "tags[1]", []string{"must be a string"}},
		"not a number":     {`{"amount":true}`, "", "amount", []string{"must be a number"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var v decodeTarget
			err := sdk.ConfigureRequest{Kind: tt.kind, Config: json.RawMessage(tt.raw)}.DecodeConfig(&v)
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("DecodeConfig = %v; want a *refusal.Error", err)
			}
			if ce.Path != tt.wantPath {
				t.Errorf("path %q, want %q (%v)", ce.Path, tt.wantPath, err)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(ce.Message, w) {
					t.Errorf("message %q does not say %q", ce.Message, w)
				}
			}
		})
	}
}

func TestDecodeConfigAccepts(t *testing.T) {
	t.Parallel()
	raw := `{"kind":"demo","root":"/x","limit":3,"auth":{"token_env":"T"},"fields":{"note":{"selector":"td"}},"extra":{"anything":[1]},"base_url":"https://h","verify_tls":false,"amount":"1.50"}`
	var v decodeTarget
	if err := (sdk.ConfigureRequest{Config: json.RawMessage(raw)}).DecodeConfig(&v); err != nil {
		t.Fatal(err)
	}
	if v.Root != "/x" || v.Limit != 3 || v.Auth == nil || v.Auth.TokenEnv != "T" || v.Fields["note"].Selector != "td" {
		t.Errorf("decoded %+v", v)
	}
	if v.BaseURL != "https://h" || v.VerifyTLS == nil || *v.VerifyTLS || v.Amount != "1.50" {
		t.Errorf("embedded keys and exact numbers: %+v", v)
	}
	if diff := cmp.Diff(`{"anything":[1]}`, string(v.Extra)); diff != "" {
		t.Errorf("raw value (-want +got):\n%s", diff)
	}
	if err := (sdk.ConfigureRequest{Config: nil}).DecodeConfig(&v); err != nil {
		t.Errorf("an empty section: %v", err)
	}
	var m map[string]any
	if err := (sdk.ConfigureRequest{Config: json.RawMessage(`{"a":1}`)}).DecodeConfig(&m); err != nil || m["a"] != json.Number("1") {
		t.Errorf("into a map: %v, %v; want exact numbers", m, err)
	}
}
