package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
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
	s := newSecretMask([]secret{{"a", "abcdefgh"}, {"b", "abcdefghijkl"}, {"n", "1234567890"}})
	if got := s.text("x abcdefghijkl y abcdefgh"); got != "x [redacted] y [redacted]" {
		t.Errorf("text: %q", got)
	}
	rec := judge.Record{"abcdefgh": "1", "n": json.Number("12345678901"), "list": []any{"abcdefghijkl"}}
	got := s.record(rec)
	if got["[redacted]"] != "1" || got["n"] != "[redacted]1" || got["list"].([]any)[0] != "[redacted]" || rec["abcdefgh"] != "1" {
		t.Errorf("record: %v (input %v)", got, rec)
	}
	stored, err := s.storeRaw([]byte(`{"id":1,"h":"Bearer abcdefghijkl","q":"x\"abcdefgh"}`))
	if err != nil || bytes.Contains(stored, []byte("abcdefgh")) || !bytes.Contains(stored, []byte("[redacted:b]")) {
		t.Fatalf("storeRaw: %s %v", stored, err)
	}
	back, err := decodeRecord(s.restoreRaw(stored))
	if err != nil || back["h"] != "Bearer abcdefghijkl" || back["q"] != `x"abcdefgh` {
		t.Errorf("restoreRaw: %v %v", back, err)
	}
	// Nothing to mask: the bytes as they came, escapes and key order kept.
	kept := []byte(`{"z":"a\\b","a":1}`)
	if got, err := s.storeRaw(kept); err != nil || !bytes.Equal(got, kept) {
		t.Errorf("storeRaw changed a record without a secret: %s %v", got, err)
	}
	// A record that does not decode keeps no secret either.
	if got, err := s.storeRaw([]byte(`{"h":"abcdefghijkl","h":"x"}`)); err != nil || bytes.Contains(got, []byte("abcdefgh")) {
		t.Errorf("storeRaw of an undecodable record: %s %v", got, err)
	}
	if got := s.restoreText("Bearer [redacted:b] [redacted:gone]"); got != "Bearer abcdefghijkl [redacted:gone]" {
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

// Every form of a secret is masked, in text and in a stored record, and a
// stored placeholder is restored to the form as found (a mix of cases
// excepted: such a baseline record is refused). Found inside other text, each form
// becomes one marker.
func TestSecretForms(t *testing.T) {
	t.Parallel()
	const token, pair = "Tok+en/x=y&z~1", "alice:Pa55+w/rd=ok"
	b64 := func(e *base64.Encoding, s string) string { return e.EncodeToString([]byte(s)) }
	s := newSecretMask([]secret{{"auth.value_env", token}, {"auth.basic_env", pair}})
	forms := map[string]string{
		"value":                    token,
		"lower":                    strings.ToLower(token),
		"upper":                    strings.ToUpper(token),
		"mixed case":               "tOk+EN/x=y&z~1",
		"base64":                   b64(base64.StdEncoding, token),
		"base64 unpadded":          b64(base64.RawStdEncoding, token),
		"base64url":                b64(base64.URLEncoding, token),
		"base64url unpadded":       b64(base64.RawURLEncoding, token),
		"query-escaped":            url.QueryEscape(token),
		"path-escaped":             url.PathEscape(token),
		"basic pair":               pair,
		"basic header base64":      b64(base64.StdEncoding, pair),
		"basic base64url":          b64(base64.RawURLEncoding, pair),
		"basic password":           "Pa55+w/rd=ok",
		"basic password escaped":   url.QueryEscape("Pa55+w/rd=ok"),
		"basic pair query-escaped": url.QueryEscape(pair),
	}
	for name, form := range forms {
		if got := s.text("Basic " + form + " end"); got != "Basic [redacted] end" {
			t.Errorf("%s: text %q", name, got)
		}
		rec, _ := json.Marshal(map[string]any{"h": "Basic " + form})
		stored, err := s.storeRaw(rec)
		if name == "mixed case" {
			// It could not be put back: the baseline is refused, naming the
			// slot, never the value.
			if _, ok := errors.AsType[*unrestorableError](err); !ok || stored != nil || !strings.Contains(err.Error(), "auth.value_env") || strings.Contains(err.Error(), form) {
				t.Errorf("%s: stored %s %v, want an *unrestorableError", name, stored, err)
			}
			continue
		}
		if err != nil || bytes.Contains(bytes.ToLower(stored), []byte(strings.ToLower(form))) {
			t.Errorf("%s: stored %s %v", name, stored, err)
			continue
		}
		back, err := decodeRecord(s.restoreRaw(stored))
		if want := "Basic " + form; err != nil || back["h"] != want {
			t.Errorf("%s: stored %s, restored %v %v, want %q", name, stored, back, err, want)
		}
	}
}

// A marker is never masked again, whatever the secret: a secret that is
// the word of the marker leaves one marker, and a marker or placeholder
// already in the text stays as it is.
func TestSecretMarkerNotRemasked(t *testing.T) {
	t.Parallel()
	s := newSecretMask([]secret{{"a", "redacted"}, {"b", "REDACTED:x"}})
	for in, want := range map[string]string{
		"redacted":                 "[redacted]",
		"a redacted b":             "a [redacted] b",
		"[redacted]":               "[redacted]",
		"[redacted:b] redacted":    "[redacted:b] [redacted]",
		"[redacted] x [redacted]!": "[redacted] x [redacted]!",
	} {
		if got := s.text(in); got != want {
			t.Errorf("text(%q) = %q, want %q", in, got, want)
		}
	}
	if got := s.text(s.text("redacted")); got != "[redacted]" {
		t.Errorf("masked twice: %q", got)
	}
}

// BenchmarkSecretMaskText: the hot path, masking one record's string
// values with three secrets configured (each in all its forms); most
// values hold no secret.
func BenchmarkSecretMaskText(b *testing.B) {
	s := newSecretMask([]secret{{"auth.basic_env", "svc-reader:Pa55w0rd-2026"}, {"auth.bearer_env", "tok-3f9a1c77e2b04d5a"}, {"secret_env.key", "k3y+with/special=chars"}})
	clean := "Triage encounter for patient PAT-0042, created by the intake workflow at 2026-12-07T17:30:21Z"
	echoed := "audit: Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("svc-reader:Pa55w0rd-2026")) + " from 10.0.0.7"
	for _, c := range []struct{ name, text string }{{"clean", clean}, {"echoed", echoed}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = s.text(c.text)
			}
		})
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			_ = newSecretMask(s.secrets)
		}
	})
}
