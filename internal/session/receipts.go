package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// Terminal outcomes recorded in the ledger and the receipts, beside the
// judged outcomes (judge.Verified, judge.HaltedBeforeEffect,
// judge.ReconciliationRequired).
const (
	// OutcomeRejectedPolicy: Begin was refused by the operator's policy.
	OutcomeRejectedPolicy = "REJECTED_POLICY"
	// OutcomeFailedPlatform: the daemon or an adapter process failed, not
	// the system of record.
	OutcomeFailedPlatform = "FAILED_PLATFORM"
)

// Ledger entry types.
const (
	EntryBegin                = "begin"
	EntryBeginRefused         = "begin_refused"
	EntryVerify               = "verify"
	EntryReverify             = "reverify"
	EntryReceipt              = "receipt"
	EntryReconciliationOpen   = "reconciliation_opened"
	EntryReconciliationClosed = "reconciliation_closed"
	EntryArtifact             = "artifact"
)

// EvidenceDigestKey is the key of every keyed evidence digest in a receipt:
// the daemon's evidence key, the same that keys reconciliation-task digests
// (Options.EvidenceKey; a random one of the Manager's lifetime when unset).
func (m *Manager) EvidenceDigestKey() []byte { return m.evidence().key() }

// KeyedDigest is "hmac-sha256:" and the hex HMAC-SHA-256 of data under the
// evidence key: it proves which exact bytes were seen without disclosing a
// guessable value to anyone without the key.
func (m *Manager) KeyedDigest(data []byte) string { return m.evidence().keyedDigest(data) }

// stepEvidence is what a Verify saw, for the receipt: never values, only
// keyed digests.
type stepEvidence struct {
	Groups  []groupEvidence  // per capture, in md.Captures order
	Matched [][]judge.Record // per effect, unredacted (digested only)
	// Verdicts are the judge's verdicts per effect, as decided (before
	// redaction): internal evidence a run's re-reads use (Lost, Changed),
	// never shown nor stored.
	Verdicts []judge.Verdict
}

// groupEvidence is one pinned adapter's reads.
type groupEvidence struct {
	Baseline, After receipt.ReadDigest
	// PlatformFailed: the adapter could not be configured or started, or
	// its process failed during the last read.
	PlatformFailed bool
	noCompensate   bool
	// Census is the group's census reads (nil without a census).
	Census *receipt.CensusReads
	// WriteSet is the group's last write-set read (nil without changes:).
	WriteSet *receipt.WriteSetSpan
	// settleFloor is the session's settle floor (meta.SettleFloorS): a
	// group holding a change claim settles at least this long.
	settleFloor time.Duration
	// collection is what the last judged read saw of the whole collection
	// (noteCollection; nil when it cannot see it): a run's rollback check
	// shows with it that a record is gone, not only gone from the subject.
	collection *collectionSeen
	// baselineLoss and censusLoss are a stored baseline or census that
	// failed its integrity check (*store.IntegrityError): Verify then
	// answers DataLoss and stores no result.
	baselineLoss, censusLoss error
}

func (e evidenceKeys) readDigest(s judge.Snapshot) receipt.ReadDigest {
	if !s.Reachable {
		return receipt.ReadDigest{}
	}
	mac := judge.NewKeyedHash(e.key())
	for _, r := range s.Records {
		mac.Write([]byte(judge.CanonicalJSON(r)))
		mac.Write([]byte{'\n'})
	}
	return receipt.ReadDigest{Reachable: true, Records: len(s.Records), Digest: judge.KeyedSum(mac)}
}

// terminalOutcome is FAILED_PLATFORM when the step is not verified and
// every non-confirmed effect was read through an adapter whose process
// failed; else the judged outcome. An unreachable system of record stays
// RECONCILIATION_REQUIRED (docs/contracts.md): only the platform's own failure
// changes the name, never a verdict.
func terminalOutcome(o judge.Outcome, verdicts []judge.Verdict, caps []captureMeta, ev *stepEvidence) string {
	if o == judge.Verified {
		return string(o)
	}
	failed := make([]bool, len(verdicts))
	for n, cm := range caps {
		for _, i := range cm.Effects {
			failed[i] = ev.Groups[n].PlatformFailed
		}
	}
	any := false
	for i, v := range verdicts {
		if v.Decision == judge.Confirmed {
			continue
		}
		if !failed[i] || v.Decision != judge.Indeterminate {
			return string(o)
		}
		any = true
	}
	if any {
		return OutcomeFailedPlatform
	}
	return string(o)
}

