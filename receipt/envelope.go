package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Payload types of verifierd's envelopes: every signed payload's type is
// named here (PayloadTypeRun and PayloadTypeCheckpoint beside their
// formats).
const (
	PayloadTypeVerdict  = "application/vnd.verifierd.verdict-receipt.v1+json"
	PayloadTypeArtifact = "application/vnd.verifierd.artifact-verification.v1+json"
	// PayloadTypeRewardCertificate is a reward contract's calibration
	// certificate; PayloadTypeRewardReceipt an episode's reward receipt.
	PayloadTypeRewardCertificate = "application/vnd.verifierd.reward-certificate.v1+json"
	PayloadTypeRewardReceipt     = "application/vnd.verifierd.reward-receipt.v1+json"
)

// RefusalClaim is what the receipt of a refused Begin (KindBeginRefused)
// says about the refusal: its path and code, and the keyed digest of its
// message (never the message, which may quote an input).
type RefusalClaim struct {
	Path          string `json:"path,omitempty"`
	Code          string `json:"code,omitempty"`
	MessageDigest string `json:"message_digest"`
}

// Envelope is a DSSE envelope: the payload (base64 in JSON) with its type and
// one or more signatures over PAE(payloadType, payload).
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     []byte      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one DSSE signature; Sig is base64 in JSON.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   []byte `json:"sig"`
}

// PAE is DSSE's pre-authentication encoding: what a signature covers, so
// that a payload can never be re-read under another type.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	b = append(b, payload...)
	return b
}

// KeyID names a public key: "sha256:" and the hex SHA-256 of its raw 32 bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Sign wraps payload in an envelope signed by priv.
func Sign(priv ed25519.PrivateKey, payloadType string, payload []byte) *Envelope {
	pub, _ := priv.Public().(ed25519.PublicKey)
	return &Envelope{
		PayloadType: payloadType,
		Payload:     payload,
		Signatures:  []Signature{{KeyID: KeyID(pub), Sig: ed25519.Sign(priv, PAE(payloadType, payload))}},
	}
}

// Errors of Open, to tell a wrong key from a broken envelope.
var (
	ErrNoSignature  = errors.New("no signature by the given key")
	ErrBadSignature = errors.New("the signature does not match the payload")
)

// Open checks that env carries a valid signature by pub over its payload and
// type, and returns the payload. It refuses an envelope whose only
// signatures are by other keys (ErrNoSignature), one whose signature by
// pub does not verify (ErrBadSignature): a changed payload, type or
// signature, and a signed payload that holds a key twice
// (*DuplicateKeyError).
func (env *Envelope) Open(pub ed25519.PublicKey) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the public key has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	id := KeyID(pub)
	found := false
	for _, s := range env.Signatures {
		if s.KeyID != "" && s.KeyID != id {
			continue
		}
		found = true
		if ed25519.Verify(pub, PAE(env.PayloadType, env.Payload), s.Sig) {
			if err := CheckKeys(env.Payload, "the signed payload"); err != nil {
				return nil, err
			}
			return env.Payload, nil
		}
	}
	if !found {
		return nil, fmt.Errorf("%w %s", ErrNoSignature, id)
	}
	return nil, ErrBadSignature
}

// ParseEnvelope reads an envelope's JSON. It refuses, with a
// *DuplicateKeyError, an envelope or payload that holds a key twice in an
// object at any depth, the keys compared without regard to case
// ("payload" and "Payload"): other readers would take the other value.
func ParseEnvelope(data []byte) (*Envelope, error) {
	if err := CheckKeys(data, "the envelope"); err != nil {
		return nil, err
	}
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType == "" || len(env.Signatures) == 0 {
		return nil, errors.New("not a DSSE envelope: it needs payloadType, payload and signatures")
	}
	if err := CheckKeys(env.Payload, "the envelope's payload"); err != nil {
		return nil, err
	}
	return &env, nil
}

// ParsePublicKey reads a public key written as base64 of its raw 32 bytes
// (what `verifyctl key` prints).
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("a public key is the base64 of its 32 raw bytes")
	}
	return ed25519.PublicKey(raw), nil
}
