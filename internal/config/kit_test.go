package config

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// TestKitResolvesAsTheDaemon: the qualification kit's ConfigureRequest
// (adaptertest.Deployment) is the one the daemon builds from the same
// deployment and environment: same section, same secret slots.
func TestKitResolvesAsTheDaemon(t *testing.T) {
	t.Parallel()
	const doc = `
effects:
  evidence_redact_fields: [mail]
  candidates:
    - kind: ldap
      options: {base_dn: "dc=example,dc=org", limit: 50}
      option_params: {uid: {param: user}, ou: {template: "ou={dept}"}}
      secret_env: {password: LDAP_PW}
      tls: {ca_env: LDAP_CA, verify: true}
      freshness_field: modifyTimestamp
      freshness_window_s: 300
      settle_s: 1.5
`
	env := map[string]string{"LDAP_PW": "pw-1-long", "LDAP_CA": "ca-2-long"}
	params := map[string]string{"user": "*)(uid=*", "dept": "ops"}

	d, err := ParseDeployment([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, secrets, err := d.Candidates[0].Resolve(params, func(n string) (string, bool) { v, ok := env[n]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := adaptertest.Deployment{YAML: doc, Env: env}.Request(t, params)
	var daemon, kit map[string]any
	if err := json.Unmarshal(cfg, &daemon); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(req.Config, &kit); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(daemon, kit); diff != "" {
		t.Errorf("section (-daemon +kit):\n%s", diff)
	}
	if diff := cmp.Diff(secrets, req.Secrets); diff != "" {
		t.Errorf("secrets (-daemon +kit):\n%s", diff)
	}
	if req.Kind != d.Candidates[0].Kind {
		t.Errorf("kind %q, daemon %q", req.Kind, d.Candidates[0].Kind)
	}
	if _, ok := req.Secret("tls.ca_env"); !ok {
		t.Error("the tls.ca_env slot is missing")
	}
	if pw, _ := req.Secret("password"); pw != "pw-1-long" {
		t.Errorf("Secret(password) = %q", pw)
	}
}