// Names a receipt binds the session to. The Begin of named deployments and
// workflows fills these in the session meta; a session begun from inline
// YAML has no name.
type sessionNames struct {
	DeploymentName string `json:"deployment_name"`
	// Workflow fields: empty unless the session was begun as a workflow
	// step.
	WorkflowName   string `json:"workflow_name"`
	WorkflowDigest string `json:"workflow_digest"`
	WorkflowStep   string `json:"workflow_step"`
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func jsonDigest(v any) string {
	b, _ := json.Marshal(v)
	return sha256Hex(b)
}

func namesOf(raw []byte) sessionNames {
	var md struct {
		DeploymentName string `json:"deployment_name"`
		Begin          struct {
			Registered *RegisteredStep `json:"registered_step"`
		} `json:"begin"`
	}
	_ = json.Unmarshal(raw, &md) // absent fields stay empty
	n := sessionNames{DeploymentName: md.DeploymentName}
	if r := md.Begin.Registered; r != nil {
		n.WorkflowName, n.WorkflowDigest, n.WorkflowStep = r.Workflow, r.WorkflowDigest, r.Step
	}
	return n
}

func (n sessionNames) workflow() *receipt.WorkflowRef {
	if n.WorkflowName == "" && n.WorkflowDigest == "" && n.WorkflowStep == "" {
		return nil
	}
	return &receipt.WorkflowRef{Name: n.WorkflowName, Digest: n.WorkflowDigest, Step: n.WorkflowStep}
}

// seal appends a result's ledger entries (verify or reverify, the opened or
// closed reconciliation tasks, the receipt) inside the store transaction
// that stores it, and returns the result JSON with its receipt. rev is nil
// for the first Verify; for a Reverify it names the attempt, its reason and
// the first result.
func (m *Manager) seal(l store.Ledger, rawMeta []byte, md *meta, res *Result, ev *stepEvidence, rev *reverifyOf) ([]byte, error) {
	kind, entry := receipt.KindVerify, EntryVerify
	if rev != nil {
		kind, entry = receipt.KindReverify, EntryReverify
		res.Attempt, res.ReverifyReason = rev.attempt, rev.reason
	}
	res.Receipt = nil
	body, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if _, err := l.Append(entry, res.SessionID, sha256Hex(body)); err != nil {
		return nil, err
	}
	var open []string
	for _, e := range res.Effects {
		if e.ReconciliationTask != nil {
			open = append(open, e.ReconciliationTask.ID)
		}
	}
	if rev != nil && len(rev.openTasks) > 0 && res.Outcome == judge.Verified {
		if _, err := l.Append(EntryReconciliationClosed, res.SessionID, jsonDigest(map[string]any{"tasks": rev.openTasks, "attempt": rev.attempt})); err != nil {
			return nil, err
		}
	}
	if len(open) > 0 {
		if _, err := l.Append(EntryReconciliationOpen, res.SessionID, jsonDigest(map[string]any{"tasks": open, "attempt": res.Attempt})); err != nil {
			return nil, err
		}
	}
	names := namesOf(rawMeta)
	env, err := newReceiptSigner(m.signer).sign(l, receipt.PayloadTypeVerdict, res.SessionID, func(pos receipt.Position, signer receipt.Signer) any {
		p := receipt.VerdictPayload{
			Kind: kind, SessionID: res.SessionID,
			Deployment: receipt.DeploymentRef{Name: names.DeploymentName, Digest: sha256Hex(md.Deployment)},
			Workflow:   names.workflow(), Attempt: res.Attempt, Run: md.Run,
			Outcome: string(res.Outcome), TerminalOutcome: res.TerminalOutcome,
			Effects:        make([]receipt.EffectClaim, len(res.Effects)),
			EvidenceDigest: "hmac-sha256", IssuedAt: res.VerifiedAt, Ledger: pos, Signer: signer,
		}
		if rev != nil {
			p.ReverifyReasonDigest = sha256Hex([]byte(rev.reason))
		}
		for i, e := range res.Effects {
			codes := []string{}
			for _, r := range e.Reasons {
				codes = append(codes, r.Code)
			}
			digests := []string{}
			for _, rec := range ev.Matched[i] {
				digests = append(digests, m.KeyedDigest([]byte(judge.CanonicalJSON(rec))))
			}
			c := receipt.EffectClaim{Index: i, ContractHash: e.ContractHash, Verdict: string(e.Verdict), Result: string(e.Result),
				Tier: e.Tier, OracleRung: e.OracleRung, Substrate: e.Substrate, ReasonCodes: codes, ObservedCount: e.ObservedCount, EvidenceDigests: digests,
				Newness: e.Newness, CensusScope: e.CensusScope, CollateralScope: e.CollateralScope, WriteSet: e.WriteSet}
			if e.ReconciliationTask != nil {
				c.ReconciliationTask = e.ReconciliationTask.ID
			}
			p.Effects[i] = c
		}
		census := false
		for _, g := range ev.Groups {
			p.Baseline = append(p.Baseline, g.Baseline)
			p.After = append(p.After, g.After)
			census = census || g.Census != nil
		}
		if census {
			for _, g := range ev.Groups {
				p.Census = append(p.Census, g.Census)
			}
		}
		return p
	})
	if err != nil {
		return nil, err
	}
	res.Receipt = env
	return json.Marshal(res)
}

// reverifyOf is what seal needs of a re-verification.
type reverifyOf struct {
	attempt   int
	reason    string
	openTasks []string // the reconciliation tasks still open before it
}

// KeyInfo is the daemon's signing identity and ledger head.
type KeyInfo struct {
	PublicKey string `json:"public_key"`
	KeyID     string `json:"key_id"`
	Head      receipt.Position
}

// Info reports the signing identity; empty key fields without a signer.
func (m *Manager) Info(ctx context.Context) (*KeyInfo, error) {
	ki := &KeyInfo{}
	if m.signer != nil {
		ki.PublicKey, ki.KeyID = m.signer.PublicKeyBase64(), m.signer.KeyID()
	}
	pos, err := m.store.LedgerHead(ctx)
	ki.Head = pos
	return ki, err
}
