package session

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// TestEvidenceKeys: a given key is the one every digest is made under; made
// without one, a random key of the right size, stable for the holder's
// life and not shared with another holder.
func TestEvidenceKeys(t *testing.T) {
	key := bytes.Repeat([]byte{9}, EvidenceKeySize)
	k := newEvidenceKeys(key)
	if !bytes.Equal(k.key(), key) {
		t.Fatal("a given key is not the one held")
	}
	mac := judge.NewKeyedHash(key)
	mac.Write([]byte("record"))
	if got, want := k.keyedDigest([]byte("record")), judge.KeyedSum(mac); got != want || !strings.HasPrefix(got, "hmac-sha256:") {
		t.Errorf("keyedDigest %q, want %q", got, want)
	}
	if newEvidenceKeys(bytes.Repeat([]byte{8}, EvidenceKeySize)).keyedDigest([]byte("record")) == k.keyedDigest([]byte("record")) {
		t.Error("two keys digest alike")
	}

	r1, r2 := newEvidenceKeys(nil), newEvidenceKeys(nil)
	if len(r1.key()) != EvidenceKeySize || bytes.Equal(r1.key(), make([]byte, EvidenceKeySize)) {
		t.Fatalf("random key of %d bytes: %x", len(r1.key()), r1.key())
	}
	if bytes.Equal(r1.key(), r2.key()) {
		t.Error("two random keys are equal")
	}
	if d := r1.keyedDigest([]byte("x")); d != newEvidenceKeys(r1.key()).keyedDigest([]byte("x")) {
		t.Errorf("a random key's digest %s is not the key's", d)
	}
}

// TestManagerEvidenceKey: a Manager without EvidenceKey keeps one random
// key for its lifetime; with one, it uses it, also when set after build.
func TestManagerEvidenceKey(t *testing.T) {
	m := &Manager{}
	first := m.KeyedDigest([]byte("x"))
	if m.KeyedDigest([]byte("x")) != first || !bytes.Equal(m.evidence().key(), m.EvidenceDigestKey()) {
		t.Fatal("the Manager's random key changed")
	}
	m.EvidenceKey = bytes.Repeat([]byte{3}, EvidenceKeySize)
	if got := m.KeyedDigest([]byte("x")); got != newEvidenceKeys(m.EvidenceKey).keyedDigest([]byte("x")) || got == first {
		t.Errorf("EvidenceKey set after build is not used: %s", got)
	}
}

// TestReceiptSignerCheckpoint: a checkpoint opens under the signer's
// public key and names the key, the seq and the head.
func TestReceiptSignerCheckpoint(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := signing.New(priv)
	r := newReceiptSigner(s)
	if ref := r.ref(); ref.KeyID != s.KeyID() || ref.PublicKey != s.PublicKeyBase64() {
		t.Errorf("ref %+v", ref)
	}
	raw, err := r.checkpoint(7, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	if env.PayloadType != receipt.PayloadTypeCheckpoint {
		t.Errorf("payload type %q", env.PayloadType)
	}
	payload, err := env.Open(s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	var cp receipt.Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Seq != 7 || cp.Head != "sha256:abc" || cp.Signer == nil || cp.Signer.KeyID != s.KeyID() {
		t.Errorf("checkpoint %+v", cp)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if _, err := env.Open(signing.New(other).PublicKey()); err == nil {
		t.Error("the checkpoint opens under another key")
	}
}

// TestReceiptSignerWithoutKey: without a key nothing is signed and the
// ledger is not touched (a nil ledger would panic).
func TestReceiptSignerWithoutKey(t *testing.T) {
	env, err := newReceiptSigner(nil).sign(nil, receipt.PayloadTypeVerdict, "ses_1", func(receipt.Position, SignerRef) any {
		t.Error("the payload was built without a key")
		return nil
	})
	if env != nil || err != nil {
		t.Errorf("sign without a key: %s, %v", env, err)
	}
}
