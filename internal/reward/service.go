package reward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/keyed"
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// ReceiptSchema is the schema of a reward receipt's payload.
const ReceiptSchema = "verifierd.reward-receipt/v1"

// OracleRead is one read of the contract's deployment.
type OracleRead struct {
	Snapshot judge.Snapshot
	// Tier is the selected adapter's (GetInfo), 0 when no adapter could be
	// configured; Kind is its kind.
	Tier int
	Kind string
	// Pin is the candidate the read went to (nil when none could be
	// selected). A registration stores it with the baseline.
	Pin *OraclePin
	// Code is the reason code of an unusable read: ReasonOracleChanged,
	// ReasonOracleUnavailable, or empty for an unreachable store
	// (SOR_UNREACHABLE).
	Code string
	// Census is the read candidate's census (the identities of the whole
	// collection), read beside the snapshot; nil when the candidate
	// declares none.
	Census *judge.Snapshot
	// AbsenceNotProof: the read adapter's surface can hide records
	// (sdk.Info), so a refutation classes as conflicting.
	AbsenceNotProof bool
	// WriteSet, on a scoring read through a candidate with changes:, is
	// the write set from the pin's WriteSetFrom up to the log's position
	// after the read (an unreadable one included); nil otherwise.
	WriteSet *judge.WriteSet
	// Refused, on a registration's read, is why the daemon's policy
	// refuses to judge through the selected candidate
	// (require_proven_newness): nothing was read, and the episode is not
	// registered.
	Refused error
}

// OraclePin names the deployment candidate that read an episode's
// baseline: its position in the deployment, its adapter kind and tier, and
// a digest of its configuration as the deployment declares it (secrets by
// variable name, never by value). An episode is scored by that candidate
// only: a different candidate's read judged against this baseline would
// compare two systems, and a pinned candidate that is gone or changed
// leaves the episode unscored.
type OraclePin struct {
	Index        int    `json:"index"`
	Kind         string `json:"kind"`
	Tier         int    `json:"tier"`
	ConfigDigest string `json:"config_digest"`
	// WriteSetFrom is the change log's position read after the baseline,
	// when the candidate declares changes: (the write set): the scoring
	// read judges every committed change from it. Empty otherwise.
	WriteSetFrom string `json:"write_set_from,omitempty"`
}

// Reason codes of a read that could not be made through the pinned oracle.
const (
	// ReasonOracleNotPinned: the registered episode names no candidate (no
	// candidate configured at registration, or an episode stored before
	// oracles were pinned).
	ReasonOracleNotPinned = "ORACLE_NOT_PINNED"
	// ReasonOracleChanged: the pinned candidate's position, kind, tier or
	// configuration is not what read the baseline.
	ReasonOracleChanged = "ORACLE_CHANGED"
	// ReasonOracleUnavailable: the pinned candidate cannot be configured.
	ReasonOracleUnavailable = "ORACLE_UNAVAILABLE"
)

// Oracle reads a registered deployment for bound effects. phase is
// "before" or "after". With pin nil the oracle selects the strongest
// candidate (ties by declaration order) and reports it in OracleRead.Pin;
// with a pin it reads that candidate only, and a candidate that cannot be
// configured, was removed or changed is an unreachable read with Code
// set — never a read of another candidate. A failure to read is an
// unreachable snapshot, never an empty one.
//
// Judge judges bound effects on an episode's baseline and after read
// through the daemon's one judging path, under the deployment's options
// (its census, freshness window and absence rule) for the pinned
// candidate. deployment "" is a case of no deployment (a calibration
// trial): no census, no freshness. The reward package reads and judges
// nothing itself.
type Oracle interface {
	Read(ctx context.Context, deployment string, effects []*judge.Contract, identity map[string]string, phase string, pin *OraclePin) OracleRead
	Judge(deployment string, pin *OraclePin, effects []*judge.Contract, before, after OracleRead) Proof
}

