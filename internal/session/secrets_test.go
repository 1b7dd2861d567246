package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

const echoedToken = "tok-3f9a1c77e2b04d5a"

// echoAdapter lists records that carry the credential it was configured
// with, as a system of record that echoes the request's Authorization
// header does; failAfter makes the after read a refusal quoting it.
type echoAdapter struct {
	*memAdapter
	failAfter bool
}

func (a echoAdapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	if a.failAfter {
		return sdk.Unreachable("401: the token Bearer " + echoedToken + " was revoked"), nil
	}
	return a.memAdapter.CaptureAfter(ctx, req)
}

// runEcho runs one session over a deployment whose candidate names
// ECHO_TOKEN; env holds the daemon's environment. It returns the Verify
// result, every response and stored byte, and the log.
func runEcho(t *testing.T, kind string, failAfter bool, env map[string]string) (*Result, []byte, string) {
	t.Helper()
	tab := &table{}
	auth := "Bearer " + echoedToken
	tab.add(sdk.Record{"id": json.Number("1"), "patient_id": "p0", "auth": auth, "type": "Triage"})
	a := echoAdapter{memAdapter: &memAdapter{kind: kind, tier: 1, table: tab}, failAfter: failAfter}
	m, dbPath, logs := evidenceManager(t, bytes.Repeat([]byte{7}, EvidenceKeySize), a)
	depPath := filepath.Join(t.TempDir(), "deployment.yaml")
	must(t, os.WriteFile(depPath, []byte("effects:\n  kind: "+kind+"\n  newness: whole_read\n  secret_env: {token: ECHO_TOKEN}\n"), 0o600))
	m.daemon = &config.Daemon{Deployments: map[string]string{"echo": depPath}, Secrets: config.SecretsConfig{Allow: []string{"ECHO_*"}}, Policy: callerContracts(nil)}
	m.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	// No identity field: newness and loss compare whole records, so a
	// baseline judged with a placeholder instead of the value would show
	// the pre-existing record as lost.
	effects := `[{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "identity_field": "", "timeout_s": 0},
	             {"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "auth", "value": "Bearer nothing", "timeout_s": 0}]`
	res, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "echo", Effects: []byte(effects)})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("2"), "patient_id": "p1", "auth": auth, "type": "Triage"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(t.Context(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal([]any{res, v, got})
	raw, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	return v, append(shown, raw...), logs.String()
}

// A configured secret found inside a read record is "[redacted]" in every
// response, stored byte and log line, and the verdicts are the ones the
// same run gives when the configured secret is another value (the judge sees the
// values as read; the stored baseline's placeholder is restored).
func TestSecretInRecordsMasked(t *testing.T) {
	t.Parallel()
	for _, failAfter := range []bool{false, true} {
		name := map[bool]string{false: "read", true: "refusal quoting it"}[failAfter]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kind := map[bool]string{false: "echo-test-a", true: "echo-test-b"}[failAfter]
			plain, plainBytes, _ := runEcho(t, kind, failAfter, map[string]string{"ECHO_TOKEN": "another-credential"})
			masked, kept, logs := runEcho(t, kind, failAfter, map[string]string{"ECHO_TOKEN": echoedToken})
			type core struct {
				Verdict judge.Decision
				Result  judge.Class
				Codes   []string
			}
			coreOf := func(r *Result) []core {
				var out []core
				for _, e := range r.Effects {
					c := core{Verdict: e.Verdict, Result: e.Result}
					for _, rs := range e.Reasons {
						c.Codes = append(c.Codes, rs.Code)
					}
					out = append(out, c)
				}
				return out
			}
			if d := cmp.Diff(coreOf(plain), coreOf(masked)); d != "" {
				t.Errorf("masking changed the verdicts (-plain +masked):\n%s", d)
			}
			want := []judge.Decision{judge.Confirmed, judge.Refuted}
			if failAfter {
				want = []judge.Decision{judge.Indeterminate, judge.Indeterminate}
			}
			for i, w := range want {
				if masked.Effects[i].Verdict != w {
					t.Errorf("effect %d: %s, want %s (%+v)", i, masked.Effects[i].Verdict, w, masked.Effects[i].Reasons)
				}
			}
			// The test can fail: with another secret configured the value
			// is there.
			if !bytes.Contains(plainBytes, []byte(echoedToken)) {
				t.Fatal("the run without the secret never showed it; the test proves nothing")
			}
			if bytes.Contains(kept, []byte(echoedToken)) {
				t.Errorf("the secret is in a response or a stored byte")
			}
			if strings.Contains(logs, echoedToken) {
				t.Errorf("the secret is in the log:\n%s", logs)
			}
			if !bytes.Contains(kept, []byte(SecretMarker)) {
				t.Errorf("no %s marker shown", SecretMarker)
			}
			if !failAfter {
				if ov := masked.Effects[1].ObservedValue; ov == nil || *ov != "Bearer "+SecretMarker {
					t.Errorf("observed_value %v, want %q", ov, "Bearer "+SecretMarker)
				}
			}
		})
	}
}

