package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Values checked on read (docs/daemon.md, "Store integrity"). Every stored
// session record, result, re-verification, baseline chunk (census captures
// included) and reward record ends with an HMAC-SHA-256 tag over where it
// is stored and what it holds, written in the same transaction as the
// value; every read checks the tag and answers an *IntegrityError naming
// the session instead of the value. The key is derived from the daemon's
// evidence key (IntegrityKey), which every replica of one store already
// shares, so no further key has to be distributed. The tag covers the
// value's place (kind, session, attempt, capture, chunk), so a value
// copied under another session fails as surely as a flipped byte.
//
// A store written before tags existed is sealed as it stands by the first
// daemon of this version that binds it (Bind): from then on a value
// without a valid tag is damage, never an old record to accept.

// MACSize is the length of the tag at the end of every checked value.
const MACSize = sha256.Size

// SealVersion is recorded in the store once every value carries a tag.
const SealVersion = "hmac-sha256-v1"

// IntegrityKey derives the store-integrity key from the evidence key.
func IntegrityKey(evidenceKey []byte) []byte {
	m := hmac.New(sha256.New, evidenceKey)
	m.Write([]byte("verifierd store integrity v1"))
	return m.Sum(nil)
}

// EvidenceKeyID names an evidence key without revealing it: a keyed digest
// of a fixed label, so the id can be logged, stored and compared.
func EvidenceKeyID(evidenceKey []byte) string {
	m := hmac.New(sha256.New, evidenceKey)
	m.Write([]byte("verifierd evidence key id v1"))
	return "ek_" + hex.EncodeToString(m.Sum(nil)[:8])
}

// Sealer tags and checks stored values under the store-integrity key. A
// nil *Sealer passes values through unchanged (a store opened by a tool or
// a test without a key).
type Sealer struct{ key []byte }

// NewSealer returns a sealer keyed with key (see IntegrityKey).
func NewSealer(key []byte) *Sealer { return &Sealer{key: append([]byte(nil), key...)} }

func (s *Sealer) tag(place string, v []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(place))
	m.Write([]byte{0})
	m.Write(v)
	return m.Sum(nil)
}

// Seal returns v followed by its tag for place.
func (s *Sealer) Seal(place string, v []byte) []byte {
	if s == nil {
		return v
	}
	out := make([]byte, 0, len(v)+MACSize)
	out = append(out, v...)
	return append(out, s.tag(place, v)...)
}

// Open checks the tag at the end of sealed for place and returns the value
// before it (a slice of sealed), or ok false when the tag is missing or
// does not match.
func (s *Sealer) Open(place string, sealed []byte) (v []byte, ok bool) {
	if s == nil {
		return sealed, true
	}
	if len(sealed) < MACSize {
		return nil, false
	}
	v, mac := sealed[:len(sealed)-MACSize], sealed[len(sealed)-MACSize:]
	return v, hmac.Equal(mac, s.tag(place, v))
}

// Strip returns the value before the tag without checking it (a rotation
// re-seals values under a new key it cannot check them with).
func Strip(sealed []byte) []byte {
	if len(sealed) < MACSize {
		return nil
	}
	return sealed[:len(sealed)-MACSize]
}

// The places values are tagged for, the same in every backend, so that a
// sealed value can be copied from one backend to another.

// PlaceSession is a session's record.
func PlaceSession(id string) string { return "session/" + id }

// PlaceResult is a session's first result.
func PlaceResult(id string) string { return "result/" + id }

// PlaceReverification is a session's re-verification number attempt.
func PlaceReverification(id string, attempt int) string {
	return fmt.Sprintf("reverification/%s/%d", id, attempt)
}

// PlaceBaseline is chunk seq of capture capture (a census: CensusCapture)
// of a session's baseline.
func PlaceBaseline(id string, capture int, seq uint64) string {
	return fmt.Sprintf("baseline/%s/%d/%d", id, capture, seq)
}

// PlaceReward is a reward record.
func PlaceReward(b RewardBucket, key string) string { return PlaceRewardNamed(b.String(), key) }

// PlaceRun is a run's record.
func PlaceRun(id string) string { return "run/" + id }

// PlaceRewardNamed is PlaceReward with the bucket by name.
func PlaceRewardNamed(bucket, key string) string { return "reward/" + bucket + "/" + key }

// IntegrityError says that a stored value fails its integrity check: it
// was damaged or altered in the store after it was written. Session is
// empty for a reward record. The gRPC API answers DataLoss.
type IntegrityError struct {
	Session string
	// What names the value: "record", "result", "re-verification 2",
	// "baseline capture 0 chunk 3", or a reward record.
	What string
}

func (e *IntegrityError) Error() string {
	subject := "the stored " + e.What
	if e.Session != "" {
		subject = fmt.Sprintf("session %s: the stored %s", e.Session, e.What)
	}
	return subject + " fails its integrity check (damaged or altered in the store since it was written); it is not served. " +
		"`verifierd store check` lists every damaged session; `verifierd store salvage` copies the sound ones into a fresh store"
}

// Keys are the ids of the keys a daemon writes with: the evidence key
// (EvidenceKeyID) and the receipt signing key (its key id).
type Keys struct {
	EvidenceKeyID string
	SigningKeyID  string
}