// Proof is what Oracle.Judge answers: a verdict per effect, and what the
// verdicts rested on — how the candidate proves a record new (census,
// whole_read, newly_matching; empty for a case of no deployment), and
// whether a census was given to the judge and could serve every effect.
type Proof struct {
	Verdicts     []judge.Verdict
	Newness      string
	Census       bool
	CensusUsable bool
}

// BaselineRestorer is implemented by an oracle that masks values in the
// baselines it reads (a configured secret found in a record): it puts them
// back, for the pinned candidate, before the baseline is judged.
type BaselineRestorer interface {
	RestoreBaseline(deployment string, pin *OraclePin, records []judge.Record) []judge.Record
}

// OracleRung is the rung of the oracle ladder a reward read stands on
// (internal/oracle.Reward: a file or a document is visual-floor evidence
// whatever its tier, since whoever writes it writes the answer). A read
// through no adapter (tier 0) stands on the lowest rung.
func OracleRung(read OracleRead) oracle.Rung {
	if read.Tier == 0 {
		return oracle.Visual
	}
	return oracle.Reward(read.Kind, sdk.Tier(read.Tier))
}

// Service registers and scores episodes.
type Service struct {
	Contracts map[string]*Contract
	Oracle    Oracle
	Store     store.Backend
	Signer    Signer
	// EvidenceKey keys the subject and evidence digests of receipts.
	EvidenceKey []byte
	Now         func() time.Time

	// locks serialise registration and scoring per episode key. Marks are
	// checked again inside the transaction that advances them, so scoring
	// different episodes runs in parallel.
	locks keyed.Mutex
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// episode is what the store keeps per registered episode.
type episode struct {
	Contract  string            `json:"contract"`
	EpisodeID string            `json:"episode_id"`
	Identity  map[string]string `json:"identity"`
	Reachable bool              `json:"baseline_reachable"`
	Reason    string            `json:"baseline_reason,omitempty"`
	Records   []judge.Record    `json:"baseline_records"`
	// Oracle is the candidate that read the baseline; nil when none could
	// be selected, and in episodes stored before oracles were pinned. Such
	// an episode is scored unscored (ORACLE_NOT_PINNED), never by a fresh
	// selection.
	Oracle *OraclePin `json:"oracle,omitempty"`
	// Census is the pinned candidate's census read beside the baseline;
	// nil when it declares none (and in episodes stored before censuses).
	Census       *storedCensus `json:"baseline_census,omitempty"`
	RegisteredAt time.Time     `json:"registered_at"`
	ReceiptID    string        `json:"receipt_id,omitempty"`
}

// storedCensus is a census as an episode keeps it: identities only.
type storedCensus struct {
	Reachable bool           `json:"reachable"`
	Reason    string         `json:"reason,omitempty"`
	Records   []judge.Record `json:"records"`
}

func storeCensus(s *judge.Snapshot) *storedCensus {
	if s == nil {
		return nil
	}
	return &storedCensus{Reachable: s.Reachable, Reason: s.Reason, Records: s.Records}
}

// mark is the policy-update high-water mark of one contract.
type mark struct {
	Contract           string `json:"reward_contract_digest"`
	Highest            int64  `json:"highest_policy_update"`
	PolicyCheckpointID string `json:"policy_checkpoint_id"`
	ReceiptID          string `json:"receipt_id"`
}

func episodeKey(contract, id string) string { return contract + "/" + id }

// contract picks the contract by name, or by digest, or the only one.
func (s *Service) contract(name, digest string) (*Contract, error) {
	if name != "" {
		c, ok := s.Contracts[name]
		if !ok {
			return nil, refuse(CodeNotFound, "no reward contract named %q in the daemon config", clip(name))
		}
		if digest != "" && digest != c.Digest {
			return nil, refuse(CodeContractMismatch, "reward_contract_digest %s is not the digest of contract %s (%s)", clip(digest), c.Name, c.Digest)
		}
		return c, nil
	}
	if digest != "" {
		for _, c := range s.Contracts {
			if c.Digest == digest {
				return c, nil
			}
		}
		return nil, refuse(CodeContractMismatch, "no registered reward contract has digest %s; ask the operator for the served contract's digest", clip(digest))
	}
	if len(s.Contracts) == 1 {
		for _, c := range s.Contracts {
			return c, nil
		}
	}
	return nil, refuse(CodeInvalidEpisode, "name the reward contract (contract or reward_contract_digest); the daemon serves %d", len(s.Contracts))
}

// Registration is RegisterEpisode's answer. It never echoes the identity.
type Registration struct {
	Contract            string `json:"contract"`
	EpisodeID           string `json:"episode_id"`
	BaselineReachable   bool   `json:"baseline_reachable"`
	BaselineRecordCount int    `json:"baseline_record_count"`
}

// RegisterEpisode fixes an episode's subject and reads its baseline once,
// before the rollout. Registering again under the same subject re-reads
// the baseline; another subject or a scored episode is refused.
func (s *Service) RegisterEpisode(ctx context.Context, contractName, contractDigest, episodeID string, identity map[string]string) (*Registration, error) {
	c, err := s.contract(contractName, contractDigest)
	if err != nil {
		return nil, err
	}
	if !opaqueID.MatchString(episodeID) {
		return nil, refuse(CodeInvalidEpisode, "episode_id: 8 to 128 characters, the first a letter or digit, then letters, digits or ._:-")
	}
	if err := checkIdentity(c, identity); err != nil {
		return nil, err
	}
	key := episodeKey(c.Name, episodeID)
	unlock, err := s.locks.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	prev, err := s.loadEpisode(ctx, key)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		if prev.ReceiptID != "" {
			return nil, refuse(CodeDuplicateEpisode, "episode %s was already scored (receipt %s); an episode is scored once", episodeID, prev.ReceiptID)
		}
		if !sameIdentity(prev.Identity, identity) {
			return nil, refuse(CodeIdentityConflict, "episode %s is registered for another subject; an episode's subject is fixed before its rollout", episodeID)
		}
	}
	req, forb, err := BindEffects(c, identity)
	if err != nil {
		return nil, refuse(CodeIdentityMismatch, "%v", err)
	}
	read := s.Oracle.Read(ctx, c.Deployment, append(req, forb...), identity, "before", nil)
	if read.Refused != nil {
		code := CodeNewnessUnproven
		if errors.As(read.Refused, new(*OracleUnavailableError)) {
			code = CodeOracleUnavailable
		}
		return nil, refuse(code, "contract %s: deployment %q: %v", c.Name, c.Deployment, read.Refused)
	}
	ep := episode{Contract: c.Name, EpisodeID: episodeID, Identity: identity, Reachable: read.Snapshot.Reachable,
		Reason: read.Snapshot.Reason, Records: read.Snapshot.Records, Oracle: read.Pin, Census: storeCensus(read.Census),
		RegisteredAt: s.now()}
	raw, err := json.Marshal(ep)
	if err != nil {
		return nil, err
	}
	err = s.Store.RewardUpdate(ctx, func(tx store.RewardTx) error {
		return tx.Put(store.RewardEpisodes, key, raw)
	})
	if err != nil {
		return nil, err
	}
	return &Registration{Contract: c.Name, EpisodeID: episodeID, BaselineReachable: ep.Reachable, BaselineRecordCount: len(ep.Records)}, nil
}

