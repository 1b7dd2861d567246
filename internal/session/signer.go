package session

import (
	"encoding/json"
	"time"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// receiptSigner signs the daemon's receipts and ledger checkpoints with its
// signing key (docs/receipts.md). Made without a key it signs nothing: the
// ledger is kept all the same.
type receiptSigner struct {
	s *signing.Signer
}

// newReceiptSigner signs with s; s may be nil.
func newReceiptSigner(s *signing.Signer) receiptSigner { return receiptSigner{s: s} }

// ref names the signing key in a payload.
func (r receiptSigner) ref() receipt.Signer {
	return receipt.Signer{PublicKey: r.s.PublicKeyBase64(), KeyID: r.s.KeyID()}
}

// sign marshals a payload whose ledger position is taken now, signs it and
// appends its receipt entry to l. Without a key it appends nothing and
// returns no envelope.
func (r receiptSigner) sign(l store.Ledger, payloadType, session string, set func(pos receipt.Position, signer receipt.Signer) any) (json.RawMessage, error) {
	if r.s == nil {
		return nil, nil
	}
	pos := l.Next()
	payload, err := json.Marshal(set(pos, r.ref()))
	if err != nil {
		return nil, err
	}
	env := r.s.Sign(payloadType, payload)
	if _, err := l.Append(EntryReceipt, session, receipt.PayloadDigest(payload)); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// checkpoint signs the checkpoint of the ledger whose entry seq hashes to
// head (receipt.PayloadTypeCheckpoint) and returns the envelope JSON. It
// needs a key.
func (r receiptSigner) checkpoint(seq uint64, head string) ([]byte, error) {
	ref := r.ref()
	payload, err := json.Marshal(receipt.Checkpoint{Seq: seq, Head: head, At: time.Now().UTC(), Signer: &ref})
	if err != nil {
		return nil, err
	}
	return json.Marshal(r.s.Sign(receipt.PayloadTypeCheckpoint, payload))
}
