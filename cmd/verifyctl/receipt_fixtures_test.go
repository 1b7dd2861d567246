package main

import (
	"path/filepath"
	"testing"
)

// TestReceiptVerifyIssuedReceipts: receipts of every signed payload type,
// issued before those types moved into the receipt module
// (receipt/testdata), still verify offline, by key and by key id with the
// subject expected.
func TestReceiptVerifyIssuedReceipts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "receipt", "testdata")
	key := filepath.Join(dir, "public-key.txt")
	files, err := filepath.Glob(filepath.Join(dir, "*-v1.json"))
	if err != nil || len(files) != 6 {
		t.Fatalf("fixtures %v (%v), want 6", files, err)
	}
	for _, f := range files {
		out, code := runCtl(t, "receipt", "verify", "--receipt", f, "--public-key", key)
		if code != 0 || out["valid"] != true {
			t.Errorf("%s: exit %d %v", filepath.Base(f), code, out)
		}
	}
	verdict := filepath.Join(dir, "verdict-v1.json")
	out, code := runCtl(t, "receipt", "verify", "--receipt", verdict, "--public-key", key,
		"--expect-session", "ses_0123456789abcdef", "--expect-deployment", "crm", "--expect-step", "create")
	if code != 0 || out["valid"] != true {
		t.Errorf("verdict, expected subject: exit %d %v", code, out)
	}
	if out, code = runCtl(t, "receipt", "verify", "--receipt", verdict, "--public-key", key, "--expect-session", "ses_other"); code != 1 || out["valid"] != false {
		t.Errorf("verdict, another session: exit %d %v", code, out)
	}
}
