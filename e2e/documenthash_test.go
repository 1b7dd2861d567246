package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDocumentHashThroughDaemon: an export must land once with exactly the
// expected bytes, read by verifier-adapter-document-hash through the daemon.
func TestDocumentHashThroughDaemon(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "invoice-0.pdf"), []byte("an earlier invoice"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dep := writeFile(t, dir, "deployment.yaml", fmt.Sprintf("effects:\n  kind: document-hash\n  root: %s\n  glob: \"invoice-*.pdf\"\n", root))
	effects := writeFile(t, dir, "effects.yaml", `
- kind: record_written
  match: {name: {param: file}, sha256: {param: sum}}
  count_new_only: true
  timeout_s: 0.5
`)
	want := []byte("%PDF-1.7 the invoice the automation exported")
	sum := sha256.Sum256(want)
	tests := []struct {
		name    string
		content []byte // nil: nothing written
		verdict string
	}{
		{"exact bytes landed", want, "VERIFIED CONFIRMED/confirmed/COUNT_EXACT"},
		{"other bytes landed", []byte("%PDF-1.7 a truncated invoi"), "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER"},
		{"nothing landed", nil, "HALTED_BEFORE_EFFECT REFUTED/refuted/COUNT_UNDER"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := fmt.Sprintf("invoice-%d.pdf", i+1)
			out, code := d.ctl(t, "begin", "--deployment-name", d.register(t, dep), "--effects", effects, "--param", "file="+file, "--param", "sum="+hex.EncodeToString(sum[:]))
			if code != 0 {
				t.Fatalf("begin exit %d: %s", code, out)
			}
			b := mustJSON[beginOutput](t, out)
			if b.Effects[0].Candidate != "document-hash" || b.Effects[0].Tier != 1 {
				t.Fatalf("begin effects %+v", b.Effects)
			}
			if tt.content != nil {
				if err := os.WriteFile(filepath.Join(root, file), tt.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := d.verify(t, b.SessionID).summary(); got != tt.verdict {
				t.Errorf("verify = %s, want %s", got, tt.verdict)
			}
		})
	}
}
