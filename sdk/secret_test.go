package sdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/deployment"
)

// TestSecretSlots: Secret reads each slot where the daemon's own code
// (sdk/unstable/deployment) puts it, for both ways of declaring one.
func TestSecretSlots(t *testing.T) {
	t.Parallel()
	s, err := deployment.Parse(map[string]any{
		"kind":       "ldap",
		"secret_env": map[string]any{"password": "PW"},
		"auth":       map[string]any{"bearer_env": "TOKEN"},
	}, "effects", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg, secrets, err := s.Resolve(nil, "c", func(n string) (string, bool) {
		return map[string]string{"PW": "pw-1-long", "TOKEN": "tok-2-long"}[n], true
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := sdk.ConfigureRequest{Kind: "ldap", Config: cfg, Secrets: secrets}
	for slot, want := range map[string]string{"password": "pw-1-long", "auth.bearer_env": "tok-2-long"} {
		if got, ok := req.Secret(slot); !ok || got != want {
			t.Errorf("Secret(%q) = %q, %v; want %q", slot, got, ok, want)
		}
	}
	for _, slot := range []string{"secret_env.password", "bearer_env", "PW", "Password"} {
		if got, ok := req.Secret(slot); ok {
			t.Errorf("Secret(%q) = %q; want no such slot", slot, got)
		}
	}
	if _, err := req.RequireSecret("api_key"); !isRefusalAt(err, "secret_env.api_key") {
		t.Errorf("RequireSecret(api_key) = %v; want a refusal at secret_env.api_key", err)
	}
	if _, err := req.RequireSecret("db.dsn_env"); !isRefusalAt(err, "db.dsn_env") {
		t.Errorf("RequireSecret(db.dsn_env) = %v; want a refusal at db.dsn_env", err)
	}
	if v, err := req.RequireSecret("password"); err != nil || v != "pw-1-long" {
		t.Errorf("RequireSecret(password) = %q, %v", v, err)
	}
}

func isRefusalAt(err error, path string) bool {
	ce, ok := errors.AsType[*refusal.Error](err)
	return ok && ce.Path == path
}

type ldapOptions struct {
	BaseDN string `json:"base_dn"`
	UID    string `json:"uid"`
}

type ldapSettings struct{ sec sdk.Section[ldapOptions] }

func (*ldapSettings) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{}, nil
}

func (*ldapSettings) Read(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{}, nil
}

// TestSectionDecodes: Section decodes the shape the daemon sends and its
// strict decoder refuses a top-level key the adapter does not take.
func TestSectionDecodes(t *testing.T) {
	t.Parallel()
	var got sdk.Section[ldapOptions]
	factory := sdk.Define(sdk.Info{Kind: "ldap", Tier: sdk.TierIndependentSystem},
		func(_ context.Context, sec sdk.Section[ldapOptions], _ sdk.ConfigureRequest) (*ldapSettings, error) {
			got = sec
			return &ldapSettings{sec: sec}, nil
		})
	req := sdk.ConfigureRequest{Kind: "ldap", Config: []byte(`{"kind":"ldap","options":{"base_dn":"dc=x","uid":"jdoe"}}`)}
	if err := factory().Configure(t.Context(), req); err != nil || got.Options.UID != "jdoe" || got.Kind != "ldap" {
		t.Fatalf("Configure = %v; decoded %+v", err, got)
	}
	req.Config = []byte(`{"kind":"ldap","options":{"base_dn":"dc=x"},"filter":"(uid=*)"}`)
	if err := factory().Configure(t.Context(), req); !isRefusalAt(err, "filter") {
		t.Errorf("Configure with an unknown top-level key = %v; want a refusal at filter", err)
	}
}
