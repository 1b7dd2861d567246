package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

func TestLoadEvidenceKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := LoadEvidenceKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != EvidenceKeySize || bytes.Equal(key, make([]byte, EvidenceKeySize)) {
		t.Fatalf("key of %d bytes: %x", len(key), key)
	}
	path := EvidenceKeyPath(dir)
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, st.Mode().Perm(), want)
		}
	}
	again, err := LoadEvidenceKey(dir)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("second start: %x, %v; want the same key", again, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".evidence-hmac-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	refused := map[string]struct {
		setup func(t *testing.T, dir string)
		want  string
	}{
		"file readable by others": {func(t *testing.T, dir string) {
			mustKey(t, dir)
			if err := os.Chmod(EvidenceKeyPath(dir), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "chmod 600"},
		"folder readable by others": {func(t *testing.T, dir string) {
			mustKey(t, dir)
			if err := os.Chmod(filepath.Dir(EvidenceKeyPath(dir)), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "chmod 700"},
		"wrong length": {func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Dir(EvidenceKeyPath(dir)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(EvidenceKeyPath(dir), []byte("short"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "holds 5 bytes"},
		"a symlink": {func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Dir(EvidenceKeyPath(dir)), 0o700); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, "elsewhere")
			if err := os.WriteFile(target, make([]byte, EvidenceKeySize), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, EvidenceKeyPath(dir)); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.setup(t, dir)
			key, err := LoadEvidenceKey(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadEvidenceKey = %x, %v; want a refusal saying %q", key, err, tc.want)
			}
			if strings.Contains(err.Error(), "%!") {
				t.Errorf("badly formatted: %v", err)
			}
		})
	}
}

func mustKey(t *testing.T, dir string) {
	t.Helper()
	if _, err := LoadEvidenceKey(dir); err != nil {
		t.Fatal(err)
	}
}

// leakyAdapter puts a record value into every text it can send: an
// unreachable after read's reason and its Verdict-hook message. No shipped
// adapter is known to do this; the daemon must mask it anyway.
type leakyAdapter struct {
	*memAdapter
	failAfter bool
	demote    bool
}

func (a leakyAdapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	if a.failAfter {
		return sdk.Unreachable("row 1 with ssn 123-45-6789 is locked"), nil
	}
	return a.memAdapter.CaptureAfter(ctx, req)
}

func (a leakyAdapter) Verdict(_ context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	if !a.demote {
		return sdk.Demotion{}, nil
	}
	return sdk.Demotion{Verdict: sdk.VerdictIndeterminate, ReasonCode: "PAGE_CACHED", Message: "the page still shows ssn 123-45-6789 and note Reviewed by Dr Who"}, nil
}

// evidenceManager is newManager with the store folder and the log exposed.
func evidenceManager(t *testing.T, key []byte, adapters ...sdk.Adapter) (*Manager, string, *syncBuffer) {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range adapters {
		host.RegisterInProcess(a.Info().Kind, func() sdk.Adapter { return a })
	}
	dir := t.TempDir()
	st, err := bolt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); st.Close() })
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	return mustNew(t, Options{Host: host, Store: st, Daemon: &config.Daemon{Policy: callerContracts(nil)}, PollInterval: 5 * time.Millisecond, AllowInline: true,
		Logger: logger, EvidenceKey: key}), filepath.Join(dir, "verifierd.db"), logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	secretSSN  = "123-45-6789"
	secretNote = "Reviewed by Dr Who"
)

// runEvidence begins a session over rows, applies write, verifies, and
// returns the result with every byte the daemon kept or said.
func runEvidence(t *testing.T, a sdk.Adapter, tab *table, redact string, write func()) (*Result, []byte, string) {
	t.Helper()
	m, dbPath, logs := evidenceManager(t, bytes.Repeat([]byte{7}, EvidenceKeySize), a)
	dep := "effects:\n  kind: " + a.Info().Kind + "\n  newness: whole_read\n" + redact
	effects := `[{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0},
	             {"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "type", "value": "Triage", "risk": "irreversible", "timeout_s": 0}]`
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte(dep), Effects: []byte(effects)})
	if err != nil {
		t.Fatal(err)
	}
	write()
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

