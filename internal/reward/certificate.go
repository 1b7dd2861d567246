package reward

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/verifierd/verifierd/receipt"
)

// Certificate is a signed calibration result for one contract: the
// signed payload and its digest.
type Certificate struct {
	receipt.RewardCertificatePayload

	// Digest is "sha256:" over the signed payload.
	Digest string `json:"-"`
}

// State is the certificate's state at policy update u: a certificate
// issued at update i with expiry n covers updates i to i+n−1.
func (c *Certificate) State(u int64) string {
	switch {
	case c == nil:
		return CertAbsent
	case u < c.IssuedAtPolicyUpdate:
		return CertNotYetValid
	case u-c.IssuedAtPolicyUpdate >= c.ExpiryPolicyUpdates:
		return CertExpired
	}
	return CertCurrent
}

// Certificate states at an episode's policy update, as State reports them.
const (
	CertAbsent      = "absent"
	CertNotYetValid = "not_yet_valid"
	CertExpired     = "expired"
	CertCurrent     = "current"
)

// Payload types of the reward envelopes.
const (
	PayloadTypeCertificate = receipt.PayloadTypeRewardCertificate
	PayloadTypeReceipt     = receipt.PayloadTypeRewardReceipt
	CertificateSchema      = "verifierd.reward-certificate/v1"
)

// NewCertificate builds the certificate of a calibration for c.
func NewCertificate(c *Contract, cal *Calibration, keyID string, now time.Time) *Certificate {
	cert := &Certificate{RewardCertificatePayload: receipt.RewardCertificatePayload{
		Schema: CertificateSchema, RewardContractDigest: c.Digest, CalibrationCorpusDigest: cal.CorpusDigest,
		Epsilon: cal.Epsilon, Delta: cal.Delta, Threshold: 0.5, Trials: cal.Trials, FalseAccepts: cal.FalseAccepts,
		FaultClasses: cal.ClassesPlaced, ExpiryPolicyUpdates: 1000, Scope: "synthetic", Issuer: "self_signed",
		IssuerKeyID: keyID, IssuedAt: now.UTC().Truncate(time.Second),
	}}
	if p := c.CertificatePolicy; p != nil {
		cert.Threshold, cert.ExpiryPolicyUpdates = p.Threshold, p.ExpiryPolicyUpdates
	}
	sum := sha256.Sum256([]byte(c.Digest + "\n" + cal.CorpusDigest + "\n" + cert.IssuedAt.Format(time.RFC3339)))
	cert.CertificateID = "rcert_" + hex.EncodeToString(sum[:16])
	return cert
}

// Signer signs a payload into a DSSE envelope (internal/signing.Signer).
type Signer interface {
	Sign(payloadType string, payload []byte) *receipt.Envelope
	KeyID() string
	PublicKey() ed25519.PublicKey
}

// SignCertificate returns certificate.json: the DSSE envelope's JSON.
func SignCertificate(s Signer, cert *Certificate) ([]byte, error) {
	payload, err := json.Marshal(cert.RewardCertificatePayload)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(s.Sign(PayloadTypeCertificate, payload), "", "  ")
}

func checkCertificate(raw []byte, c *Contract, trust Trust) (*Certificate, error) {
	bad := func(rule, format string, args ...any) error {
		return refuseIn("", rule, format, args...)
	}
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		return nil, bad(RuleCertificateInvalid, "%v", err)
	}
	if env.PayloadType != PayloadTypeCertificate {
		return nil, bad(RuleCertificateInvalid, "payloadType must be %s", PayloadTypeCertificate)
	}
	var payload []byte
	for _, s := range env.Signatures {
		pub, ok := trust.Keys[s.KeyID]
		if !ok {
			continue
		}
		if p, err := env.Open(ed25519.PublicKey(pub)); err == nil {
			payload = p
			break
		}
	}
	if payload == nil {
		return nil, bad(RuleCertificateUntrust, "no signature verifies against the daemon's key or a key listed under rewards_trust; recalibrate with this daemon or add the issuer's public key to rewards_trust")
	}
	var cert Certificate
	if err := json.Unmarshal(payload, &cert); err != nil {
		return nil, bad(RuleCertificateInvalid, "payload: %v", err)
	}
	sum := sha256.Sum256(payload)
	cert.Digest = "sha256:" + hex.EncodeToString(sum[:])
	switch {
	case cert.Schema != CertificateSchema:
		return nil, bad(RuleCertificateInvalid, "schema must be %q", CertificateSchema)
	case cert.RewardContractDigest != c.Digest:
		return nil, bad(RuleCertificateDigest, "the certificate is for contract %s, this contract's digest is %s; calibrate this contract", cert.RewardContractDigest, c.Digest)
	case cert.CalibrationCorpusDigest != c.CorpusDigest:
		return nil, bad(RuleCertificateCorpus, "the certificate's corpus %s differs from the corpus derived from this contract (%s)", cert.CalibrationCorpusDigest, c.CorpusDigest)
	case !(cert.Epsilon > 0 && cert.Epsilon < 1) || cert.ExpiryPolicyUpdates < 1 || cert.IssuedAtPolicyUpdate < 0:
		return nil, bad(RuleCertificateInvalid, "epsilon must be in (0, 1), expiry_policy_updates ≥ 1, issued_at_policy_update ≥ 0")
	}
	return &cert, nil
}
