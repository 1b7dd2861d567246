package deployment

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

// TestResolveShape: the adapter receives kind, options with option_params
// merged in, and its own top-level keys; the daemon's keys and secret_env
// never reach it, and each secret arrives under its slot.
func TestResolveShape(t *testing.T) {
	t.Parallel()
	sec := map[string]any{
		"kind":                   "ldap",
		"options":                map[string]any{"base_dn": "dc=example,dc=org"},
		"option_params":          map[string]any{"uid": map[string]any{"param": "user"}, "ou": map[string]any{"template": "ou={dept}"}},
		"secret_env":             map[string]any{"password": "LDAP_PW"},
		"auth":                   map[string]any{"bind_dn": "cn=reader", "token_env": "LDAP_TOKEN"},
		"evidence_redact_fields": []any{"mail"},
		"freshness_field":        "modifyTimestamp",
		"freshness_window_s":     json.Number("60"),
		"settle_s":               json.Number("2"),
		"newness":                "declaration",
	}
	s, err := Parse(sec, "effects", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg, secrets, err := s.Resolve(map[string]string{"user": "jdoe", "dept": "ops"}, "candidates[0]",
		env(map[string]string{"LDAP_PW": "pw-1-long", "LDAP_TOKEN": "tok-2-long"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(cfg, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"kind":    "ldap",
		"options": map[string]any{"base_dn": "dc=example,dc=org", "uid": "jdoe", "ou": "ou=ops"},
		"auth":    map[string]any{"bind_dn": "cn=reader", "token_env": "LDAP_TOKEN"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("section (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"secret_env.password": "pw-1-long", "auth.token_env": "tok-2-long"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	// Resolve leaves the parsed section as it was: a second run binds anew.
	cfg2, _, err := s.Resolve(map[string]string{"user": "other", "dept": "ops"}, "candidates[0]",
		env(map[string]string{"LDAP_PW": "pw-1-long", "LDAP_TOKEN": "tok-2-long"}), nil)
	if err != nil || !json.Valid(cfg2) || string(cfg2) == string(cfg) {
		t.Errorf("second Resolve = %s, %v; want the other user bound", cfg2, err)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sec    map[string]any
		plugin bool
		path   string
	}{
		{"no kind", map[string]any{}, true, "effects.kind"},
		{"options on a built-in", map[string]any{"kind": "sql", "options": map[string]any{}}, false, "effects.options"},
		{"credential option", map[string]any{"kind": "x", "options": map[string]any{"api_token": "t"}}, true, "effects.options.api_token"},
		{"nested credential option", map[string]any{"kind": "x", "options": map[string]any{"conn": map[string]any{"host": "h", "db_password": "p"}}}, true, "effects.options.conn.db_password"},
		{"credential in a listed option", map[string]any{"kind": "x", "options": map[string]any{"hosts": []any{map[string]any{"name": "a"}, map[string]any{"secret": "s"}}}}, true, "effects.options.hosts[1].secret"},
		{"nested credential option param", map[string]any{"kind": "x", "option_params": map[string]any{"conn": map[string]any{"service_api_key": "k"}}}, true, "effects.option_params.conn.service_api_key"},
		{"camelCase credential option", map[string]any{"kind": "x", "options": map[string]any{"conn": map[string]any{"clientSecret": "s"}}}, true, "effects.options.conn.clientSecret"},
		{"credential at the section's top", map[string]any{"kind": "x", "bind_password": "hunter2"}, true, "effects.bind_password"},
		{"credential nested in a built-in kind's field", map[string]any{"kind": "x", "auth": map[string]any{"headers": []any{map[string]any{"x-api-key": "k"}}}}, false, "effects.auth.headers[0].x-api-key"},
		{"hyphenated api key in a list", map[string]any{"kind": "x", "options": map[string]any{"headers": []any{map[string]any{"x-api-key": "k"}}}}, true, "effects.options.headers[0].x-api-key"},
		{"camelCase credential option param", map[string]any{"kind": "x", "option_params": map[string]any{"accessToken": "t"}}, true, "effects.option_params.accessToken"},
		{"slot ends in _env", map[string]any{"kind": "x", "secret_env": map[string]any{"pw_env": "PW"}}, true, "effects.secret_env.pw_env"},
		{"slot with a dot", map[string]any{"kind": "x", "secret_env": map[string]any{"a.b": "PW"}}, true, "effects.secret_env.a.b"},
		{"secret value", map[string]any{"kind": "x", "secret_env": map[string]any{"pw": "hunter2!"}}, true, "effects.secret_env.pw"},
		{"env value", map[string]any{"kind": "x", "db": map[string]any{"dsn_env": "postgres://u:p@h"}}, true, "effects.db.dsn_env"},
		{"option twice", map[string]any{"kind": "x", "options": map[string]any{"a": "1"}, "option_params": map[string]any{"a": "2"}}, true, "effects.option_params.a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.sec, "effects", tc.plugin)
			perr, ok := errors.AsType[*refusal.Error](err)
			if !ok || perr.Path != tc.path {
				t.Fatalf("Parse = %v; want a refusal at %s", err, tc.path)
			}
		})
	}
}

func TestResolveRefusals(t *testing.T) {
	t.Parallel()
	s, err := Parse(map[string]any{"kind": "x", "secret_env": map[string]any{"password": "PW"}, "option_params": map[string]any{"uid": map[string]any{"param": "user"}}}, "effects", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params map[string]string
		env    map[string]string
		allow  func(string) bool
		path   string
	}{
		{"missing parameter", nil, map[string]string{"PW": "long-enough"}, nil, "c.option_params"},
		{"control character", map[string]string{"user": "a\nb"}, map[string]string{"PW": "long-enough"}, nil, "c.option_params.uid"},
		{"unset variable", map[string]string{"user": "a"}, nil, nil, "c.secret_env.password"},
		{"refused variable", map[string]string{"user": "a"}, map[string]string{"PW": "long-enough"}, func(string) bool { return false }, "c.secret_env.password"},
		{"secret too short", map[string]string{"user": "a"}, map[string]string{"PW": "7-bytes"}, nil, "c.secret_env.password"},
	} {
		_, _, err := s.Resolve(tc.params, "c", env(tc.env), tc.allow)
		perr, ok := errors.AsType[*refusal.Error](err)
		if !ok || perr.Path != tc.path {
			t.Errorf("%s: Resolve = %v; want a refusal at %s", tc.name, err, tc.path)
		}
	}
}

// A secret shorter than MinSecretBytes, or a basic_env pair whose
// password is, is refused at its slot, naming the variable and never the
// value; eight bytes are enough.
func TestLookupSecretsLength(t *testing.T) {
	t.Parallel()
	refs := map[string]string{"auth.basic_env": "SOR_BASIC"}
	for _, tc := range []struct{ value, refused string }{
		{"x", "SOR_BASIC holds fewer than 8 bytes"},
		{"alice:pw", "the password in environment variable SOR_BASIC (user:password) holds fewer than 8 bytes"},
		{"alice:1234567", "the password in environment variable SOR_BASIC"},
		{"alice:12345678", ""},
	} {
		got, err := LookupSecrets(refs, "candidates[0]", env(map[string]string{"SOR_BASIC": tc.value}), nil)
		if tc.refused == "" {
			if err != nil || got["auth.basic_env"] != tc.value {
				t.Errorf("%d bytes: %v %v, want accepted", len(tc.value), got, err)
			}
			continue
		}
		perr, ok := errors.AsType[*refusal.Error](err)
		if !ok || perr.Code != CodeSecretTooShort || perr.Path != "candidates[0].auth.basic_env" || !strings.Contains(perr.Message, tc.refused) || len(tc.value) > 1 && strings.Contains(err.Error(), tc.value) {
			t.Errorf("%d bytes: %v, want %s at candidates[0].auth.basic_env with %q", len(tc.value), err, CodeSecretTooShort, tc.refused)
		}
	}
	if _, err := LookupSecrets(map[string]string{"password": "PW"}, "effects.secret_env", env(map[string]string{"PW": "12345678"}), nil); err != nil {
		t.Errorf("eight bytes refused: %v", err)
	}
}

func TestNamesCredentialSpellings(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"password": true, "client_secret": true, "clientSecret": true, "ClientSecret": true,
		"accessToken": true, "dbPassword": true, "x-api-key": true, "api.key": true, "apiKey": true,
		"API_KEY": true, "refreshTokens": true, "DBPassword": true, "APIToken": true, "PASSWORD": true, "OAuthToken": true, "tokenPath": false, "passwordEnv": false,
		"password_env": false, "keyspace": false, "monkey": false, "pageSize": false, "records": false,
	} {
		if got := NamesCredential(key); got != want {
			t.Errorf("NamesCredential(%q) = %v, want %v", key, got, want)
		}
	}
}