// KeyMismatchError refuses a daemon whose keys are not the ones the store
// was first written with.
type KeyMismatchError struct {
	Store      string // where the store is (a file, or server/database)
	Have, Want Keys   // Have: recorded in the store; Want: this daemon's
	// Running: found while this daemon served (KeyWatcher), not at its
	// start: another replica rotated the keys, or they were edited.
	Running bool
}

// KeyWatcher is a store several daemons share (PostgreSQL). RecheckKeys
// reads the key ids the store records again and answers a
// *KeyMismatchError (Running) once they are no longer those this daemon
// bound it with; the daemon then stops serving. Every ledger append checks
// the same in its transaction, so nothing is signed under keys the store
// no longer records.
type KeyWatcher interface {
	RecheckKeys(ctx context.Context) error
}

func (e *KeyMismatchError) Error() string {
	var diff []string
	if e.Have.EvidenceKeyID != e.Want.EvidenceKeyID {
		diff = append(diff, fmt.Sprintf("evidence key %s, but this daemon's is %s", e.Have.EvidenceKeyID, e.Want.EvidenceKeyID))
	}
	if e.Have.SigningKeyID != e.Want.SigningKeyID {
		diff = append(diff, fmt.Sprintf("signing key %s, but this daemon's is %s", e.Have.SigningKeyID, e.Want.SigningKeyID))
	}
	if e.Running {
		return fmt.Sprintf("the store %s now records %s: its keys changed while this daemon ran (another replica rotated them, or the key ids were edited); "+
			"this daemon stops serving: restart it with the store's keys", e.Store, strings.Join(diff, "; and "))
	}
	return fmt.Sprintf("the store %s was first written with %s: every daemon of one store runs with the keys of its first writer, "+
		"unless one deliberately rotates them (docs/operations.md, \"Rotating keys\")",
		e.Store, strings.Join(diff, "; and "))
}

// BindReport says what Bind did.
type BindReport struct {
	// FirstWriter: the store had no key ids yet and now records these.
	FirstWriter bool
	// Sealed counts values written before tags existed that Bind tagged
	// as they stood.
	Sealed int
	// Rotated: the recorded key ids were replaced (--rotate-keys); Resealed
	// counts the values re-tagged under the new evidence key.
	Rotated  bool
	Resealed int
}

// Damage is one value that fails its integrity check.
type Damage struct {
	Session string // empty for a reward record
	What    string
}

// ValueReport is what a check of every stored value found.
type ValueReport struct {
	Keys     Keys // recorded in the store (empty before the first Bind)
	Sealed   bool // every value carries a tag
	Values   int  // values checked
	Unsealed int  // values not checked: the store is not sealed yet
	Damaged  []Damage
	Problem  string // the check could not run (e.g. the wrong evidence key)
	// Ledger is the check of the stored ledger's chain and signed
	// checkpoints (LedgerChecker).
	Ledger LedgerReport
}

// DamagedSessions lists the sessions with at least one damaged value, in
// the order found, each once.
func (r *ValueReport) DamagedSessions() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range r.Damaged {
		if d.Session != "" && !seen[d.Session] {
			seen[d.Session] = true
			out = append(out, d.Session)
		}
	}
	return out
}

// Bad reports whether the check found damage or could not run.
func (r *ValueReport) Bad() bool {
	return len(r.Damaged) > 0 || r.Problem != "" || len(r.Ledger.Problems) > 0
}

// ErrEvidenceKey says that a check or a salvage of a sealed store was not
// given the store's evidence key. A ValueReport's Problem starts with its
// message; the caller says how to pass the key.
var ErrEvidenceKey = errors.New("the store's evidence key is needed")

// CheckSealer is the sealer that checks a store's values under evidenceKey
// for a check or a salvage, given what the store records in rep (Keys,
// Sealed): nil for a store not sealed yet, or nil with rep.Problem set when
// the key is missing or is not the store's.
func CheckSealer(rep *ValueReport, evidenceKey []byte) *Sealer {
	switch {
	case !rep.Sealed:
		return nil
	case evidenceKey == nil:
		rep.Problem = ErrEvidenceKey.Error() + ": the store's values carry tags keyed by it, and none was given"
	case EvidenceKeyID(evidenceKey) != rep.Keys.EvidenceKeyID:
		rep.Problem = fmt.Sprintf("%v: the evidence key given (%s) is not the store's (%s)", ErrEvidenceKey, EvidenceKeyID(evidenceKey), rep.Keys.EvidenceKeyID)
	default:
		return NewSealer(IntegrityKey(evidenceKey))
	}
	return nil
}

// Check counts one value into the report: unsealed, sound or damaged.
func (r *ValueReport) Check(seal *Sealer, place string, d Damage, v []byte) {
	if seal == nil {
		r.Unsealed++
		return
	}
	r.Values++
	if _, ok := seal.Open(place, v); !ok {
		r.Damaged = append(r.Damaged, d)
	}
}

// CheckKeys compares the key ids recorded in a store (have) with this
// daemon's (want): equal is fine; different is a *KeyMismatchError unless
// rotate, when the caller records want instead.
func CheckKeys(where string, have, want Keys, rotate bool) (rotated bool, err error) {
	if have == want {
		return false, nil
	}
	if !rotate {
		return false, &KeyMismatchError{Store: where, Have: have, Want: want}
	}
	return true, nil
}
