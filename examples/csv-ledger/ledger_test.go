package main

import (
	"encoding/csv"
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

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// binary is verifier-adapter-csv-ledger, built once by TestMain exactly as
// the README tells a customer to build it.
var binary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/examples/csv-ledger", "csv-ledger", &binary)
}

func configReq(t testing.TB, opts map[string]any) sdk.ConfigureRequest {
	t.Helper()
	b, err := json.Marshal(map[string]any{"kind": kind, "options": opts})
	if err != nil {
		t.Fatal(err)
	}
	return sdk.ConfigureRequest{Kind: kind, Config: b}
}

// writeLedger replaces the ledger atomically (a temporary file renamed over
// it), so a concurrent read sees the old rows or the new ones, never half a
// line.
func writeLedger(t testing.TB, path string, rows [][]string) {
	t.Helper()
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func capture(t *testing.T, c *adaptertest.Instance, id string) (*adaptertest.Stream, []sdk.Record) {
	t.Helper()
	return adaptertest.ReadAll(t, c, true, sdk.CaptureRequest{CaptureID: id, Timeout: 10 * time.Second})
}

func TestConfigureRefusals(t *testing.T) {
	t.Parallel()
	sp := adaptertest.Subprocess(t, binary)
	tests := []struct {
		name     string
		req      sdk.ConfigureRequest
		wantPath string
		wantMsg  string
	}{
		{"no options", sdk.ConfigureRequest{Kind: kind, Config: json.RawMessage(`{"kind":"csv-ledger"}`)}, "options", "missing"},
		{"no path", configReq(t, map[string]any{"id_column": "id"}), "options.path", "missing"},
		{"relative path", configReq(t, map[string]any{"path": "ledger.csv"}), "options.path", "write an absolute path"},
		{"unknown option", configReq(t, map[string]any{"path": "/x.csv", "delimiter": ";"}), "options.delimiter", "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sp.Configure(t.Context(), tt.req)
			var ce *refusal.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("Configure = %v; want a refusal at %q containing %q", err, tt.wantPath, tt.wantMsg)
			}
		})
	}
}

