package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJudgeCaseFile judges a case given as a file (mapped on Linux) and the
// same case on stdin: the same verdict either way, and the refusals of a
// missing file and of a malformed case name their cause.
func TestJudgeCaseFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caseJSON := `{"effects": [{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}],
		"before": {"reachable": true, "records": [{"id": 1, "patient_id": "p0"}]},
		"after": {"reachable": true, "records": [{"id": 1, "patient_id": "p0"}, {"id": 2.0, "patient_id": "p1", "note": "Zo\u00eb"}]}}`
	path := filepath.Join(dir, "case.json")
	if err := os.WriteFile(path, []byte(caseJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	var fromFile, fromStdin, stderr bytes.Buffer
	if code := cmdJudge([]string{"--case", path}, nil, &fromFile, &stderr); code != 0 {
		t.Fatalf("exit %d: %s %s", code, fromFile.String(), stderr.String())
	}
	if code := cmdJudge([]string{"--case", "-"}, strings.NewReader(caseJSON), &fromStdin, &stderr); code != 0 {
		t.Fatalf("stdin: exit %d: %s", code, fromStdin.String())
	}
	if fromFile.String() != fromStdin.String() {
		t.Fatalf("file and stdin differ:\n%s\n%s", fromFile.String(), fromStdin.String())
	}
	var out struct {
		Outcome string `json:"outcome"`
		Effects []struct {
			Verdict string           `json:"verdict"`
			Matched []map[string]any `json:"matched_records"`
		} `json:"effects"`
	}
	if err := json.Unmarshal(fromFile.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Outcome != "VERIFIED" || len(out.Effects) != 1 || out.Effects[0].Verdict != "CONFIRMED" || len(out.Effects[0].Matched) != 1 {
		t.Fatalf("output %s", fromFile.String())
	}
	if got := out.Effects[0].Matched[0]["note"]; got != "Zoë" {
		t.Errorf("matched note %v, want Zoë", got)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"effects": [{"kind": "record_written"}], "before": {"reachable": true, "records": [{"id": 1, "id": 2}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, wantPath, wantText string }{
		{bad, "before.records[0].id", "duplicate key"},
		{filepath.Join(dir, "missing.json"), "", "cannot read the case file"},
	} {
		var refusal bytes.Buffer
		if code := cmdJudge([]string{"--case", tt.path}, nil, &refusal, &stderr); code != 2 {
			t.Fatalf("%s: exit %d, want 2", tt.path, code)
		}
		var r struct {
			Error struct{ Code, Message, Path string } `json:"error"`
		}
		if err := json.Unmarshal(refusal.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Error.Code != "INVALID_CASE" || r.Error.Path != tt.wantPath || !strings.Contains(r.Error.Message, tt.wantText) {
			t.Errorf("%s: refusal %+v, want INVALID_CASE at %q mentioning %q", tt.path, r.Error, tt.wantPath, tt.wantText)
		}
	}
}

// TestJudgeLargeCaseFile: a case large enough for the fast path's field
// arena and parallel decoding, from a file (mapped) and from stdin: the
// same verdicts, and the expected ones.
func TestJudgeLargeCaseFile(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	rec := func(i int, patient, typ string) {
		fmt.Fprintf(&sb, `{"id": %d, "patient_id": "%s", "type": "%s", "note": "n%d"}`, i, patient, typ, i)
	}
	const n = 30_000
	sb.WriteString(`{"effects": [{"kind": "record_written", "match": {"patient_id": "p-new", "type": "Triage"}, "count_new_only": true}, ` +
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p-new", "type": "Triage"}], "expected_count": 1}], "before": {"reachable": true, "records": [`)
	for i := 1; i <= n; i++ {
		if i > 1 {
			sb.WriteString(", ")
		}
		rec(i, fmt.Sprintf("p%d", i%100), "Consult")
	}
	sb.WriteString(`]}, "after": {"reachable": true, "records": [`)
	for i := 1; i <= n+1; i++ {
		if i > 1 {
			sb.WriteString(", ")
		}
		if i == n+1 {
			rec(i, "p-new", "Triage")
		} else {
			rec(i, fmt.Sprintf("p%d", i%100), "Consult")
		}
	}
	sb.WriteString(`]}}`)
	path := filepath.Join(t.TempDir(), "large.json")
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var fromFile, fromStdin, stderr bytes.Buffer
	if code := cmdJudge([]string{"--case", path}, nil, &fromFile, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, fromFile.String())
	}
	if code := cmdJudge([]string{"--case", "-"}, strings.NewReader(sb.String()), &fromStdin, &stderr); code != 0 {
		t.Fatalf("stdin: exit %d: %s", code, fromStdin.String())
	}
	if fromFile.String() != fromStdin.String() {
		t.Fatal("file and stdin outputs differ")
	}
	var out struct {
		Outcome string `json:"outcome"`
		Effects []struct {
			Verdict  string `json:"verdict"`
			Observed int    `json:"observed_count"`
		} `json:"effects"`
	}
	if err := json.Unmarshal(fromFile.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Outcome != "VERIFIED" || len(out.Effects) != 2 || out.Effects[0].Observed != 1 || out.Effects[1].Observed != 1 {
		t.Fatalf("output %s", fromFile.String())
	}
}
