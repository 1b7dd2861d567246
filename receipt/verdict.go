package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"
)

// Kinds of a verdict receipt (VerdictPayload.Kind), beside
// KindBeginRefused.
const (
	// KindVerify is the receipt of a session's first Verify.
	KindVerify = "verify"
	// KindReverify is the receipt of a Reverify.
	KindReverify = "reverify"
)

// VerdictPayload is the payload of a verdict receipt (PayloadTypeVerdict):
// the signed answer about one session's step. It holds no record value,
// parameter value or secret: contracts by hash, evidence and reads by keyed
// digest ("hmac-sha256:…", under the daemon's evidence key).
type VerdictPayload struct {
	// Kind is KindVerify, KindReverify or KindBeginRefused.
	Kind string `json:"kind"`
	// SessionID is the session judged (absent for a refused Begin, which
	// opened none).
	SessionID string `json:"session_id,omitempty"`
	// Deployment is the deployment the session was judged through.
	Deployment DeploymentRef `json:"deployment"`
	// Workflow is the reviewed workflow step the session was begun as
	// (absent for a session begun from inline contracts).
	Workflow *WorkflowRef `json:"workflow,omitempty"`
	// Attempt is 0 for the first Verify, n for the nth Reverify.
	Attempt int `json:"attempt"`
	// ReverifyReasonDigest is the SHA-256 of the operator's reason text
	// (reverify only).
	ReverifyReasonDigest string `json:"reverify_reason_digest,omitempty"`
	// Outcome is the judged outcome (VERIFIED, HALTED_BEFORE_EFFECT or
	// RECONCILIATION_REQUIRED; absent for a refused Begin).
	Outcome string `json:"outcome,omitempty"`
	// TerminalOutcome is what the ledger records: Outcome, or
	// REJECTED_POLICY (a refused Begin) or FAILED_PLATFORM (the daemon or
	// an adapter process failed, not the system of record).
	TerminalOutcome string `json:"terminal_outcome"`
	// Effects are the verdicts per effect, in the contract's order.
	Effects []EffectClaim `json:"effects"`
	// Baseline and After are, per pinned adapter, the read Begin stored
	// and the read Verify judged.
	Baseline []ReadDigest `json:"baseline_reads"`
	After    []ReadDigest `json:"after_reads"`
	// Census is, per pinned adapter, its census reads (null for an
	// adapter without a census); absent when no adapter has one.
	Census []*CensusReads `json:"census_reads,omitempty"`
	// Refusal (begin_refused only): the path and code of the refusal and
	// the keyed digest of its message.
	Refusal *RefusalClaim `json:"refusal,omitempty"`
	// Run binds a step of a run: the run id, the step, the keyed digests
	// of its handed-off values and the exact digests of the artifacts it
	// consumed (absent outside a run).
	Run *RunBinding `json:"run,omitempty"`
	// EvidenceDigest names the algorithm of the keyed digests
	// ("hmac-sha256").
	EvidenceDigest string `json:"evidence_digest"`
	// IssuedAt is when the receipt was signed.
	IssuedAt time.Time `json:"issued_at"`
	// Ledger is where the receipt entry recording this payload's digest
	// was appended.
	Ledger Position `json:"ledger"`
	// Signer is the key that signed the receipt.
	Signer Signer `json:"signer"`
}

// DeploymentRef names the deployment a verdict or artifact receipt was
// judged through.
type DeploymentRef struct {
	// Name is the registered deployment's name (absent for one sent
	// inline).
	Name string `json:"name,omitempty"`
	// Digest is the sha256: digest of the deployment's configuration as
	// the session pinned it.
	Digest string `json:"digest"`
}

// WorkflowRef names the reviewed workflow step a session was begun as.
type WorkflowRef struct {
	// Name is the workflow's name.
	Name string `json:"name"`
	// Digest is the sha256: digest of the reviewed workflow.
	Digest string `json:"digest"`
	// Step is the step's name in the workflow.
	Step string `json:"step"`
}

// EffectClaim is one effect's verdict as a verdict receipt binds it.
type EffectClaim struct {
	// Index is the effect's position in the contract.
	Index int `json:"index"`
	// ContractHash is the digest of the effect's contract.
	ContractHash string `json:"contract_hash"`
	// Verdict is CONFIRMED, REFUTED or INDETERMINATE.
	Verdict string `json:"verdict"`
	// Result names what the judge found (the effect result's kind).
	Result string `json:"result"`
	// Tier is the read's tier (1 strongest; 0 when no read was made) and
	// OracleRung its rung of the oracle ladder.
	Tier       int `json:"tier"`
	OracleRung int `json:"oracle_rung"`
	// Substrate is the kind of adapter that read the system of record.
	Substrate string `json:"substrate"`
	// ReasonCodes say why the verdict is not CONFIRMED, or qualify it.
	ReasonCodes []string `json:"reason_codes"`
	// ObservedCount is how many matching records the after read held
	// (null when it could not be counted).
	ObservedCount *int `json:"observed_count"`
	// EvidenceDigests are the keyed digests of the matched records'
	// canonical JSON.
	EvidenceDigests []string `json:"evidence_digests"`
	// ReconciliationTask is the id of the reconciliation task the verdict
	// opened, if any.
	ReconciliationTask string `json:"reconciliation_task,omitempty"`
	// Newness is how the read proved a record new ("census", "write_set",
	// …), CensusScope whether its census was proven whole or declared, and
	// CollateralScope what its loss checks could see; absent in receipts
	// issued before them.
	Newness         string `json:"newness,omitempty"`
	CensusScope     string `json:"census_scope,omitempty"`
	CollateralScope string `json:"collateral_scope,omitempty"`
	// WriteSet is the write set the effect was judged on (absent without
	// changes:).
	WriteSet *WriteSetSpan `json:"write_set,omitempty"`
}

