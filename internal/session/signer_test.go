package session

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/receipt"
)

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
	env, err := newReceiptSigner(nil).sign(nil, receipt.PayloadTypeVerdict, "ses_1", func(receipt.Position, receipt.Signer) any {
		t.Error("the payload was built without a key")
		return nil
	})
	if env != nil || err != nil {
		t.Errorf("sign without a key: %s, %v", env, err)
	}
}