// The mask's own rules: the longest secret first, keys and numbers too,
// and a stored placeholder restored to the slot's current value.
func TestSecretMask(t *testing.T) {
	t.Parallel()
	s := secretMask{secrets: []secret{{"a", "abc"}, {"b", "abcdef"}, {"n", "12345"}}}
	s.sort()
	if got := s.text("x abcdef y abc"); got != "x [redacted] y [redacted]" {
		t.Errorf("text: %q", got)
	}
	rec := judge.Record{"abc": "1", "n": json.Number("123456"), "list": []any{"abcdef"}}
	got := s.record(rec)
	if got["[redacted]"] != "1" || got["n"] != "[redacted]6" || got["list"].([]any)[0] != "[redacted]" || rec["abc"] != "1" {
		t.Errorf("record: %v (input %v)", got, rec)
	}
	stored, err := s.storeRaw([]byte(`{"id":1,"h":"Bearer abcdef","q":"x\"abc"}`))
	if err != nil || bytes.Contains(stored, []byte("abc")) || !bytes.Contains(stored, []byte("[redacted:b]")) {
		t.Fatalf("storeRaw: %s %v", stored, err)
	}
	back, err := decodeRecord(s.restoreRaw(stored))
	if err != nil || back["h"] != "Bearer abcdef" || back["q"] != `x"abc` {
		t.Errorf("restoreRaw: %v %v", back, err)
	}
	// Nothing to mask: the bytes as they came, escapes and key order kept.
	kept := []byte(`{"z":"a\\b","a":1}`)
	if got, err := s.storeRaw(kept); err != nil || !bytes.Equal(got, kept) {
		t.Errorf("storeRaw changed a record without a secret: %s %v", got, err)
	}
	// A record that does not decode keeps no secret either.
	if got, err := s.storeRaw([]byte(`{"h":"abcdef","h":"x"}`)); err != nil || bytes.Contains(got, []byte("abc")) {
		t.Errorf("storeRaw of an undecodable record: %s %v", got, err)
	}
	if got := s.restoreText("Bearer [redacted:b] [redacted:gone]"); got != "Bearer abcdef [redacted:gone]" {
		t.Errorf("restoreText: %q", got)
	}
	if plain := []byte(`{"id":1}`); !bytes.Equal(s.restoreRaw(plain), plain) {
		t.Error("a record without a placeholder changed")
	}
}

// refusingAdapter's preflight quotes the credential the server refused.
type refusingAdapter struct{ *memAdapter }

func (a refusingAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Message: "401: token " + echoedToken + " refused", Warnings: []string{"sent " + echoedToken + " in clear"}}, nil
}

// Preflight's message and warnings never carry the candidate's secret.
func TestPreflightMasksSecrets(t *testing.T) {
	t.Parallel()
	a := refusingAdapter{&memAdapter{kind: "refusing-test", tier: 1, table: &table{}}}
	m := newManager(t, a)
	depPath := filepath.Join(t.TempDir(), "deployment.yaml")
	must(t, os.WriteFile(depPath, []byte("effects:\n  kind: refusing-test\n  newness: whole_read\n  secret_env: {token: ECHO_TOKEN}\n"), 0o600))
	m.daemon = &config.Daemon{Deployments: map[string]string{"echo": depPath}, Secrets: config.SecretsConfig{Allow: []string{"ECHO_*"}}, Policy: callerContracts(nil)}
	m.lookupEnv = func(k string) (string, bool) { return echoedToken, k == "ECHO_TOKEN" }
	checks, err := m.TestConnection(context.Background(), nil, "echo", nil)
	if err != nil || len(checks) != 1 {
		t.Fatalf("preflight: %v %v", checks, err)
	}
	c := checks[0]
	if c.Message != "401: token [redacted] refused" || len(c.Warnings) != 1 || c.Warnings[0] != "sent [redacted] in clear" {
		t.Errorf("preflight shows %q %q", c.Message, c.Warnings)
	}
}

// TestPreflightParts: the preflight is made of its parts, without a
// Manager. It refuses an inline deployment without the development switch,
// and with a registered one it masks the secret its environment resolves.
func TestPreflightParts(t *testing.T) {
	t.Parallel()
	a := refusingAdapter{&memAdapter{kind: "refusing-parts-test", tier: 1, table: &table{}}}
	host, err := pluginhost.New(pluginhost.Options{})
	must(t, err)
	host.RegisterInProcess(a.kind, func() sdk.Adapter { return a })
	t.Cleanup(func() { host.Close() })
	depPath := filepath.Join(t.TempDir(), "deployment.yaml")
	must(t, os.WriteFile(depPath, []byte("effects:\n  kind: refusing-parts-test\n  newness: whole_read\n  secret_env: {token: ECHO_TOKEN}\n"), 0o600))
	daemon := &config.Daemon{Deployments: map[string]string{"echo": depPath}, Secrets: config.SecretsConfig{Allow: []string{"ECHO_*"}}}
	env := func(k string) (string, bool) { return echoedToken, k == "ECHO_TOKEN" }
	p := newPreflight(deployments{daemon: daemon, logger: hclog.NewNullLogger()}, newConfigurer(host, env, daemon), env)

	_, err = p.test(t.Context(), []byte("effects: {kind: refusing-parts-test, newness: whole_read}\n"), "", nil)
	if se, ok := errors.AsType[*Error](err); !ok || se.Code != CodeInlineDeploymentRefused {
		t.Fatalf("an inline deployment without the switch: %v, want %s", err, CodeInlineDeploymentRefused)
	}
	checks, err := p.test(t.Context(), nil, "echo", nil)
	if err != nil || len(checks) != 1 {
		t.Fatalf("preflight: %v %v", checks, err)
	}
	if c := checks[0]; c.Reachable || c.Tier != 1 || c.Message != "401: token [redacted] refused" || len(c.Warnings) != 1 || c.Warnings[0] != "sent [redacted] in clear" {
		t.Errorf("preflight shows %+v", c)
	}
}
