package receipt

import (
	"crypto/ed25519"
	"time"
)

// RewardReceiptPayload is the payload of an episode's reward receipt
// (PayloadTypeRewardReceipt; docs/rewards.md). It carries digests, never a
// record value or the subject's identity.
type RewardReceiptPayload struct {
	// Schema is "verifierd.reward-receipt/v1".
	Schema string `json:"schema"`
	// ReceiptID is "rwd_" and 32 hex digits.
	ReceiptID string `json:"receipt_id"`
	// Contract, ContractID, ContractVersion and RewardContractDigest name
	// the reward contract that scored the episode.
	Contract             string `json:"contract"`
	ContractID           string `json:"contract_id"`
	ContractVersion      string `json:"contract_version"`
	RewardContractDigest string `json:"reward_contract_digest"`
	// EpisodeID, PolicyCheckpointID and PolicyUpdate are the trainer's
	// descriptor's.
	EpisodeID          string `json:"episode_id"`
	PolicyCheckpointID string `json:"policy_checkpoint_id"`
	PolicyUpdate       int64  `json:"policy_update"`
	// Deployment is the contract's deployment.
	Deployment string `json:"deployment"`
	// OracleKind, OracleTier and OracleRung are the pinned oracle's
	// adapter kind, tier and rung of the oracle ladder.
	OracleKind string `json:"oracle_kind"`
	OracleTier int    `json:"oracle_tier"`
	OracleRung int    `json:"oracle_rung"`
	// OracleCandidate is the pinned candidate's index in the deployment
	// (null when there is none).
	OracleCandidate *int `json:"oracle_candidate"`
	// OracleConfigDigest is a keyed digest of the pinned candidate's
	// configuration digest.
	OracleConfigDigest string `json:"oracle_config_digest,omitempty"`
	// Newness is how the oracle candidate proves a record new (census,
	// whole_read, newly_matching), as session results record it.
	Newness string `json:"newness,omitempty"`
	// RuntimeSignal is what the trainer said of the episode (an input
	// only: the read decides).
	RuntimeSignal string `json:"runtime_signal"`
	// RewardOutcome is the judged outcome and Uncertainty what kept it
	// from being certain ("none" when nothing did); ReasonCode names the
	// cause of an uncertain or failed outcome.
	RewardOutcome string `json:"reward_outcome"`
	Uncertainty   string `json:"uncertainty"`
	ReasonCode    string `json:"reason_code,omitempty"`
	// ScalarReward is the reward (null when unscored); Unscored is true
	// when the contract scores no reward for this outcome.
	ScalarReward *float64 `json:"scalar_reward"`
	Unscored     bool     `json:"unscored"`
	// Components split the scalar by the contract's weights.
	Components []RewardComponent `json:"reward_components"`
	// Verdicts are the required and forbidden effects' verdicts.
	Verdicts []RewardVerdict `json:"verdicts"`
	// CertificateID and CertificateDigest name the contract's calibration
	// certificate (absent without one); CertificateState is its state at
	// the episode's policy update (absent, not_yet_valid, expired,
	// current); CorpusDigest, CalibrationScope and Epsilon are the
	// certificate's.
	CertificateID     string   `json:"certificate_id,omitempty"`
	CertificateDigest string   `json:"certificate_digest,omitempty"`
	CertificateState  string   `json:"certificate_state"`
	CorpusDigest      string   `json:"calibration_corpus_digest,omitempty"`
	CalibrationScope  string   `json:"calibration_scope,omitempty"`
	Epsilon           *float64 `json:"epsilon,omitempty"`
	// Certified is true only for a scored reward read at rung 2 or above
	// under a current certificate the contract satisfies.
	Certified bool `json:"certified"`
	// DevelopmentOnly is true when the oracle's rung is below 2.
	DevelopmentOnly bool `json:"development_only"`
	// SubjectDigest is the keyed digest of the subject's identity and
	// EvidenceDigest that of the matched records.
	SubjectDigest  string `json:"subject_digest"`
	EvidenceDigest string `json:"evidence_digest"`
	// BaselineReachable is whether the baseline read at registration
	// reached the system of record.
	BaselineReachable bool `json:"baseline_reachable"`
	// IssuedAt is when the receipt was signed, IssuerKeyID the key that
	// signed it, and Nonce a random value that makes it unique.
	IssuedAt    time.Time `json:"issued_at"`
	IssuerKeyID string    `json:"issuer_key_id"`
	Nonce       string    `json:"nonce"`
	// Ledger is where the reward entry recording this payload's digest
	// was appended.
	Ledger Position `json:"ledger"`
}