func (s *Service) loadEpisode(ctx context.Context, key string) (*episode, error) {
	raw, err := s.Store.RewardGet(ctx, store.RewardEpisodes, key)
	if err != nil || raw == nil {
		return nil, err
	}
	var ep episode
	if err := json.Unmarshal(raw, &ep); err != nil {
		return nil, fmt.Errorf("reading episode %s from the store: %w", key, err)
	}
	return &ep, nil
}

func sameIdentity(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func checkIdentity(c *Contract, identity map[string]string) error {
	if len(identity) == 0 {
		return refuse(CodeIdentityMissing, "give oracle_identity with %s", strings.Join(c.IdentityKeys, ", "))
	}
	for _, v := range identity {
		if len(v) > 256 {
			return refuse(CodeInvalidEpisode, "oracle_identity: each value at most 256 bytes")
		}
	}
	var extra, missing []string
	want := map[string]bool{}
	for _, k := range c.IdentityKeys {
		want[k] = true
		if v, ok := identity[k]; !ok || v == "" {
			missing = append(missing, k)
		}
	}
	for k := range identity {
		if !want[k] {
			extra = append(extra, clip(k))
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 || len(missing) > 0 {
		return refuse(CodeIdentityMismatch, "oracle_identity must have exactly the keys %s (missing: %s; not identity keys: %s)",
			strings.Join(c.IdentityKeys, ", "), strings.Join(missing, ", "), strings.Join(extra, ", "))
	}
	return nil
}

// Result is a scored episode as stored and returned: the receipt and its
// signed envelope.
type Result struct {
	Receipt  receipt.RewardReceiptPayload `json:"receipt"`
	Envelope *receipt.Envelope            `json:"envelope"`
}

// ScoreEpisode judges an episode after its rollout and issues a signed
// receipt. descriptor is the trainer's JSON descriptor.
func (s *Service) ScoreEpisode(ctx context.Context, contractName string, descriptor []byte) (*Result, error) {
	d, err := ParseDescriptor(descriptor)
	if err != nil {
		return nil, err
	}
	c, err := s.contract(contractName, d.RewardContractDigest)
	if err != nil {
		return nil, err
	}
	if d.RewardContractDigest != c.Digest {
		return nil, refuse(CodeContractMismatch, "reward_contract_digest %s is not the served contract's %s", clip(d.RewardContractDigest), c.Digest)
	}
	key := episodeKey(c.Name, d.EpisodeID)
	unlock, err := s.locks.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ep, err := s.loadEpisode(ctx, key)
	if err != nil {
		return nil, err
	}
	if ep != nil && ep.ReceiptID != "" {
		return nil, refuse(CodeDuplicateEpisode, "episode %s was already scored (receipt %s)", d.EpisodeID, ep.ReceiptID)
	}
	identity, err := episodeIdentity(c, d, ep)
	if err != nil {
		return nil, err
	}
	mk, err := s.loadMark(ctx, c.Digest)
	if err != nil {
		return nil, err
	}
	if mk != nil && d.PolicyUpdate < mk.Highest {
		return nil, regressed(c, d.PolicyUpdate, mk)
	}
	req, forb, err := BindEffects(c, identity)
	if err != nil {
		return nil, refuse(CodeIdentityMismatch, "%v", err)
	}
	before := s.baseline(c, ep)
	effects := append(append([]*judge.Contract{}, req...), forb...)
	read := s.readAfter(ctx, c, ep, effects, identity)
	j := JudgeEpisode(s.judgeFor(c.Deployment, read.Pin), req, forb, before, read, d.Signal)
	if j.Outcome == OutcomeFailedPlatform && j.Uncertainty == UncertaintyOracleUnavailable && read.Code != "" {
		j.Reason = read.Code
	}
	r := s.receiptFor(c, d, j, read, before.Snapshot.Reachable, identity)
	r.Verdicts, r.EvidenceDigest = s.verdicts(req, forb, j)
	return s.issue(ctx, c, d, key, ep, identity, r)
}

// baseline is the episode's baseline as its registration read it, with
// its census, the values its oracle masked put back; an unregistered
// episode has none.
func (s *Service) baseline(c *Contract, ep *episode) OracleRead {
	if ep == nil {
		return OracleRead{Snapshot: judge.Snapshot{Reachable: false, Reason: "the episode was not registered before its rollout"}}
	}
	before := OracleRead{Snapshot: judge.Snapshot{Reachable: ep.Reachable, Reason: ep.Reason, Records: ep.Records}, Pin: ep.Oracle}
	if ep.Census != nil {
		before.Census = &judge.Snapshot{Reachable: ep.Census.Reachable, Reason: ep.Census.Reason, Records: ep.Census.Records}
	}
	if r, ok := s.Oracle.(BaselineRestorer); ok && ep.Oracle != nil {
		before.Snapshot.Records = r.RestoreBaseline(c.Deployment, ep.Oracle, ep.Records)
		if before.Census != nil {
			before.Census.Records = r.RestoreBaseline(c.Deployment, ep.Oracle, ep.Census.Records)
		}
	}
	return before
}

// judgeFor judges through the oracle's one judging path, for the
// deployment's candidate pin.
func (s *Service) judgeFor(deployment string, pin *OraclePin) EffectJudge {
	return func(effects []*judge.Contract, before, after OracleRead) Proof {
		return s.Oracle.Judge(deployment, pin, effects, before, after)
	}
}

// episodeIdentity is the subject an episode is scored for: the one its
// registration recorded (a descriptor may repeat it, not change it), else
// the descriptor's oracle_identity; checked against the contract.
func episodeIdentity(c *Contract, d *Descriptor, ep *episode) (map[string]string, error) {
	identity := d.Identity
	if ep != nil {
		if identity != nil && !sameIdentity(identity, ep.Identity) {
			return nil, refuse(CodeIdentityConflict, "the environment registered episode %s for another subject before the rollout; the descriptor may not name a different one", d.EpisodeID)
		}
		identity = ep.Identity
	}
	if identity == nil {
		return nil, refuse(CodeIdentityMissing, "episode %s was not registered and the descriptor names no oracle_identity; register it with POST /v1/episodes before the rollout", d.EpisodeID)
	}
	if err := checkIdentity(c, identity); err != nil {
		return nil, err
	}
	return identity, nil
}

// receiptFor writes the receipt of a judged episode (its verdicts aside):
// the outcome and its scalar, the certificate and whether it certifies
// this scalar, the oracle read and the keyed digests.
func (s *Service) receiptFor(c *Contract, d *Descriptor, j Judged, read OracleRead, baselineReachable bool, identity map[string]string) receipt.RewardReceiptPayload {
	r := receipt.RewardReceiptPayload{
		Schema: ReceiptSchema, ReceiptID: "rwd_" + randomHex(16), Contract: c.Name, ContractID: c.ID, ContractVersion: c.Version,
		RewardContractDigest: c.Digest, EpisodeID: d.EpisodeID, PolicyCheckpointID: d.PolicyCheckpointID, PolicyUpdate: d.PolicyUpdate,
		Deployment: c.Deployment, OracleKind: read.Kind, OracleTier: read.Tier, OracleRung: int(OracleRung(read)), RuntimeSignal: d.Signal,
		RewardOutcome: j.Outcome, Uncertainty: j.Uncertainty, ReasonCode: j.Reason, Newness: j.Newness,
		BaselineReachable: baselineReachable, IssuedAt: s.now().Truncate(time.Second), IssuerKeyID: s.Signer.KeyID(), Nonce: "nonce_" + randomHex(16),
		Components: []receipt.RewardComponent{},
	}
	if scalar, ok := c.Scoring.Scalar(j.Outcome); ok {
		r.ScalarReward = &scalar
		r.Components = c.ComponentValues(scalar)
	} else {
		r.Unscored = true
	}
	r.CertificateState = c.Certificate.State(d.PolicyUpdate)
	if cert := c.Certificate; cert != nil {
		eps := cert.Epsilon
		r.CertificateID, r.CertificateDigest, r.CorpusDigest, r.CalibrationScope, r.Epsilon = cert.CertificateID, cert.Digest, cert.CalibrationCorpusDigest, cert.Scope, &eps
	}
	satisfies := c.Certificate != nil && (c.CertificatePolicy == nil || c.Certificate.Epsilon <= c.CertificatePolicy.Epsilon)
	if read.Pin != nil {
		idx := read.Pin.Index
		r.OracleCandidate = &idx
		r.OracleConfigDigest = s.keyedDigest("oracle", read.Pin.ConfigDigest)
	}
	// Only a read of the system of record itself (rung 2) or a
	// counterparty's acknowledgment (rung 3) can certify: a separate
	// session of the application, a screen or a file anyone may write
	// cannot.
	strong := OracleRung(read) >= oracle.SystemOfRecord
	// Certified states that the scalar rests on a strong read and a current
	// certificate: an unscored receipt (a failed platform, an uncertain
	// effect) has no scalar to certify.
	r.Certified = strong && r.ScalarReward != nil && r.RewardOutcome != OutcomeFailedPlatform && r.CertificateState == CertCurrent && satisfies
	r.DevelopmentOnly = !strong
	r.SubjectDigest = s.keyedDigest("subject", canonicalJSON(identity))
	return r
}

// issue signs and stores the receipt in one transaction with the ledger
// entry, the episode's record and the contract's policy-update mark (the
// mark is checked again inside it, so two racing episodes cannot regress
// it).
func (s *Service) issue(ctx context.Context, c *Contract, d *Descriptor, key string, ep *episode, identity map[string]string, r receipt.RewardReceiptPayload) (*Result, error) {
	var res *Result
	err := s.Store.RewardUpdate(ctx, func(tx store.RewardTx) error {
		// Checked again inside the transaction that advances the mark.
		raw, err := tx.Get(store.RewardMarks, c.Digest)
		if err != nil {
			return err
		}
		if raw != nil {
			var m mark
			if err := json.Unmarshal(raw, &m); err == nil && d.PolicyUpdate < m.Highest {
				return regressed(c, d.PolicyUpdate, &m)
			}
		}
		r.Ledger = tx.Ledger().Next()
		payload, err := json.Marshal(r)
		if err != nil {
			return err
		}
		env := s.Signer.Sign(PayloadTypeReceipt, payload)
		if _, err := tx.Ledger().Append("reward", r.ReceiptID, receipt.PayloadDigest(payload)); err != nil {
			return err
		}
		res = &Result{Receipt: r, Envelope: env}
		raw, err = json.Marshal(res)
		if err != nil {
			return err
		}
		if err := tx.Put(store.RewardReceipts, r.ReceiptID, raw); err != nil {
			return err
		}
		stored := episode{Contract: c.Name, EpisodeID: d.EpisodeID, Identity: identity, RegisteredAt: s.now(), ReceiptID: r.ReceiptID}
		if ep != nil {
			stored = *ep
			stored.ReceiptID = r.ReceiptID
		}
		raw, err = json.Marshal(stored)
		if err != nil {
			return err
		}
		if err := tx.Put(store.RewardEpisodes, key, raw); err != nil {
			return err
		}
		m := mark{Contract: c.Digest, Highest: d.PolicyUpdate, PolicyCheckpointID: d.PolicyCheckpointID, ReceiptID: r.ReceiptID}
		old, err := tx.Get(store.RewardMarks, c.Digest)
		if err != nil {
			return err
		}
		if old != nil {
			var prev mark
			if json.Unmarshal(old, &prev) == nil && prev.Highest > m.Highest {
				m = prev
			}
		}
		raw, err = json.Marshal(m)
		if err != nil {
			return err
		}
		return tx.Put(store.RewardMarks, c.Digest, raw)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// readAfter reads the episode's after state through the candidate that
// read its baseline, and only through it. An episode registered without a
// pin (no candidate configured then, or stored by a daemon that did not pin)
// is not read at all: selecting again could pick another system than the
// one its baseline came from. An unregistered episode has no baseline and
// is read through a fresh selection; its change claims judge INDETERMINATE.
func (s *Service) readAfter(ctx context.Context, c *Contract, ep *episode, effects []*judge.Contract, identity map[string]string) OracleRead {
	if ep == nil {
		return s.Oracle.Read(ctx, c.Deployment, effects, identity, "after", nil)
	}
	if ep.Oracle == nil {
		return OracleRead{Code: ReasonOracleNotPinned, Snapshot: judge.Snapshot{Reachable: false,
			Reason: "the episode's registration names no oracle candidate (none could be configured when it was registered, or it was stored before oracles were pinned), so no read can be judged against its baseline"}}
	}
	pin := *ep.Oracle
	read := s.Oracle.Read(ctx, c.Deployment, effects, identity, "after", &pin)
	// The receipt names the pinned candidate whatever the oracle reported.
	read.Kind, read.Tier = pin.Kind, pin.Tier
	if read.Pin == nil || *read.Pin != pin {
		if read.Snapshot.Reachable {
			read.Snapshot = judge.Snapshot{Reachable: false, Reason: "the oracle read another candidate than the one that read the baseline"}
			read.Code = ReasonOracleChanged
		}
		read.Pin = &pin
	}
	return read
}

func regressed(c *Contract, u int64, m *mark) error {
	return refuse(CodePolicyUpdateRegressed, "contract %s has already scored policy update %d (set by checkpoint %s); policy_update %d is below it, and the mark is per contract, so a renamed checkpoint does not reset it",
		c.Name, m.Highest, m.PolicyCheckpointID, u)
}

func (s *Service) loadMark(ctx context.Context, digest string) (*mark, error) {
	raw, err := s.Store.RewardGet(ctx, store.RewardMarks, digest)
	if err != nil || raw == nil {
		return nil, err
	}
	var m mark
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading the policy-update mark: %w", err)
	}
	return &m, nil
}

// verdicts states each verdict by code and the evidence by a keyed digest
// of the matched records: the receipt shows no value.
func (s *Service) verdicts(req, forb []*judge.Contract, j Judged) ([]receipt.RewardVerdict, string) {
	var out []receipt.RewardVerdict
	var evidence []string
	add := func(name string, i int, c *judge.Contract, v judge.Verdict) {
		out = append(out, receipt.RewardVerdict{Effect: fmt.Sprintf("%s[%d]", name, i), ContractHash: c.Hash, Decision: string(v.Decision), Reasons: v.Codes()})
		for _, m := range v.Matched {
			evidence = append(evidence, judge.CanonicalJSON(map[string]any(m)))
		}
	}
	for i, v := range j.Required {
		add("required_effects", i, req[i], v)
	}
	for i, v := range j.Forbidden {
		add("forbidden_effects", i, forb[i], v)
	}
	slices.Sort(evidence)
	return out, s.keyedDigest("evidence", strings.Join(evidence, "\n"))
}

func (s *Service) keyedDigest(purpose, text string) string {
	mac := judge.NewKeyedHash(s.EvidenceKey)
	mac.Write([]byte("verifierd.reward." + purpose + "\n" + text))
	return judge.KeyedSum(mac)
}

// GetReward returns a stored result by receipt id.
func (s *Service) GetReward(ctx context.Context, id string) (*Result, error) {
	if !receiptIDRE.MatchString(id) {
		return nil, refuse(CodeNotFound, "no reward receipt %q", clip(id))
	}
	raw, err := s.Store.RewardGet(ctx, store.RewardReceipts, id)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, refuse(CodeNotFound, "no reward receipt %q", id)
	}
	// The stored envelope is read as strictly as any other: a key written
	// twice would let another reader take another value.
	if err := receipt.CheckKeys(raw, "the stored reward receipt "+id); err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// OracleUnavailableError is a registration read's Refused when the
// deployment's first candidate, the operator's first choice of oracle,
// cannot be configured: the episode is not registered (it would pin a
// lower candidate for its whole life, e.g. a document read whose rewards
// are only ever development_only). Register again once it is back.
type OracleUnavailableError struct {
	Candidate string // "candidate 0 (sql)"
	Fallback  string // the candidate it would have pinned instead, "" when none
	Err       error
}

func (e *OracleUnavailableError) Error() string {
	msg := fmt.Sprintf("the oracle's first %s is not available: %v", e.Candidate, e.Err)
	if e.Fallback != "" {
		msg += fmt.Sprintf("; registering now would pin %s for the episode's life, whose rewards cannot certify what the first candidate would", e.Fallback)
	}
	return msg + "; bring it back and register the episode again"
}

func (e *OracleUnavailableError) Unwrap() error { return e.Err }
