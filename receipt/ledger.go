package receipt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Entry is one ledger record. Prev is the digest of the previous entry
// ("sha256:" + hex of SHA-256 over its canonical JSON); the first entry's
// Prev is Genesis.
type Entry struct {
	Seq     uint64    `json:"seq"`
	Prev    string    `json:"prev"`
	Type    string    `json:"type"`
	Session string    `json:"session"`
	Digest  string    `json:"digest"`
	At      time.Time `json:"at"`
}

// Genesis is the Prev of the first entry.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Canonical is the entry's canonical JSON: keys in sorted order, no
// insignificant white space, UTF-8, times in RFC 3339 with nanoseconds in
// UTC. Python writes the same bytes with
// json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).
func (e Entry) Canonical() []byte {
	// Field order of this literal is the sorted key order.
	v := struct {
		At      string `json:"at"`
		Digest  string `json:"digest"`
		Prev    string `json:"prev"`
		Seq     uint64 `json:"seq"`
		Session string `json:"session"`
		Type    string `json:"type"`
	}{e.At.UTC().Format(time.RFC3339Nano), e.Digest, e.Prev, e.Seq, e.Session, e.Type}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // cannot fail: strings and an integer
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Hash is the digest the next entry's Prev must carry.
func (e Entry) Hash() string {
	sum := sha256.Sum256(e.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ChainError names the first entry at which a chain breaks.
type ChainError struct {
	Seq    uint64 // the seq the chain expected at that line
	Line   int    // 1-based line in the export
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("ledger broken at seq %d (line %d): %s", e.Seq, e.Line, e.Reason)
}

// VerifyChain checks entries read in order: seq counts up by one from the
// first entry's seq, and each Prev is the Hash of the entry before it. The
// first entry must be seq 1 with Prev Genesis unless allowTail (an export
// that starts mid-chain; its first Prev is then taken on trust). It returns
// the head: the Hash of the last entry.
func VerifyChain(entries []Entry, allowTail bool) (string, error) {
	prev := Genesis
	for i, e := range entries {
		line := i + 1
		if i == 0 {
			if !allowTail && (e.Seq != 1 || e.Prev != Genesis) {
				return "", &ChainError{Seq: 1, Line: line, Reason: fmt.Sprintf("the first entry is seq %d; the chain starts at seq 1 with the genesis prev (an entry was deleted, or the export is cut)", e.Seq)}
			}
			prev = e.Prev
		} else if want := entries[i-1].Seq + 1; e.Seq != want {
			return "", &ChainError{Seq: want, Line: line, Reason: fmt.Sprintf("found seq %d where seq %d belongs (an entry was deleted, inserted or moved)", e.Seq, want)}
		}
		if e.Prev != prev {
			if i == 0 {
				return "", &ChainError{Seq: e.Seq, Line: line, Reason: "prev is not the genesis digest"}
			}
			// The entry before no longer hashes to what this one recorded:
			// that entry was edited (or this one's prev was).
			return "", &ChainError{Seq: entries[i-1].Seq, Line: line - 1, Reason: fmt.Sprintf("its digest is not the prev that seq %d recorded: seq %d was changed", e.Seq, entries[i-1].Seq)}
		}
		prev = e.Hash()
	}
	return prev, nil
}

// ReadEntries reads the entries of a JSON-lines ledger export, refusing
// unknown keys and skipping its checkpoint lines (ReadExport keeps them).
func ReadEntries(r io.Reader) ([]Entry, error) {
	x, err := ReadExport(r)
	if err != nil {
		return nil, err
	}
	return x.Entries, nil
}

// Position is where a receipt says it was appended: the entry's seq and the
// head (the previous entry's digest) it was chained onto. A receipt payload
// carries it under "ledger".
type Position struct {
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
}

// PayloadDigest is the digest a ledger entry records for a receipt payload.
func PayloadDigest(payload []byte) string {
	sum := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FindReceipt checks that a verified chain holds the receipt whose payload
// is given: the entry at the payload's ledger.seq was chained onto
// ledger.head and records the payload's digest.
func FindReceipt(entries []Entry, payload []byte) (*Entry, error) {
	if err := CheckKeys(payload, "the receipt's payload"); err != nil {
		return nil, err
	}
	var p struct {
		Ledger *Position `json:"ledger"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Ledger == nil || p.Ledger.Seq == 0 {
		return nil, fmt.Errorf("the receipt names no ledger position")
	}
	want := PayloadDigest(payload)
	for i := range entries {
		e := &entries[i]
		if e.Seq != p.Ledger.Seq {
			continue
		}
		if e.Prev != p.Ledger.Head {
			return nil, fmt.Errorf("entry seq %d was chained onto %s, the receipt says %s", e.Seq, e.Prev, p.Ledger.Head)
		}
		if e.Digest != want {
			return nil, fmt.Errorf("entry seq %d records %s, not this receipt's digest %s", e.Seq, e.Digest, want)
		}
		return e, nil
	}
	return nil, fmt.Errorf("the ledger has no entry seq %d", p.Ledger.Seq)
}
