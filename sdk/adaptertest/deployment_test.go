package adaptertest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestDeploymentResolves: the kit's ConfigureRequest is the daemon's: the
// candidate's own keys with numbers as the daemon reads them, options with option_params
// bound, the secret under its slot, the daemon's keys gone.
func TestDeploymentResolves(t *testing.T) {
	t.Parallel()
	d := adaptertest.Deployment{
		YAML: `
effects:
  freshness_field: ts
  freshness_window_s: 60
  candidates:
    - {kind: sql, sql_query: "SELECT 1", sql_dsn_env: DB_DSN}
    - kind: ldap
      page_size: 1.50
      options: {base_dn: "dc=example,dc=org"}
      option_params: {uid: {template: "u-{user}"}}
      secret_env: {password: LDAP_PW}
      settle_s: 2
`,
		Candidate: 1,
		Env:       map[string]string{"LDAP_PW": "pw-long-1"},
	}
	req := d.Request(t, map[string]string{"user": "jdoe"})
	var got map[string]any
	dec := json.NewDecoder(bytes.NewReader(req.Config))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	opts, _ := got["options"].(map[string]any)
	if req.Kind != "ldap" || got["page_size"] != json.Number("1.5") || opts["uid"] != "u-jdoe" || len(got) != 3 {
		t.Errorf("Config = %s; want kind, page_size in the daemon's canonical text (1.5) and options with uid bound", req.Config)
	}
	if pw, ok := req.Secret("password"); !ok || pw != "pw-long-1" {
		t.Errorf("Secret(password) = %q, %v", pw, ok)
	}

	_, err := d.Resolve(nil)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "candidates[1].option_params" {
		t.Errorf("Resolve without the run parameter = %v; want the daemon's refusal at candidates[1].option_params", err)
	}
	d.Env = nil
	_, err = d.Resolve(map[string]string{"user": "jdoe"})
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "candidates[1].secret_env.password" {
		t.Errorf("Resolve without the variable = %v; want a refusal at candidates[1].secret_env.password", err)
	}
	d.Candidate = 2
	if _, err := d.Resolve(nil); err == nil {
		t.Error("a candidate index past the list resolved")
	}
}
