package sdk_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
)

func TestValueDecodesStrictlyAndBinds(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Patient sdk.Value `json:"patient"`
		Clinic  sdk.Value `json:"clinic"`
		Ward    sdk.Value `json:"ward"`
	}
	raw := json.RawMessage(`{"kind":"ledger","patient":{"param":"patient_id"},"clinic":"North","ward":{"literal":"3"}}`)
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"patient_id": "p-7"}
	for _, tc := range []struct {
		v    sdk.Value
		want string
	}{{cfg.Patient, "p-7"}, {cfg.Clinic, "North"}, {cfg.Ward, "3"}} {
		got, err := tc.v.Bind(params)
		if err != nil || got != tc.want {
			t.Errorf("%v bound to %q, %v; want %q", tc.v, got, err, tc.want)
		}
	}
	if !cfg.Patient.IsParam() || cfg.Patient.Name() != "patient_id" || cfg.Clinic.IsParam() {
		t.Errorf("IsParam/Name: %v %q %v", cfg.Patient.IsParam(), cfg.Patient.Name(), cfg.Clinic.IsParam())
	}
	_, err := cfg.Patient.BindAt(map[string]string{}, "patient")
	var ce *sdk.ConfigError
	if !errors.As(err, &ce) || ce.Path != "patient" || !strings.Contains(ce.Message, `no parameter "patient_id"`) {
		t.Errorf("a missing run parameter = %v; want a *ConfigError at patient", err)
	}
	for _, bad := range []string{`{"patient": 5}`, `{"patient": ["a"]}`, `{"patient": {"param": ""}}`, `{"patient": {"param": "a", "literal": "b"}}`} {
		if err := sdk.DecodeConfig(json.RawMessage(bad), &cfg); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	b, err := json.Marshal(sdk.Param("x"))
	if err != nil || string(b) != `{"param":"x"}` {
		t.Errorf("marshal = %s, %v", b, err)
	}
	if sdk.Literal("a").String() != "a" || sdk.Param("x").String() != "{param: x}" {
		t.Error("String")
	}
}