// ReadDigest names one read by a keyed digest over its records' canonical
// JSON, in read order, one line each.
type ReadDigest struct {
	// Reachable is false when the system of record could not be read.
	Reachable bool `json:"reachable"`
	// Records is how many records the read held.
	Records int `json:"records"`
	// Digest is the keyed digest (absent for an unreachable read).
	Digest string `json:"digest,omitempty"`
}

// CensusReads are a census's reads as a receipt binds them: the one Begin
// stored and the last one beside the after read.
type CensusReads struct {
	Before ReadDigest `json:"before"`
	After  ReadDigest `json:"after"`
}

// WriteSetSpan is the change-log span an effect was judged on: the source,
// the log positions it spans, how many changes it held, and whether the
// log could be read and was complete. Verdict and run receipts carry it
// alike.
type WriteSetSpan struct {
	// Source names the change log.
	Source string `json:"source"`
	// From is the log position Begin held; To the last position read
	// (absent when nothing was read).
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	// Changes is how many changes the span held.
	Changes int `json:"changes"`
	// Reachable is false when the log could not be read; Complete false
	// when the span may miss changes (a change claim is then never
	// CONFIRMED).
	Reachable bool `json:"reachable"`
	Complete  bool `json:"complete"`
}

// RunBinding is what a session of a run records and its verdict receipt
// binds: the run, the step, the values handed to it (by keyed digest) and
// the exact artifacts it consumed.
type RunBinding struct {
	RunID    string          `json:"run_id"`
	Step     string          `json:"step"`
	Handoffs []HandoffBound  `json:"handoffs,omitempty"`
	Consumed []ConsumedBound `json:"consumed,omitempty"`
}

// HandoffBound is one handed-off value: where it came from and its keyed
// digest (the value itself is never in a receipt).
type HandoffBound struct {
	// Param is the parameter of the step that received the value.
	Param string `json:"param"`
	// FromStep and FromSession are the step and session that produced
	// it; Effect and Field where in that session's result it was read.
	FromStep    string `json:"from_step"`
	FromSession string `json:"from_session"`
	Effect      int    `json:"effect"`
	Field       string `json:"field"`
	// ValueDigest is the keyed digest of the value's canonical JSON.
	ValueDigest string `json:"value_digest"`
}

// ConsumedBound is one artifact a step consumed: the exact digest and size
// CONFIRMED in the run and that verification's receipt digest.
type ConsumedBound struct {
	// Artifact is the artifact's name in the workflow.
	Artifact string `json:"artifact"`
	// SHA256 (hex) and Size are the exact content confirmed.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// ReceiptDigest is the sha256: digest of the artifact verification
	// receipt envelope.
	ReceiptDigest string `json:"receipt_digest"`
}

// PayloadTypeError is an envelope whose payload type is not the one the
// opener reads (OpenVerdict, OpenArtifact, OpenRewardReceipt,
// OpenRewardCertificate; OpenRun answers *RunPayloadTypeError).
type PayloadTypeError struct {
	Got  string
	Want string
}

func (e *PayloadTypeError) Error() string {
	return fmt.Sprintf("the envelope's payload type is %q, not %s", e.Got, e.Want)
}

// openAs checks env's signature by pub and its payload type, and decodes
// the signed payload into v (what names the payload in errors).
func (env *Envelope) openAs(pub ed25519.PublicKey, payloadType, what string, v any) ([]byte, error) {
	payload, err := env.Open(pub)
	if err != nil {
		return nil, err
	}
	if env.PayloadType != payloadType {
		return nil, &PayloadTypeError{Got: env.PayloadType, Want: payloadType}
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return nil, fmt.Errorf("the signed payload is not %s: %v", what, err)
	}
	return payload, nil
}

// OpenVerdict checks a verdict receipt offline: a valid signature by pub
// (see Open), the verdict receipt's payload type (a *PayloadTypeError when
// not), and that the signed payload is about the expected subject (see
// CheckSubject; a *SubjectError when not). It returns the decoded payload.
func (env *Envelope) OpenVerdict(pub ed25519.PublicKey, want Expect) (*VerdictPayload, error) {
	var p VerdictPayload
	payload, err := env.openAs(pub, PayloadTypeVerdict, "a verdict receipt", &p)
	if err != nil {
		return nil, err
	}
	if p.Kind == "" {
		return nil, fmt.Errorf("the signed payload names no kind")
	}
	if err := CheckSubject(payload, want); err != nil {
		return nil, err
	}
	return &p, nil
}
