package receipt

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// PayloadTypeCheckpoint is the payload type of a signed ledger checkpoint.
const PayloadTypeCheckpoint = "application/vnd.verifierd.ledger-checkpoint.v1+json"

// Checkpoint is the payload of a signed ledger checkpoint: the daemon's
// word that its ledger held exactly Seq entries and that entry Seq hashes
// to Head (Entry.Hash; Genesis for an empty ledger, Seq 0). Unlike
// Position.Head (what a receipt's entry was chained onto), Head here is the
// digest of the entry at Seq itself.
type Checkpoint struct {
	Seq    uint64    `json:"seq"`
	Head   string    `json:"head"`
	At     time.Time `json:"at"`
	Signer *Signer   `json:"signer,omitempty"`
}

// Signer names the key that signed a payload, as verifierd's payloads carry
// it.
type Signer struct {
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
}

// SignCheckpoint signs a checkpoint of a ledger whose entry seq hashes to
// head.
func SignCheckpoint(priv ed25519.PrivateKey, seq uint64, head string, at time.Time) (*Envelope, error) {
	pub, _ := priv.Public().(ed25519.PublicKey)
	payload, err := json.Marshal(Checkpoint{Seq: seq, Head: head, At: at.UTC(), Signer: &Signer{PublicKey: base64.StdEncoding.EncodeToString(pub), KeyID: KeyID(pub)}})
	if err != nil {
		return nil, err
	}
	return Sign(priv, PayloadTypeCheckpoint, payload), nil
}

// Export is a ledger export as `verifyctl ledger export` writes it: the
// entries, one per line, and the signed checkpoints (DSSE envelopes, one per
// line; the daemon writes one, last).
type Export struct {
	Entries []Entry
	// Checkpoints in the order read, with the 1-based line of each.
	Checkpoints []*Envelope
	Lines       []int
}

// ReadExport reads a JSON-lines ledger export: entries (unknown keys
// refused) and checkpoint envelopes (a line with "payloadType").
func ReadExport(r io.Reader) (*Export, error) {
	out := &Export{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if err := CheckKeys(text, fmt.Sprintf("line %d", line)); err != nil {
			return nil, err
		}
		var probe struct {
			PayloadType *string `json:"payloadType"`
		}
		if json.Unmarshal(text, &probe) == nil && probe.PayloadType != nil {
			env, err := ParseEnvelope(text)
			if de, ok := errors.AsType[*DuplicateKeyError](err); ok {
				de.What = fmt.Sprintf("line %d: %s", line, de.What)
				return nil, de
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			if env.PayloadType != PayloadTypeCheckpoint {
				return nil, fmt.Errorf("line %d: an envelope of type %s, not a ledger checkpoint", line, env.PayloadType)
			}
			out.Checkpoints = append(out.Checkpoints, env)
			out.Lines = append(out.Lines, line)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("line %d: not a ledger entry: %v", line, err)
		}
		out.Entries = append(out.Entries, e)
	}
	return out, sc.Err()
}

// Words of a LedgerError: how an export differs from what the daemon
// signed.
const (
	// Truncated: the export ends before the signed checkpoint's seq, or
	// holds no checkpoint signed by the key.
	Truncated = "truncated"
	// Extended: the export holds entries after the signed checkpoint that
	// no signature covers.
	Extended = "extended"
	// Rewritten: an entry no longer hashes to what the chain or the signed
	// head recorded.
	Rewritten = "rewritten"
)

// LedgerError is an export that does not end exactly at a signed
// checkpoint whose head matches its chain.
type LedgerError struct {
	Kind string // Truncated, Extended or Rewritten
	// Seq is the first seq concerned: the first missing (truncated), the
	// first unsigned (extended), or the entry whose hash does not match
	// (rewritten).
	Seq        uint64
	Checkpoint *Checkpoint // the signed checkpoint, when one verified
	Reason     string
}

func (e *LedgerError) Error() string {
	return fmt.Sprintf("ledger %s at seq %d: %s", e.Kind, e.Seq, e.Reason)
}

// VerifySigned checks an export whose chain VerifyChain accepted (from seq
// 1) against the newest checkpoint in it signed by pub. The export must end
// exactly at that checkpoint: its last entry is the checkpoint's seq and
// hashes to its head. It returns the checkpoint, or a *LedgerError.
//
// What this cannot see: an export cut back to an older checkpoint the
// daemon really signed (with the entries after it and the newer checkpoint
// dropped) ends at a valid signed head; only a later receipt or checkpoint
// the verifier already holds shows that the ledger went further.
func VerifySigned(x *Export, pub ed25519.PublicKey) (*Checkpoint, error) {
	var cp *Checkpoint
	var bad error
	for _, env := range x.Checkpoints {
		payload, err := env.Open(pub)
		if err != nil {
			bad = err
			continue
		}
		var c Checkpoint
		if err := json.Unmarshal(payload, &c); err != nil {
			bad = fmt.Errorf("the signed checkpoint is not JSON: %v", err)
			continue
		}
		if cp == nil || c.Seq > cp.Seq {
			cp = &c
		}
	}
	var last uint64
	if n := len(x.Entries); n > 0 {
		last = x.Entries[n-1].Seq
	}
	if cp == nil {
		reason := "the export holds no signed checkpoint, so nothing vouches for where it ends (entries may have been dropped)"
		if bad != nil {
			reason = fmt.Sprintf("no checkpoint in the export is signed by %s (%v), so nothing vouches for where it ends", KeyID(pub), bad)
		}
		return nil, &LedgerError{Kind: Truncated, Seq: last + 1, Reason: reason}
	}
	switch {
	case cp.Seq > last:
		return cp, &LedgerError{Kind: Truncated, Seq: last + 1, Checkpoint: cp,
			Reason: fmt.Sprintf("the export ends at seq %d, the signed checkpoint covers seq %d: entries %d to %d are missing", last, cp.Seq, last+1, cp.Seq)}
	case cp.Seq < last:
		return cp, &LedgerError{Kind: Extended, Seq: cp.Seq + 1, Checkpoint: cp,
			Reason: fmt.Sprintf("the signed checkpoint covers seq %d, the export goes on to seq %d: no signature covers entries %d to %d", cp.Seq, last, cp.Seq+1, last)}
	}
	head := Genesis
	if last > 0 {
		head = x.Entries[len(x.Entries)-1].Hash()
	}
	if head != cp.Head {
		return cp, &LedgerError{Kind: Rewritten, Seq: cp.Seq, Checkpoint: cp,
			Reason: fmt.Sprintf("entry seq %d hashes to %s, the signed head is %s: it, or an entry before it with the chain re-linked, was changed", cp.Seq, head, cp.Head)}
	}
	return cp, nil
}

// CheckpointSignerKey takes the public key a checkpoint payload names and
// checks that it hashes to keyID, the id the caller trusts.
func CheckpointSignerKey(env *Envelope, keyID string) (ed25519.PublicKey, error) {
	if err := CheckKeys(env.Payload, "the checkpoint's payload"); err != nil {
		return nil, err
	}
	var c Checkpoint
	if err := json.Unmarshal(env.Payload, &c); err != nil || c.Signer == nil || c.Signer.PublicKey == "" {
		return nil, errors.New("the checkpoint names no signer public key; pass the public key")
	}
	pub, err := ParsePublicKey(c.Signer.PublicKey)
	if err != nil {
		return nil, err
	}
	if got := KeyID(pub); got != keyID {
		return nil, fmt.Errorf("the checkpoint was signed by %s, not %s", got, keyID)
	}
	return pub, nil
}
