package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
)

// TestConfigurerResolveClassifiesByCode: a secret outside secrets.allow is
// the operator's policy, one missing from the environment the platform's,
// told apart by the refusal's code; the path is the slot's in the
// deployment and the message is the deployment's own.
func TestConfigurerResolveClassifiesByCode(t *testing.T) {
	dep, err := config.ParseDeployment([]byte("effects:\n  kind: ldap\n  secret_env: {password: DB_PASSWORD}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name    string
		daemon  *config.Daemon
		set     bool
		reason  string
		outcome string
	}{
		{"no daemon config allows nothing", nil, true, reasonPolicy, OutcomeRejectedPolicy},
		{"outside secrets.allow", &config.Daemon{Secrets: config.SecretsConfig{Allow: []string{"OTHER_*"}}}, true, reasonPolicy, OutcomeRejectedPolicy},
		{"allowed but unset", &config.Daemon{Secrets: config.SecretsConfig{Allow: []string{"DB_*"}}}, false, reasonPlatform, OutcomeFailedPlatform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(env)
			if tc.set {
				env["DB_PASSWORD"] = "s3cret-value"
			}
			_, _, err := newConfigurer(nil, lookup, tc.daemon).resolve(&dep.Candidates[0], nil, candidatePath(dep, 0))
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("resolve: %v, want a *session.Error", err)
			}
			if se.Kind != Refused || se.Reason != tc.reason || refusalOutcome(se) != tc.outcome {
				t.Errorf("kind %d reason %q outcome %q, want Refused, %q, %q", se.Kind, se.Reason, refusalOutcome(se), tc.reason, tc.outcome)
			}
			if se.Path != "deployment.effects.candidates[0].secret_env.password" {
				t.Errorf("path %q", se.Path)
			}
			if se.Code != "" {
				t.Errorf("code %q: the classification code is not a public reason code", se.Code)
			}
		})
	}
	// Allowed and set: the secret reaches the adapter under its slot.
	env["DB_PASSWORD"] = "s3cret-value"
	_, secrets, err := newConfigurer(nil, lookup, &config.Daemon{Secrets: config.SecretsConfig{Allow: []string{"DB_PASSWORD"}}}).resolve(&dep.Candidates[0], nil, "deployment.effects")
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) != 1 || secrets["secret_env.password"] != "s3cret-value" {
		t.Errorf("secrets %v", mapKeys(secrets))
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestResolveReason: only secret_not_allowed is the operator's policy.
func TestResolveReason(t *testing.T) {
	for code, want := range map[string]string{
		config.CodeSecretNotAllowed: reasonPolicy,
		config.CodeSecretUnset:      reasonPlatform,
		"":                          reasonPlatform,
	} {
		if got := resolveReason(code); got != want {
			t.Errorf("resolveReason(%q) = %q, want %q", code, got, want)
		}
	}
}

// TestBeginSecretRefusalOutcome: Begin over a registered deployment whose
// secret does not resolve is refused before anything is read, with the
// terminal outcome its code classifies: REJECTED_POLICY for a variable
// outside secrets.allow, FAILED_PLATFORM for one allowed but unset.
func TestBeginSecretRefusalOutcome(t *testing.T) {
	tab := &table{}
	a := &memAdapter{kind: "secret-outcome", tier: 1, table: tab}
	m := signedManager(t, a)
	depPath := filepath.Join(t.TempDir(), "deployment.yaml")
	must(t, os.WriteFile(depPath, []byte("effects:\n  kind: secret-outcome\n  secret_env: {token: SOR_TOKEN}\n"), 0o600))
	effects := []byte(`[{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "timeout_s": 0}]`)
	for _, tc := range []struct {
		name    string
		allow   []string
		outcome string
	}{
		{"outside secrets.allow", []string{"OTHER_*"}, OutcomeRejectedPolicy},
		{"allowed but unset", []string{"SOR_*"}, OutcomeFailedPlatform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.daemon = &config.Daemon{Deployments: map[string]string{"sor": depPath}, Secrets: config.SecretsConfig{Allow: tc.allow}, Policy: callerContracts(nil)}
			m.lookupEnv = func(string) (string, bool) { return "", false }
			_, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "sor", Effects: effects})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("Begin: %v, want a refusal", err)
			}
			if se.Kind != Refused || se.TerminalOutcome != tc.outcome || se.Path != "deployment.effects.candidates[0].secret_env.token" || len(se.Receipt) == 0 {
				t.Errorf("refusal %+v, want Refused at the slot with %s and a receipt", se, tc.outcome)
			}
			if !strings.Contains(se.Message, "SOR_TOKEN") {
				t.Errorf("message %q does not name the variable", se.Message)
			}
		})
	}
}
