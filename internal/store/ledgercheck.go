package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/verifierd/verifierd/receipt"
)

// LedgerReport is what a check of the ledger stored inside a store found:
// the hash chain of its entries, and every signed checkpoint against the
// signing key the store records. An entry edited in the stored file (even
// with the chain re-linked after it) no longer hashes to the head a
// checkpoint signed; only entries after the newest checkpoint are vouched
// for by nothing but the chain.
type LedgerReport struct {
	Entries     int    // entries checked
	Checkpoints int    // signed checkpoints checked
	Head        uint64 // the newest entry's seq
	Signed      uint64 // the newest checkpoint's seq (0: none)
	Problems    []string
}

// Unvouched is how many entries come after the newest checkpoint.
func (r *LedgerReport) Unvouched() uint64 { return r.Head - min(r.Signed, r.Head) }

// LedgerChecker checks a stored ledger read in seq order, one entry at a
// time, so that a long ledger is never held in memory: Checkpoints first,
// then Entry for each stored entry, then Report.
type LedgerChecker struct {
	signingKeyID string
	heads        map[uint64]string // checkpoint seq -> signed head
	rep          LedgerReport
	prev         string
	next         uint64
}

// maxLedgerProblems bounds the problems a report lists: the first break
// is what matters, and a wholly rewritten ledger would list every entry.
const maxLedgerProblems = 20

// NewLedgerChecker checks against the signing key id the store records
// (store.Keys.SigningKeyID); an empty id (a store written before key ids
// were recorded) checks each checkpoint under the key it names.
func NewLedgerChecker(signingKeyID string) *LedgerChecker {
	return &LedgerChecker{signingKeyID: signingKeyID, heads: map[uint64]string{}, prev: receipt.Genesis, next: 1}
}

func (c *LedgerChecker) problem(format string, args ...any) {
	if len(c.rep.Problems) < maxLedgerProblems {
		c.rep.Problems = append(c.rep.Problems, fmt.Sprintf(format, args...))
	}
}

// Checkpoint checks one stored checkpoint: stored under seq, a DSSE
// envelope signed by the store's signing key, over the ledger ending at
// seq.
func (c *LedgerChecker) Checkpoint(seq uint64, envelope []byte) {
	c.rep.Checkpoints++
	var env receipt.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		c.problem("checkpoint %d is not a signed envelope: %v", seq, err)
		return
	}
	keyID := c.signingKeyID
	if keyID == "" {
		var named receipt.Checkpoint
		if json.Unmarshal(env.Payload, &named) == nil && named.Signer != nil {
			if pub, err := receipt.ParsePublicKey(named.Signer.PublicKey); err == nil {
				keyID = receipt.KeyID(pub)
			}
		}
	}
	pub, err := receipt.CheckpointSignerKey(&env, keyID)
	if err != nil {
		c.problem("checkpoint %d: %v", seq, err)
		return
	}
	payload, err := env.Open(pub)
	if err != nil {
		c.problem("checkpoint %d does not verify under the store's signing key %s: %v", seq, keyID, err)
		return
	}
	var cp receipt.Checkpoint
	if err := json.Unmarshal(payload, &cp); err != nil || cp.Seq != seq {
		c.problem("checkpoint stored under seq %d signs seq %d", seq, cp.Seq)
		return
	}
	c.heads[seq] = cp.Head
	c.rep.Signed = max(c.rep.Signed, seq)
}

// Entry checks the entry stored under seq with its stored bytes: the
// canonical JSON of an entry of that seq, chained onto the one before,
// hashing to the head of the checkpoint signed at seq, if any.
func (c *LedgerChecker) Entry(seq uint64, stored []byte) {
	c.rep.Entries++
	c.rep.Head = seq
	var e receipt.Entry
	err := json.Unmarshal(stored, &e)
	switch {
	case err != nil:
		c.problem("ledger entry %d is not an entry: %v", seq, err)
	case e.Seq != seq:
		c.problem("ledger entry stored under seq %d says seq %d", seq, e.Seq)
	case !bytes.Equal(e.Canonical(), stored):
		c.problem("ledger entry %d is not stored in its canonical form (it was edited)", seq)
	case seq != c.next:
		c.problem("ledger entry %d follows seq %d: entries %d to %d are missing", seq, c.next-1, c.next, seq-1)
	case e.Prev != c.prev:
		c.problem("ledger entry %d records prev %s, but entry %d hashes to %s: entry %d was changed", seq, e.Prev, seq-1, c.prev, seq-1)
	}
	c.prev, c.next = receipt.PayloadDigest(stored), seq+1
	if head, ok := c.heads[seq]; ok && head != c.prev {
		c.problem("ledger entry %d hashes to %s, the checkpoint signed at seq %d says %s: it, or an entry before it with the chain re-linked, was changed", seq, c.prev, seq, head)
	}
}

// Report ends the check: a checkpoint past the last entry means entries
// were removed from the end.
func (c *LedgerChecker) Report() LedgerReport {
	for _, seq := range slices.Sorted(maps.Keys(c.heads)) {
		if seq > c.rep.Head {
			c.problem("the checkpoint signed at seq %d covers entries the store no longer holds (it ends at seq %d)", seq, c.rep.Head)
		}
	}
	return c.rep
}