func TestCapture(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "payments.csv")
	writeLedger(t, path, [][]string{
		{"payment_no", "payee", "amount", "memo"},
		{"P-1", "ACME", "10.50", ""},
		{"P-2", "Zoë GmbH", "0100", "comma, \"quoted\""},
	})
	sp := adaptertest.Subprocess(t, binary)
	if err := sp.Configure(t.Context(), configReq(t, map[string]any{"path": path, "id_column": "payment_no"})); err != nil {
		t.Fatal(err)
	}
	res, err := sp.TestConnection(t.Context())
	if err != nil || !res.Reachable || !strings.Contains(res.Message, "payment_no, payee, amount, memo") {
		t.Errorf("TestConnection = %+v, %v", res, err)
	}
	capt, recs := capture(t, sp, "c1")
	if !capt.Reachable {
		t.Fatalf("unreachable: %s", capt.Reason)
	}
	want := []sdk.Record{
		{"payment_no": "P-1", "payee": "ACME", "amount": "10.50", "memo": ""},
		{"payment_no": "P-2", "payee": "Zoë GmbH", "amount": "0100", "memo": `comma, "quoted"`},
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		content    *string
		idColumn   string
		wantReason string
	}{
		{"missing file", nil, "id", "cannot be opened"},
		{"empty file", new(""), "id", "is empty"},
		{"no id column", new("a,b\n1,2\n"), "id", `has no "id" column`},
		{"duplicate column", new("id,id\n1,2\n"), "id", `names column "id" twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ledger.csv")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sp := adaptertest.Subprocess(t, binary)
			if err := sp.Configure(t.Context(), configReq(t, map[string]any{"path": path, "id_column": tt.idColumn})); err != nil {
				t.Fatal(err)
			}
			capt, recs := capture(t, sp, "c")
			if capt.Reachable || len(recs) != 0 || !strings.Contains(capt.Reason, tt.wantReason) {
				t.Errorf("reachable=%v records=%d reason=%q; want unreachable, %q", capt.Reachable, len(recs), capt.Reason, tt.wantReason)
			}
			if res, err := sp.TestConnection(t.Context()); err != nil || res.Reachable {
				t.Errorf("TestConnection = %+v, %v; want unreachable", res, err)
			}
		})
	}
}

func TestMalformedRowAbortsTheRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.csv")
	if err := os.WriteFile(path, []byte("id,amount\n1,10\n2,20,extra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := adaptertest.Subprocess(t, binary)
	if err := sp.Configure(t.Context(), configReq(t, map[string]any{"path": path})); err != nil {
		t.Fatal(err)
	}
	capt, err := sp.CaptureAfter(t.Context(), sdk.CaptureRequest{CaptureID: "c", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := capt.Records(); err == nil {
		t.Fatalf("a ledger with a malformed row read as %d records without an error", len(recs))
	}
}

// TestVerdictHook drives the hook through the binary: a ledger modified
// "in the future" demotes CONFIRMED to INDETERMINATE, and nothing else.
func TestVerdictHook(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	skewed := filepath.Join(dir, "skewed.csv")
	normal := filepath.Join(dir, "normal.csv")
	for _, p := range []string{skewed, normal} {
		writeLedger(t, p, [][]string{{"id", "amount"}, {"1", "10"}})
	}
	future := time.Now().Add(2 * time.Hour)
	if err := os.Chtimes(skewed, future, future); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(normal, past, past); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		path      string
		captureID string // "" means: verdict on a read this adapter never made
		verdict   sdk.Verdict
		want      sdk.Demotion
	}{
		{"skewed ledger, confirmed", skewed, "read-1", sdk.VerdictConfirmed, sdk.Demotion{Verdict: sdk.VerdictIndeterminate, ReasonCode: ReasonClockSkew}},
		{"skewed ledger, refuted stays", skewed, "read-2", sdk.VerdictRefuted, sdk.Demotion{}},
		{"skewed ledger, indeterminate stays", skewed, "read-3", sdk.VerdictIndeterminate, sdk.Demotion{}},
		{"normal ledger, confirmed stays", normal, "read-4", sdk.VerdictConfirmed, sdk.Demotion{}},
		{"unknown read", skewed, "", sdk.VerdictConfirmed, sdk.Demotion{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sp := adaptertest.Subprocess(t, binary)
			if err := sp.Configure(t.Context(), configReq(t, map[string]any{"path": tt.path})); err != nil {
				t.Fatal(err)
			}
			judged := tt.captureID
			if judged == "" {
				judged = "never-read"
				capture(t, sp, "some-other-read")
			} else {
				capture(t, sp, judged)
			}
			got, err := sp.Verdict(t.Context(), sdk.VerdictRequest{CaptureID: judged, Verdict: tt.verdict, Tier: sdk.TierIndependentSystem})
			if err != nil {
				t.Fatal(err)
			}
			if got.Verdict != tt.want.Verdict || got.ReasonCode != tt.want.ReasonCode {
				t.Errorf("Verdict = %+v; want %+v", got, tt.want)
			}
			if !tt.want.IsZero() && !strings.Contains(got.Message, "clock is ahead") {
				t.Errorf("demotion message %q does not explain the skew", got.Message)
			}
		})
	}
}

// TestQualification runs the binary through the SDK's qualification kit.
func TestQualification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.csv")
	header := []string{"id", "patient_id", "amount", "updated_at"}
	var (
		mu   sync.Mutex
		rows [][]string
		next int
	)
	add := func(t *testing.T, patient, updatedAt string, n int) string {
		mu.Lock()
		defer mu.Unlock()
		var id string
		for range n {
			next++
			id = fmt.Sprint(next)
			rows = append(rows, []string{id, patient, "10.00", updatedAt})
		}
		writeLedger(t, path, append([][]string{header}, rows...))
		return id
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	writeLedger(t, path, [][]string{header})
	// The section as the README tells an operator to write it; the kit
	// resolves it with the daemon's own code.
	config := func(p string) adaptertest.Deployment {
		return adaptertest.Deployment{YAML: fmt.Sprintf("effects:\n  kind: csv-ledger\n  options: {path: %q, id_column: id}\n", p)}
	}

	adaptertest.Run(t, adaptertest.Harness{
		Binary:     binary,
		Deployment: func(t *testing.T) adaptertest.Deployment { return config(path) },
		BadDeployment: func(t *testing.T) adaptertest.Deployment {
			if os.Geteuid() == 0 {
				t.Skip("a CSV file has no credentials; its access control is file permissions, which root bypasses")
			}
			locked := filepath.Join(t.TempDir(), "locked.csv")
			writeLedger(t, locked, [][]string{header})
			if err := os.Chmod(locked, 0); err != nil {
				t.Fatal(err)
			}
			return config(locked)
		},
		Selector:      map[string]string{"patient_id": "p-1"},
		IdentityField: "id",
		Reset: func(t *testing.T) {
			mu.Lock()
			defer mu.Unlock()
			rows = nil
			writeLedger(t, path, [][]string{header})
		},
		WriteCorrect:     func(t *testing.T) string { return add(t, "p-1", now(), 1) },
		WriteWrongEntity: func(t *testing.T) string { return add(t, "p-2", now(), 1) },
		WriteDuplicate:   func(t *testing.T) string { return add(t, "p-1", now(), 1) },
		WriteStale: func(t *testing.T) (string, string) {
			add(t, "p-1", "2001-02-03T04:05:06Z", 1)
			return "updated_at", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, delay time.Duration) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(delay)
				add(t, "p-1", now(), 1)
			}()
			t.Cleanup(func() { <-done })
		},
		SetReachable: func(t *testing.T, reachable bool) {
			from, to := path, path+".away"
			if reachable {
				from, to = to, from
			}
			if _, err := os.Stat(from); err != nil {
				return
			}
			if err := os.Rename(from, to); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) { add(t, "p-1", now(), n) },
	})
}
