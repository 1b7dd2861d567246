package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// binary is verifier-adapter-jsonl, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	adaptertest.MainWithPlugin(m, "github.com/verifierd/verifierd/sdk/examples/jsonl", "jsonl", &binary)
}

func request(path string) sdk.ConfigureRequest {
	raw, _ := json.Marshal(map[string]any{"kind": "jsonl", "options": map[string]any{"path": path}})
	return sdk.ConfigureRequest{Kind: "jsonl", Config: raw}
}

// TestReads drives the built binary as the daemon does: a refusal names its
// path, every line is a record, and a missing file reads as unreachable.
func TestReads(t *testing.T) {
	t.Parallel()
	in := adaptertest.Subprocess(t, binary)
	var ce *refusal.Error
	if err := in.Configure(t.Context(), request("orders.jsonl")); !errors.As(err, &ce) || ce.Path != "options.path" {
		t.Fatalf("a relative path: %v; want a refusal at options.path", err)
	}

	path := filepath.Join(t.TempDir(), "orders.jsonl")
	if err := os.WriteFile(path, []byte("{\"id\":\"o-1\",\"total\":12.50}\n\n{\"id\":\"o-2\",\"total\":3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := in.Setup(t.Context(), request(path), nil); err != nil {
		t.Fatal(err)
	}
	capt, recs := adaptertest.ReadAll(t, in, true, adaptertest.Request(nil))
	if !capt.Reachable || len(recs) != 2 || recs[0]["id"] != "o-1" || recs[0]["total"] != json.Number("12.50") || recs[1]["id"] != "o-2" {
		t.Fatalf("read %v (reachable %v); want o-1 (total 12.50, exact) and o-2", recs, capt.Reachable)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	capt, recs = adaptertest.ReadAll(t, in, true, adaptertest.Request(nil))
	if capt.Reachable || len(recs) != 0 {
		t.Fatalf("a missing file read as reachable with %d records; want unreachable", len(recs))
	}
}

// TestMalformedLineFailsTheRead: a line that is not a JSON object ends the
// stream with an error, so the daemon never judges part of the file.
func TestMalformedLineFailsTheRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	if err := os.WriteFile(path, []byte("{\"id\":\"o-1\"}\n[1,2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := adaptertest.Configured(t, New, request(path), nil)
	capt, err := in.CaptureAfter(t.Context(), adaptertest.Request(nil))
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := capt.Records(); err == nil {
		t.Fatalf("a malformed line read as %d records without an error", len(recs))
	}
}

// TestListInAReadField: a line whose field a contract selects on holds a
// list. Two values fail the read naming the line and the field (dropping
// the line, or reading it as a list no value matches, would hide a write
// and halt the step); one value is that value; a list in a field no
// contract reads stays a list.
func TestListInAReadField(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	in := adaptertest.Configured(t, New, request(path), nil)
	read := func(content string) ([]sdk.Record, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		req := adaptertest.Request(map[string]string{"subject": "a"})
		req.ReadFields = []string{"subject", "id"}
		capt, err := in.CaptureAfter(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return capt.Records()
	}
	_, err := read("{\"id\":\"o-1\",\"subject\":\"a\"}\n{\"id\":\"o-2\",\"subject\":[\"a\",\"b\"]}\n")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "subject") {
		t.Fatalf("two values in a selected field: %v, want the read failed naming line 2 and subject", err)
	}
	recs, err := read("{\"id\":\"o-3\",\"subject\":[\"a\"],\"tags\":[\"x\",\"y\"]}\n")
	if err != nil || len(recs) != 1 || recs[0]["subject"] != "a" {
		t.Fatalf("one value: %v %v, want subject a", recs, err)
	}
	if tags, ok := recs[0]["tags"].([]any); !ok || len(tags) != 2 {
		t.Errorf("a list no contract reads: %v, want it kept", recs[0]["tags"])
	}
}