// Under a redaction policy no response, log line or stored byte holds a
// hidden value, and the verdict is the one the same run gives without it.
func TestEvidenceHidesRedactedValues(t *testing.T) {
	t.Parallel()
	const deny = "  evidence_redact_fields: [ssn, note, id]\n"
	tests := map[string]struct {
		failAfter, demote bool
		verdicts          []judge.Decision
	}{
		"double submit":          {verdicts: []judge.Decision{judge.Refuted, judge.Refuted}},
		"after read fails":       {failAfter: true, verdicts: []judge.Decision{judge.Indeterminate, judge.Indeterminate}},
		"hook demotes":           {demote: true, verdicts: []judge.Decision{judge.Indeterminate, judge.Indeterminate}},
		"hook demotes confirmed": {demote: true, verdicts: []judge.Decision{judge.Indeterminate, judge.Indeterminate}},
	}
	i := 0
	for name, tc := range tests {
		i++
		kind := "leaky-test-" + string(rune('a'+i))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := func(redact string) (*Result, []byte, string) {
				tab := &table{}
				tab.add(sdk.Record{"id": json.Number("1"), "patient_id": "p0", "ssn": secretSSN, "note": secretNote, "type": "Triage"})
				a := leakyAdapter{memAdapter: &memAdapter{kind: kind, tier: 1, table: tab}, failAfter: tc.failAfter, demote: tc.demote}
				return runEvidence(t, a, tab, redact, func() {
					tab.add(sdk.Record{"id": json.Number("2"), "patient_id": "p1", "ssn": secretSSN, "note": secretNote, "type": "Triage"})
					if name != "hook demotes confirmed" {
						tab.add(sdk.Record{"id": json.Number("3"), "patient_id": "p1", "ssn": secretSSN, "note": secretNote, "type": "Triage"})
					}
				})
			}
			plain, plainBytes, _ := run("")
			hidden, kept, logs := run(deny)
			for i, want := range tc.verdicts {
				if got := hidden.Effects[i].Verdict; got != want {
					t.Errorf("effect %d: %s, want %s (%+v)", i, got, want, hidden.Effects[i].Reasons)
				}
			}
			// The same verdict, class, counts and codes as without redaction.
			type core struct {
				Verdict            judge.Decision
				Result             judge.Class
				Codes              []string
				Observed, Expected *int
				Task               string
			}
			coreOf := func(r *Result) []core {
				var out []core
				for _, e := range r.Effects {
					c := core{Verdict: e.Verdict, Result: e.Result, Observed: e.ObservedCount, Expected: e.ExpectedCount}
					for _, rs := range e.Reasons {
						c.Codes = append(c.Codes, rs.Code)
					}
					if e.ReconciliationTask != nil {
						c.Task = e.ReconciliationTask.Kind + "/" + e.ReconciliationTask.SuggestedAction
					}
					out = append(out, c)
				}
				return out
			}
			if d := cmp.Diff(coreOf(plain), coreOf(hidden)); d != "" {
				t.Errorf("redaction changed the verdict (-plain +redacted):\n%s", d)
			}
			if hidden.Outcome != plain.Outcome {
				t.Errorf("outcome %s, without redaction %s", hidden.Outcome, plain.Outcome)
			}
			// The test can fail: without redaction the values are there.
			if !bytes.Contains(plainBytes, []byte(secretSSN)) {
				t.Fatalf("the unredacted run never showed the ssn; the test proves nothing")
			}
			unkeyed := judge.RecordDigest(judge.Record{"id": json.Number("2"), "patient_id": "p1", "ssn": secretSSN, "note": secretNote, "type": "Triage"})
			for _, s := range []string{secretSSN, secretNote, strings.TrimPrefix(unkeyed, "sha256:")} {
				if bytes.Contains(kept, []byte(s)) {
					t.Errorf("%q is in a response or a stored byte", s)
				}
				if strings.Contains(logs, s) {
					t.Errorf("%q is in the log:\n%s", s, logs)
				}
			}
			if task := hidden.Effects[0].ReconciliationTask; task == nil {
				t.Errorf("no reconciliation task")
			} else {
				for _, d := range task.Evidence.RecordDigests {
					if !strings.HasPrefix(d, judge.KeyedPrefix) {
						t.Errorf("task digest %s is not keyed", d)
					}
				}
			}
		})
	}
}

