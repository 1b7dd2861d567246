package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"
)

// PayloadTypeRun is the payload type of a run receipt: the signed terminal
// answer about a whole run of a workflow.
const PayloadTypeRun = "application/vnd.verifierd.run-receipt.v1+json"

// RunPayload is the payload of a run receipt (PayloadTypeRun). Like a
// verdict receipt it holds no parameter or record value: the run's
// parameters and each handoff value appear only as keyed digests
// ("hmac-sha256:…", under the daemon's evidence key).
type RunPayload struct {
	Kind       string        `json:"kind"` // "run_finish" or "rollback_check"
	RunID      string        `json:"run_id"`
	Workflow   RunWorkflow   `json:"workflow"`
	Deployment RunDeployment `json:"deployment"`
	// ParamsDigest is the keyed digest of the run parameters' canonical
	// JSON.
	ParamsDigest string `json:"params_digest"`
	// Outcome is the run classifier's answer: VERIFIED,
	// HALTED_BEFORE_EFFECT, REJECTED_POLICY, FAILED_PLATFORM,
	// RECONCILIATION_REQUIRED or ROLLED_BACK_VERIFIED.
	Outcome string `json:"outcome"`
	// ReasonCodes say why the outcome is not VERIFIED (empty when it is).
	ReasonCodes []string `json:"reason_codes"`
	// Attempt counts the seals of the run: 1 for the first.
	Attempt int `json:"attempt"`
	// Tier is the weakest tier of the run's steps (internal tiers, 1
	// strongest; 0 when no step has a result); OracleRung the lowest rung.
	Tier       int `json:"tier"`
	OracleRung int `json:"oracle_rung"`
	// RunMinTier is the floor the classifier applied (policy.run_min_tier).
	RunMinTier int `json:"run_min_tier"`
	// RunMinRung is the oracle-rung floor the classifier applied
	// (policy.run_min_rung; 2 unless the workflow's policy lowered it).
	RunMinRung int                `json:"run_min_rung"`
	Steps      []RunStepClaim     `json:"steps"`
	Artifacts  []RunArtifactClaim `json:"artifacts"`
	Handoffs   []RunHandoffClaim  `json:"handoffs"`
	// EvidenceDigest names the algorithm of the keyed digests.
	EvidenceDigest string    `json:"evidence_digest"`
	IssuedAt       time.Time `json:"issued_at"`
	// Ledger is where the run_sealed entry recording this payload's
	// digest was appended.
	Ledger Position  `json:"ledger"`
	Signer RunSigner `json:"signer"`
}

// RunWorkflow names the reviewed workflow a run followed.
type RunWorkflow struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// RunDeployment names the deployment a run was judged through.
type RunDeployment struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// RunSigner is the public key that signed a run receipt (base64 of its raw
// bytes) and its key id.
type RunSigner struct {
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
}

// RunStepClaim is one workflow step as the run receipt binds it.
type RunStepClaim struct {
	Step          string `json:"step"`
	Consequential bool   `json:"consequential"`
	// SessionID is the step's latest session in the run ("" when the
	// step never began).
	SessionID string `json:"session_id"`
	// ReceiptDigest is the sha256: digest of the session's latest
	// verdict receipt envelope.
	ReceiptDigest string `json:"receipt_digest"`
	Outcome       string `json:"outcome"`
	Tier          int    `json:"tier"`
	OracleRung    int    `json:"oracle_rung"`
	// Effects say, per effect of the session's latest result, how it
	// proved a record new and, for an effect judged on the write set
	// (a candidate with changes:), the log span it read. Absent for a
	// step without a result, and in receipts issued before it existed.
	Effects []RunEffectClaim `json:"effects,omitempty"`
}

// RunEffectClaim is what one effect of a step's latest result rested on.
type RunEffectClaim struct {
	Index int `json:"index"`
	// Newness is how the effect proved a record new ("census",
	// "write_set", …; "" for a contract that claims no change).
	Newness string `json:"newness,omitempty"`
	// WriteSet is the write set the effect was judged on (nil without
	// changes:).
	WriteSet *WriteSetSpan `json:"write_set,omitempty"`
}

// RunArtifactClaim is one artifact edge of the run.
type RunArtifactClaim struct {
	Artifact string `json:"artifact"`
	FromStep string `json:"from_step"`
	// Verdict is the latest VerifyArtifact verdict in the run ("" when
	// never checked).
	Verdict string `json:"verdict"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	// ReceiptDigest is the sha256: digest of the artifact verification
	// receipt envelope.
	ReceiptDigest string `json:"receipt_digest"`
}

// RunHandoffClaim is one value a step received from an earlier step.
type RunHandoffClaim struct {
	Step     string `json:"step"`
	Param    string `json:"param"`
	FromStep string `json:"from_step"`
	Effect   int    `json:"effect"`
	Field    string `json:"field"`
	// ValueDigest is the keyed digest of the value's canonical JSON.
	ValueDigest string `json:"value_digest"`
}

// RunPayloadTypeError is an envelope that is not a run receipt.
type RunPayloadTypeError struct {
	Got string
}

func (e *RunPayloadTypeError) Error() string {
	return fmt.Sprintf("the envelope's payload type is %q, not a run receipt (%s)", e.Got, PayloadTypeRun)
}

// OpenRun checks a run receipt offline: a valid signature by pub (see
// Open), the run receipt's payload type, and, unless expectRun is empty,
// that the signed payload is about run expectRun (a *SubjectError with
// Field "run" when not). It returns the decoded payload.
func (env *Envelope) OpenRun(pub ed25519.PublicKey, expectRun string) (*RunPayload, error) {
	payload, err := env.Open(pub)
	if err != nil {
		return nil, err
	}
	if env.PayloadType != PayloadTypeRun {
		return nil, &RunPayloadTypeError{Got: env.PayloadType}
	}
	var p RunPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("the signed payload is not a run receipt: %v", err)
	}
	if p.RunID == "" {
		return nil, fmt.Errorf("the signed payload names no run_id")
	}
	if expectRun != "" && p.RunID != expectRun {
		return nil, &SubjectError{Field: "run", Path: "run_id", Want: expectRun, Got: p.RunID}
	}
	return &p, nil
}