// RewardComponent is one component's share of a reward's scalar: value =
// scalar × weight ÷ Σ weights.
type RewardComponent struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	Value  float64 `json:"value"`
}

// RewardVerdict is one effect's judgement as a reward receipt states it:
// no values.
type RewardVerdict struct {
	// Effect is "required[i]" or "forbidden[i]".
	Effect string `json:"effect"`
	// ContractHash is the digest of the effect's contract.
	ContractHash string `json:"contract_hash"`
	// Decision is CONFIRMED, REFUTED or INDETERMINATE.
	Decision string `json:"decision"`
	// Reasons are the verdict's reason codes.
	Reasons []string `json:"reason_codes"`
}

// RewardCertificatePayload is the payload of a reward contract's
// calibration certificate (PayloadTypeRewardCertificate;
// docs/rewards.md): the daemon's word that the contract's oracle falsely
// accepted at most Epsilon of the calibration corpus's planted faults.
type RewardCertificatePayload struct {
	// Schema is "verifierd.reward-certificate/v1".
	Schema string `json:"schema"`
	// CertificateID is "rcert_" and 32 hex digits.
	CertificateID string `json:"certificate_id"`
	// RewardContractDigest and CalibrationCorpusDigest name the contract
	// and the corpus it was calibrated on.
	RewardContractDigest    string `json:"reward_contract_digest"`
	CalibrationCorpusDigest string `json:"calibration_corpus_digest"`
	// Epsilon is the bound on the false-accept rate at confidence 1 −
	// Delta; Threshold is carried from the contract's
	// certificate_policy (the judge never uses it).
	Epsilon   float64 `json:"epsilon"`
	Delta     float64 `json:"delta"`
	Threshold float64 `json:"threshold"`
	// Trials and FalseAccepts are the calibration's counts.
	Trials       int `json:"trials"`
	FalseAccepts int `json:"false_accepts"`
	// FaultClasses are the fault classes sampled.
	FaultClasses []string `json:"fault_classes"`
	// IssuedAtPolicyUpdate is the contract's policy-update high-water mark
	// when it was calibrated; the certificate covers updates
	// IssuedAtPolicyUpdate to IssuedAtPolicyUpdate+ExpiryPolicyUpdates−1.
	IssuedAtPolicyUpdate int64 `json:"issued_at_policy_update"`
	ExpiryPolicyUpdates  int64 `json:"expiry_policy_updates"`
	// Scope is "synthetic" and Issuer "self_signed" for a certificate the
	// daemon calibrated itself; IssuerKeyID is the key that signed it.
	Scope       string `json:"scope"`
	Issuer      string `json:"issuer"`
	IssuerKeyID string `json:"issuer_key_id"`
	// IssuedAt is when it was signed (whole seconds).
	IssuedAt time.Time `json:"issued_at"`
}

// OpenRewardReceipt checks a reward receipt offline: a valid signature by
// pub (see Open) and the reward receipt's payload type (a
// *PayloadTypeError when not). It returns the decoded payload.
func (env *Envelope) OpenRewardReceipt(pub ed25519.PublicKey) (*RewardReceiptPayload, error) {
	var p RewardReceiptPayload
	if _, err := env.openAs(pub, PayloadTypeRewardReceipt, "a reward receipt", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// OpenRewardCertificate checks a reward certificate offline: a valid
// signature by pub (see Open) and the reward certificate's payload type (a
// *PayloadTypeError when not). It returns the decoded payload.
func (env *Envelope) OpenRewardCertificate(pub ed25519.PublicKey) (*RewardCertificatePayload, error) {
	var p RewardCertificatePayload
	if _, err := env.openAs(pub, PayloadTypeRewardCertificate, "a reward certificate", &p); err != nil {
		return nil, err
	}
	return &p, nil
}
