package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestParseDeploymentRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, path string
	}{
		{"no effects", "other: 1\n", "effects"},
		{"effects not a map", "effects: [1]\n", "effects"},
		{"neither kind nor candidates", "effects: {root: /x}\n", "effects"},
		{"both kind and candidates", "effects: {kind: sql, candidates: []}\n", "effects"},
		{"empty candidates", "effects: {candidates: []}\n", "effects.candidates"},
		{"candidate without kind", "effects: {candidates: [{root: /x}]}\n", "effects.candidates[0].kind"},
		{"unknown key beside candidates", "effects: {candidates: [{kind: sql}], bogus: 1}\n", "effects.bogus"},
		{"options on a built-in", "effects: {kind: sql, options: {a: b}}\n", "effects.options"},
		{"secret_env on a built-in", "effects: {kind: rest, secret_env: {a: B}}\n", "effects.secret_env"},
		{"credential option", "effects: {kind: acme, options: {client_secret: x}}\n", "effects.options.client_secret"},
		{"api key option", "effects: {kind: acme, options: {service_api_key: x}}\n", "effects.options.service_api_key"},
		{"token option", "effects: {kind: acme, options: {access-token: x}}\n", "effects.options.access-token"},
		{"nested credential option", "effects: {kind: acme, options: {conn: {host: h, auth: {token: x}}}}\n", "effects.options.conn.auth.token"},
		{"credential in an option list", "effects: {candidates: [{kind: acme, options: {peers: [{name: a}, {credential: x}]}}]}\n", "effects.candidates[0].options.peers[1].credential"},
		{"secret value instead of a name", "effects: {kind: acme, secret_env: {password: 'hunter2!'}}\n", "effects.secret_env.password"},
		{"secret slot ending in _env", "effects: {kind: acme, secret_env: {token_env: ACME_TOKEN}}\n", "effects.secret_env.token_env"},
		{"secret slot with a dot", "effects: {kind: acme, secret_env: {a.b: ACME_TOKEN}}\n", "effects.secret_env.a.b"},
		{"env value not a name", "effects: {kind: sql, sql_password_env: 'p@ss word'}\n", "effects.sql_password_env"},
		{"nested env value not a name", "effects: {kind: rest, auth: {bearer_env: 'abc def'}}\n", "effects.auth.bearer_env"},
		{"both redaction lists", "effects: {kind: sql, evidence_redact_fields: [a], evidence_keep_fields: [b]}\n", "effects"},
		{"freshness without window", "effects: {kind: sql, freshness_field: ts}\n", "effects.freshness_window_s"},
		{"window without field", "effects: {kind: sql, freshness_window_s: 5}\n", "effects.freshness_field"},
		{"negative settle", "effects: {kind: sql, settle_s: -1}\n", "effects.settle_s"},
		{"option set twice", "effects: {kind: acme, options: {a: x}, option_params: {a: {param: p}}}\n", "effects.option_params.a"},
		{"bad option param", "effects: {kind: acme, option_params: {a: 1}}\n", "effects.option_params.a"},
		{"kind not text", "effects: {kind: 5}\n", "effects.kind"},
		{"redact list not a list", "effects: {kind: sql, evidence_redact_fields: id}\n", "effects.evidence_redact_fields"},
		{"redact field empty", "effects: {kind: sql, evidence_redact_fields: [id, '']}\n", "effects.evidence_redact_fields[1]"},
		{"options not a map", "effects: {kind: acme, options: [a]}\n", "effects.options"},
		{"secret_env value a number", "effects: {kind: acme, secret_env: {pin: 123456}}\n", "effects.secret_env.pin"},
		{"default not a list", "effects: {candidates: [{kind: sql}], evidence_keep_fields: id}\n", "effects.candidates[0].evidence_keep_fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDeployment([]byte(tt.doc))
			var ce *refusal.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *refusal.Error", err)
			}
			if ce.Path != tt.path {
				t.Errorf("path %q, want %q (message %q)", ce.Path, tt.path, ce.Message)
			}
		})
	}
}

