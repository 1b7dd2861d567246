package session

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/adapters/documenthash"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

func TestJudgeArtifact(t *testing.T) {
	t.Parallel()
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	a := receipt.Artifact{SHA256: sum, Size: 4, Name: "report.pdf"}
	rec := func(name, sha string, size string) judge.Record {
		return judge.Record{"name": name, "path": "out/" + name, "sha256": sha, "size": json.Number(size)}
	}
	other := "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	for name, tc := range map[string]struct {
		snap    judge.Snapshot
		absence bool
		verdict judge.Decision
		reason  string
	}{
		"exact":                    {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("a.pdf", sum, "4"), rec("report.pdf", sum, "4")}}, false, judge.Confirmed, ReasonArtifactExact},
		"same digest, other size":  {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("report.pdf", sum, "5")}}, false, judge.Refuted, ReasonArtifactOther},
		"other bytes":              {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("report.pdf", other, "4")}}, false, judge.Refuted, ReasonArtifactOther},
		"bytes under another name": {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("copy.pdf", sum, "4")}}, false, judge.Refuted, ReasonArtifactAbsent},
		"absent, absence no proof": {judge.Snapshot{Reachable: true}, true, judge.Indeterminate, ReasonArtifactAbsent},
		"unreadable":               {judge.Snapshot{Reachable: false, Reason: "root gone"}, false, judge.Indeterminate, judge.ReasonSORUnreachable},
	} {
		v, rs := proveArtifact(tc.snap, a, proofOptions(nil, tc.absence, nil, time.Time{}))
		if v != tc.verdict || len(rs) != 1 || rs[0].Code != tc.reason {
			t.Errorf("%s: %s %v, want %s %s", name, v, rs, tc.verdict, tc.reason)
		}
	}
}

// TestArtifactVerifier: the verifier is made of its parts, without a
// Manager. Over a real folder read by the document-hash adapter, the exact
// bytes are CONFIRMED and other bytes under the name REFUTED, each answer
// appended to the ledger and signed; an unregistered deployment is refused.
func TestArtifactVerifier(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs")
	must(t, os.MkdirAll(docs, 0o755))
	must(t, os.WriteFile(filepath.Join(docs, "report.pdf"), []byte("test"), 0o600))
	depPath := filepath.Join(dir, "docs.yaml")
	must(t, os.WriteFile(depPath, []byte(fmt.Sprintf("effects:\n  kind: document-hash\n  root: %s\n", docs)), 0o600))
	host, err := pluginhost.New(pluginhost.Options{})
	must(t, err)
	host.RegisterInProcess("document-hash", documenthash.New)
	st, err := bolt.Open(filepath.Join(dir, "state"))
	must(t, err)
	t.Cleanup(func() { host.Close(); st.Close() })
	daemon := &config.Daemon{Deployments: map[string]string{"docs": depPath}}
	none := func(string) (string, bool) { return "", false }
	_, priv, _ := ed25519.GenerateKey(nil)
	v := newArtifactVerifier(daemon, newConfigurer(host, none, daemon), none, afterReader{keys: newEvidenceKeys(nil)}, st, newReceiptSigner(signing.New(priv)))

	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // the SHA-256 of the four bytes of report.pdf
	for _, tc := range []struct {
		a       receipt.Artifact
		verdict judge.Decision
		reason  string
	}{
		{receipt.Artifact{SHA256: sum, Size: 4, Name: "report.pdf"}, judge.Confirmed, ReasonArtifactExact},
		{receipt.Artifact{SHA256: strings.Repeat("ab", 32), Size: 4, Name: "report.pdf"}, judge.Refuted, ReasonArtifactOther},
	} {
		res, err := v.verify(t.Context(), "docs", tc.a)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != tc.verdict || len(res.Reasons) != 1 || res.Reasons[0].Code != tc.reason || res.Substrate != "document-hash" || len(res.Receipt) == 0 {
			t.Errorf("%s: %+v, want %s %s with a receipt", tc.a.SHA256[:8], res, tc.verdict, tc.reason)
		}
	}
	pos, err := st.LedgerHead(t.Context())
	must(t, err)
	// Each answer: its artifact entry and its receipt entry.
	if pos.Seq-1 != 4 {
		t.Errorf("the ledger holds %d entries, want 4", pos.Seq-1)
	}
	if _, err := v.verify(t.Context(), "nope", receipt.Artifact{SHA256: sum, Size: 4, Name: "report.pdf"}); err == nil || !strings.Contains(err.Error(), `no deployment named "nope"`) {
		t.Errorf("an unregistered deployment: %v", err)
	}
}