// A baseline keyed with one key is never judged with another: the
// contracts that need it are INDETERMINATE.
func TestKeyedBaselineOtherKey(t *testing.T) {
	t.Parallel()
	tab := &table{}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "0", "ssn": secretSSN})
	m, _, _ := evidenceManager(t, bytes.Repeat([]byte{1}, EvidenceKeySize), &memAdapter{kind: "rekey-test", tier: 1, table: tab})
	dep := "effects: {kind: rekey-test, evidence_redact_fields: [ssn], newness: whole_read}\n"
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte(dep), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("2"), "p": "1", "ssn": secretSSN})
	other := mustNew(t, Options{Host: m.host, Store: m.store, Daemon: m.daemon, PollInterval: m.pollInterval, AllowInline: true, EvidenceKey: bytes.Repeat([]byte{2}, EvidenceKeySize)})
	v, err := other.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if e := v.Effects[0]; e.Verdict != judge.Indeterminate || e.Reasons[0].Code != judge.ReasonBaselineUnreachable || !strings.Contains(e.Reasons[0].Message, "another evidence key") {
		t.Errorf("verified with another key: %s %+v, want INDETERMINATE BASELINE_UNREACHABLE", e.Verdict, e.Reasons)
	}
}

// A failed compensation's error quotes the DELETE target, and so an
// identity: the log line masks it when the identity field is redacted.
func TestCompensationFailureLogRedacted(t *testing.T) {
	t.Parallel()
	tab := &table{}
	srv, _ := deleteServer(t, tab, 1)
	m, _, logs := evidenceManager(t, bytes.Repeat([]byte{3}, EvidenceKeySize), &memAdapter{kind: "comp-evidence-test", tier: 1, table: tab})
	dep := "effects:\n  kind: comp-evidence-test\n  newness: whole_read\n  evidence_redact_fields: [id]\n  compensator: {kind: rest_delete, base_url: '" + srv.URL + "', delete_path: '/rows/{id}'}\n"
	const effects = `[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0}]`
	// A compensator is the operator's: only a registered deployment has one.
	m.daemon.Deployments = map[string]string{"comp": writeDeployment(t, dep)}
	res, err := m.Begin(context.Background(), BeginRequest{DeploymentName: "comp", Effects: []byte(effects)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"730301", "730302", "730303"} {
		tab.add(sdk.Record{"id": json.Number(id), "p": "1"})
	}
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	task := v.Effects[0].ReconciliationTask
	if task == nil || task.Kind != judge.TaskCompensationFailed || len(task.Evidence.DeletedDigests) != 1 || !strings.HasPrefix(task.Evidence.DeletedDigests[0], judge.KeyedPrefix) {
		t.Fatalf("task %+v, want compensation_failed with one keyed deleted digest", task)
	}
	out := logs.String()
	if !strings.Contains(out, "compensation failed") || !strings.Contains(out, "/rows/[REDACTED]") {
		t.Errorf("no masked compensation failure in the log:\n%s", out)
	}
	for _, id := range []string{"730302", "730303"} {
		if strings.Contains(out, id) {
			t.Errorf("identity %s is in the log:\n%s", id, out)
		}
	}
}

// brokenBaseline streams more than one batch of records, then fails
// quoting the hidden value of the first, which the daemon has received.
type brokenBaseline struct{ *memAdapter }

func (a brokenBaseline) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return sdk.Capture{Reachable: true, Records: func(yield func(sdk.Record, error) bool) {
		for i := 0; i <= host.MaxBatchRecords; i++ {
			ssn := secretSSN
			if i > 0 {
				ssn = fmt.Sprintf("%09d", i)
			}
			if !yield(sdk.Record{"id": json.Number(fmt.Sprint(i)), "p": "0", "ssn": ssn}, nil) {
				return
			}
		}
		yield(nil, errors.New("cursor lost; the first row had ssn "+secretSSN))
	}}, nil
}

// A baseline read that fails part-way refuses the session; the refusal
// quotes the adapter's error with the hidden value of a record already read
// masked, though that record is nowhere in clear any more.
func TestBaselineFailurePartWayMasked(t *testing.T) {
	t.Parallel()
	a := brokenBaseline{&memAdapter{kind: "broken-baseline-test", tier: 1, table: &table{}}}
	m, dbPath, logs := evidenceManager(t, bytes.Repeat([]byte{4}, EvidenceKeySize), a)
	dep := "effects: {kind: broken-baseline-test, evidence_redact_fields: [ssn], newness: whole_read}\n"
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte(dep), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	var se *Error
	if !errors.As(err, &se) || se.Kind != Refused {
		t.Fatalf("Begin = %v, want a refusal", err)
	}
	if !strings.Contains(se.Message, "cursor lost; the first row had ssn [REDACTED]") {
		t.Errorf("refusal %q does not carry the masked adapter error", se.Message)
	}
	raw, _ := os.ReadFile(dbPath)
	for what, b := range map[string]string{"refusal": se.Error(), "log": logs.String(), "store": string(raw)} {
		if strings.Contains(b, secretSSN) {
			t.Errorf("the %s holds the hidden value: %s", what, b)
		}
	}
}