func TestNamesCredential(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"password": true, "client_secret": true, "api_token": true, "db-credential": true, "service_api_key": true,
		"credentials": true, "token_path": false, "password_env": false, "records": false, "page_size": false,
	} {
		if got := namesCredential(key); got != want {
			t.Errorf("namesCredential(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestResolveSecretsAndOptionParams(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`
effects:
  kind: acme-claims
  base_url: https://claims.example.invalid
  auth: {bearer_env: ACME_BEARER}
  options: {records: {path: /api/claims}}
  option_params: {claim_code: {param: claim_no}, region: {literal: eu}}
  secret_env: {password: ACME_READER_PASSWORD}
  evidence_redact_fields: [member_no]
  freshness_field: ts
  freshness_window_s: 60
  settle_s: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Candidates[0]
	if diff := cmp.Diff(map[string]string{"auth.bearer_env": "ACME_BEARER", "secret_env.password": "ACME_READER_PASSWORD"}, c.Secrets); diff != "" {
		t.Errorf("secret refs (-want +got):\n%s", diff)
	}
	if c.Freshness == nil || c.Freshness.Field != "ts" || c.Freshness.WindowS != 60 || c.SettleS != 2 {
		t.Errorf("judging settings: %+v %v", c.Freshness, c.SettleS)
	}
	env := map[string]string{"ACME_BEARER": "tok-12345", "ACME_READER_PASSWORD": "pw-45678"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	allowAll := func(string) bool { return true }

	cfg, secrets, err := c.Resolve(map[string]string{"claim_no": "C-9"}, lookup, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"auth.bearer_env": "tok-12345", "secret_env.password": "pw-45678"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	for _, v := range env {
		if strings.Contains(string(cfg), v) {
			t.Errorf("config JSON carries a secret value: %s", cfg)
		}
	}
	var sec map[string]any
	if err := json.Unmarshal(cfg, &sec); err != nil {
		t.Fatal(err)
	}
	opts := sec["options"].(map[string]any)
	if opts["claim_code"] != "C-9" || opts["region"] != "eu" {
		t.Errorf("options not bound: %v", opts)
	}
	if _, leaked := sec["secret_env"]; leaked {
		t.Error("secret_env reached the adapter config")
	}

	if _, _, err := c.Resolve(map[string]string{}, lookup, allowAll); err == nil || !strings.Contains(err.Error(), `"claim_no"`) {
		t.Errorf("missing option param: err = %v, want one naming claim_no", err)
	}
	if _, _, err := c.Resolve(map[string]string{"claim_no": "C-9\x00; x"}, lookup, allowAll); err == nil || !strings.Contains(err.Error(), "option_params.claim_code") || !strings.Contains(err.Error(), "control character") {
		t.Errorf("NUL in an option param: err = %v, want a refusal naming the option", err)
	}
	_, _, err = c.Resolve(map[string]string{"claim_no": "x"}, func(string) (string, bool) { return "", false }, allowAll)
	if err == nil || !strings.Contains(err.Error(), "ACME_BEARER") {
		t.Errorf("missing variable: err = %v, want one naming ACME_BEARER", err)
	}
	_, _, err = c.Resolve(map[string]string{"claim_no": "x"}, lookup, func(n string) bool { return n != "ACME_READER_PASSWORD" })
	if err == nil || !strings.Contains(err.Error(), "secrets.allow") {
		t.Errorf("disallowed variable: err = %v, want one pointing at secrets.allow", err)
	}
	for _, v := range env {
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("error message carries a secret value: %v", err)
		}
	}
}

func TestCandidatesInheritDefaults(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`{"effects": {"evidence_keep_fields": ["id"], "candidates": [
	  {"kind": "document", "root": "/exports"},
	  {"kind": "sql", "sqlite_database": "x.db", "sql_query": "SELECT 1", "evidence_keep_fields": ["id", "name"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Candidates) != 2 {
		t.Fatalf("%d candidates", len(d.Candidates))
	}
	if diff := cmp.Diff([]string{"id"}, d.Candidates[0].Redaction.KeepFields); diff != "" {
		t.Errorf("inherited keep list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"id", "name"}, d.Candidates[1].Redaction.KeepFields); diff != "" {
		t.Errorf("overridden keep list (-want +got):\n%s", diff)
	}
	if d.Candidates[1].Index != 1 || d.Candidates[1].Section["sql_query"] != "SELECT 1" {
		t.Errorf("candidate 1: %+v", d.Candidates[1])
	}
}

// TestReadDeployment: a deployment file is read and parsed; a missing file
// and a refused document are errors naming the file, the refusal kept.
func TestReadDeployment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for p, body := range map[string]string{
		good: "effects:\n  kind: sql\n  sqlite_database: x.db\n  sql_query: SELECT 1\n",
		bad:  "effects: 3\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d, err := ReadDeployment(good)
	if err != nil || len(d.Candidates) != 1 || d.Candidates[0].Kind != "sql" {
		t.Fatalf("good file: %+v, %v", d, err)
	}
	_, err = ReadDeployment(filepath.Join(dir, "absent.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "reading the deployment file: ") {
		t.Errorf("absent file: %v", err)
	}
	_, err = ReadDeployment(bad)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "effects" || !strings.HasPrefix(err.Error(), bad+": effects: ") {
		t.Errorf("refused document: %v", err)
	}
}

// TestOptionParamTemplates: a plugin option may compose literal text with
// run parameters; a template that names none, or has a stray brace, is
// refused at load naming its path.
func TestOptionParamTemplates(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte(`effects:
  kind: acme-claims
  option_params: {claim: {template: "urn:claims|{claim_no}"}, subject: {template: "Patient/{pid}/{claim_no}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := d.Candidates[0].Resolve(map[string]string{"claim_no": "C 9", "pid": "p1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sec map[string]any
	if err := json.Unmarshal(cfg, &sec); err != nil {
		t.Fatal(err)
	}
	opts := sec["options"].(map[string]any)
	if opts["claim"] != "urn:claims|C 9" || opts["subject"] != "Patient/p1/C 9" {
		t.Errorf("options %v, want the templates bound as data", opts)
	}
	if _, _, err := d.Candidates[0].Resolve(map[string]string{"claim_no": "C"}, nil, nil); err == nil || !strings.Contains(err.Error(), `"pid"`) {
		t.Errorf("a template's missing parameter: %v", err)
	}
	if _, _, err := d.Candidates[0].Resolve(map[string]string{"claim_no": "C\n", "pid": "p"}, nil, nil); err == nil || !strings.Contains(err.Error(), "option_params.claim") || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a control character in a template's parameter: %v", err)
	}
	for name, body := range map[string]string{
		"no parameter": `{template: "urn:claims|C-1"}`,
		"unbalanced":   `{template: "urn:claims|{claim_no"}`,
		"stray close":  `{template: "urn:claims|claim_no}"}`,
	} {
		_, err := ParseDeployment([]byte("effects:\n  kind: acme-claims\n  option_params: {claim: " + body + "}\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "effects.option_params.claim.template: ") {
			t.Errorf("%s: err %v, want a refusal at effects.option_params.claim.template", name, err)
		}
	}
}

// The daemon's own keys of a candidate are read by the strict decoder; a
// secret written where its variable's name belongs is never repeated.
func TestParseDeploymentMessages(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ doc, says, never string }{
		"key beside candidates":  {"effects: {candidates: [{kind: sql}], settle: 1}\n", `"settle" is not one of the keys of effects: candidates, evidence_redact_fields`, ""},
		"typo beside candidates": {"effects: {candidates: [{kind: sql}], settle_sec: 1}\n", `did you mean "settle_s"?`, ""},
		"wrong type":             {"effects: {kind: sql, evidence_keep_fields: {a: b}}\n", "must be a list, got a map", ""},
		"secret number":          {"effects: {kind: acme, secret_env: {pin: 123456}}\n", "environment-variable name", "123456"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDeployment([]byte(tc.doc))
			ce, ok := errors.AsType[*refusal.Error](err)
			if !ok || !strings.Contains(ce.Message, tc.says) || (tc.never != "" && strings.Contains(err.Error(), tc.never)) {
				t.Fatalf("refusal %v; want it to say %q and never %q", err, tc.says, tc.never)
			}
		})
	}
}
