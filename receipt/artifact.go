package receipt

import (
	"crypto/ed25519"
	"time"
)

// ArtifactPayload is the payload of an artifact verification receipt
// (PayloadTypeArtifact): the signed answer whether a registered
// document-hash or file deployment holds exactly the artifact's content
// under its name.
type ArtifactPayload struct {
	// Deployment is the registered deployment read.
	Deployment DeploymentRef `json:"deployment"`
	// Artifact is the artifact asked about.
	Artifact Artifact `json:"artifact"`
	// Verdict is CONFIRMED (that name holds exactly this content),
	// REFUTED (other bytes, or no file of that name) or INDETERMINATE
	// (the store could not be read).
	Verdict string `json:"verdict"`
	// Reasons are the reason codes of the verdict.
	Reasons []string `json:"reason_codes"`
	// Tier is the read's tier (0 when no read was made) and OracleRung its
	// rung of the oracle ladder.
	Tier       int `json:"tier"`
	OracleRung int `json:"oracle_rung"`
	// Substrate is the kind of adapter that read the store.
	Substrate string `json:"substrate"`
	// Read is the keyed digest of the read.
	Read ReadDigest `json:"read"`
	// IssuedAt is when the receipt was signed.
	IssuedAt time.Time `json:"issued_at"`
	// Ledger is where the receipt entry recording this payload's digest
	// was appended.
	Ledger Position `json:"ledger"`
	// Signer is the key that signed the receipt.
	Signer Signer `json:"signer"`
}

// Artifact names one exact file by content: the digest and size decide;
// the name says where to look; the media type is recorded.
type Artifact struct {
	// SHA256 is the hex SHA-256 of the content (64 digits).
	SHA256 string `json:"sha256"`
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// MediaType is recorded, never checked.
	MediaType string `json:"media_type,omitempty"`
	// Name is the file name (no folder) under the deployment's root.
	Name string `json:"name"`
}

// OpenArtifact checks an artifact verification receipt offline: a valid
// signature by pub (see Open) and the artifact receipt's payload type (a
// *PayloadTypeError when not). It returns the decoded payload.
func (env *Envelope) OpenArtifact(pub ed25519.PublicKey) (*ArtifactPayload, error) {
	var p ArtifactPayload
	if _, err := env.openAs(pub, PayloadTypeArtifact, "an artifact verification receipt", &p); err != nil {
		return nil, err
	}
	return &p, nil
}
