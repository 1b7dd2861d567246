package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
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
	var ce *sdk.ConfigError
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
