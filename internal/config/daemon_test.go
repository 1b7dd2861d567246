package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func writeDaemon(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDaemonPolicyAndWorkflows(t *testing.T) {
	t.Parallel()
	p := writeDaemon(t, `deployments: {clinic: deployment.yaml}
workflows: {triage: flows/triage.yaml, abs: /srv/w.yaml}
policy:
  require_registered_contracts: true
  subject_params: [patient_id]
  min_tier: 2
`)
	d, err := LoadDaemon(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(p)
	if diff := cmp.Diff(map[string]string{"triage": filepath.Join(dir, "flows", "triage.yaml"), "abs": "/srv/w.yaml"}, d.Workflows); diff != "" {
		t.Errorf("workflows (-want +got):\n%s", diff)
	}
	got := workflow.Resolve(d.Policy)
	want := workflow.Effective{RequireRegisteredContracts: true, RequireChangeClaim: true, SubjectParams: []string{"patient_id"}, MinTier: 2, RequireProvenNewness: true, RunMinTier: 2, RunMinRung: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}

func TestLoadDaemonPolicyRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ body, want string }{
		"min_tier":    {"policy: {min_tier: 0}\n", "policy.min_tier"},
		"min_settle":  {"policy: {min_settle_s: -1}\n", "policy.min_settle_s"},
		"settle text": {"policy: {min_settle_s: soon}\n", "policy.min_settle_s"},
		"unknown key": {"policy: {require_everything: true}\n", "policy.require_everything"},
		"not bool":    {"policy: {require_change_claim: maybe}\n", "policy.require_change_claim"},
		"newness":     {"policy: {require_proven_newness: yes please}\n", "policy.require_proven_newness"},
		"empty path":  {"workflows: {triage: ''}\n", "workflows.triage"},
		"top key":     {"deployment: {a: b.yaml}\n", `deployment: unknown key; "deployment" is not one of: plugins, secrets, api, deployments, workflows, rewards, rewards_trust, policy (did you mean "deployments"?)`},
		"nested key":  {"api: {bearer_token: X}\n", `api.bearer_token: unknown key; "bearer_token" is not one of the keys of api: bearer_token_env,`},
		"plugin key":  {"plugins: {acme: {sha265: x}}\n", `plugins.acme.sha265: unknown key`},
		"not a list":  {"rewards_trust: abc\n", "rewards_trust: must be a list, got a string"},
		"not text":    {"deployments: {clinic: 5}\n", `deployments.clinic: must be a string, got 5; write it in quotes if it is text`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadDaemon(writeDaemon(t, tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// TestDeploymentPolicyLayers: a registered deployment's policy overrides the
// daemon's, and a workflow's overrides both; min_settle_s is a floor, so
// the largest of the three applies whichever layer sets it.
func TestDeploymentPolicyLayers(t *testing.T) {
	t.Parallel()
	dep, err := ParseDeployment([]byte("policy: {require_change_claim: false, min_tier: 1, require_proven_newness: false, min_settle_s: 2.5}\neffects: {kind: sql, sqlite_database: x.db, sql_query: SELECT 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := LoadDaemon(writeDaemon(t, "policy: {subject_params: [p], min_tier: 3, min_settle_s: 1, require_registered_contracts: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.Parse([]byte("schema: verifierd.workflow/v1\nname: w\npolicy: {min_tier: 2, min_settle_s: 0}\nsteps: [{step: s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := workflow.Resolve(daemon.Policy, dep.Policy, wf.Policy)
	want := workflow.Effective{RequireChangeClaim: false, SubjectParams: []string{"p"}, MinTier: 2, RequireProvenNewness: false, MinSettleS: 2.5, RunMinTier: 2, RunMinRung: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effective (-want +got):\n%s", diff)
	}
	// With no policy anywhere, caller-sent effects are refused.
	if def := workflow.Resolve(); !def.RequireRegisteredContracts || def.MinSettleS != 0 {
		t.Errorf("defaults %+v, want require_registered_contracts on and no settle floor", def)
	}
	if _, err := ParseDeployment([]byte("policy: {min_tier: 9}\neffects: {kind: sql}\n")); err == nil || !strings.Contains(err.Error(), "policy.min_tier") {
		t.Errorf("bad deployment policy: %v", err)
	}
}

// TestLoadDaemonFileErrors: a daemon config that cannot be read, parsed or
// decoded is an error naming the file (the last with the key's path).
func TestLoadDaemonFileErrors(t *testing.T) {
	t.Parallel()
	if _, err := LoadDaemon(filepath.Join(t.TempDir(), "absent.yaml")); err == nil || !strings.HasPrefix(err.Error(), "reading the daemon config: ") {
		t.Errorf("absent file: %v", err)
	}
	p := writeDaemon(t, "deployments: [\n")
	if _, err := LoadDaemon(p); err == nil || !strings.HasPrefix(err.Error(), p+": cannot parse: ") {
		t.Errorf("a document that does not parse: %v", err)
	}
	p = writeDaemon(t, "deploymnts: {}\n")
	_, err := LoadDaemon(p)
	if ce, ok := errors.AsType[*refusal.Error](err); !ok || ce.Path != "deploymnts" || !strings.HasPrefix(err.Error(), p+": deploymnts: unknown key") {
		t.Errorf("an unknown key: %v", err)
	}
}
