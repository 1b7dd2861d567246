package judge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
)

// Task is a reconciliation task: what a person must repair. It carries codes,
// counts and digests, never a field or selector value.
type Task struct {
	ID              string       `json:"id"`
	Kind            string       `json:"kind"`
	Substrate       string       `json:"substrate"`
	EffectKind      Kind         `json:"effect_kind"`
	ContractHash    string       `json:"contract_hash"`
	Verdict         Decision     `json:"verdict"`
	Reasons         []TaskReason `json:"reasons"`
	Evidence        TaskEvidence `json:"evidence"`
	SuggestedAction string       `json:"suggested_action"`
}

// TaskReason is a reason code with a value-free summary.
type TaskReason struct {
	Code    string `json:"code"`
	Summary string `json:"summary"`
}

// TaskEvidence is the value-free evidence of a task.
type TaskEvidence struct {
	ObservedCount *int     `json:"observed_count"`
	ExpectedCount *int     `json:"expected_count"`
	ValuesMatch   *bool    `json:"values_match"`
	RecordDigests []string `json:"record_digests"`
	// DeletedDigests lists the records a failed compensation already
	// deleted (compensation_failed only).
	DeletedDigests []string `json:"deleted_digests,omitempty"`
}

var codeSummaries = map[string]string{
	ReasonSORUnreachable:        "the system of record could not be read after the action",
	ReasonBaselineUnreachable:   "the baseline could not be read before the action",
	ReasonCountOver:             "more matching records than expected",
	ReasonCountUnder:            "fewer matching records than expected",
	ReasonCollateralLoss:        "pre-existing records outside the selector vanished",
	ReasonFieldNoMatch:          "no record matched the selector",
	ReasonFieldAmbiguous:        "more than one record matched the selector",
	ReasonFieldMismatch:         "the read-back field holds another value",
	ReasonIdentityMissing:       "records without an identity value",
	ReasonSetCardinality:        "the number of added records differs from the declared set",
	ReasonSetMultiplicity:       "a declared member was added a different number of times",
	ReasonSetUndeclared:         "records were added that no member declares",
	ReasonSetScopeLoss:          "pre-existing records in scope vanished",
	ReasonStale:                 "matched records are outside the freshness window",
	ReasonSettleInterrupted:     "the settle window was cut short",
	ReasonAdapterDemoted:        "the adapter demoted the verdict",
	ReasonCensusUnusable:        "the census could not say which records exist",
	ReasonExistingRecordChanged: "an existing record was changed to match instead of a new one being added",
	ReasonReadMayBeTruncated:    "the read may have been cut short by a page cap",
	ReasonReadIncomplete:        "the read does not hold the total the system declared",
	ReasonAccessRejected:        "the system of record rejected the reader's credential",
}

// CodeSummary returns a value-free description of a reason code.
func CodeSummary(code string) string {
	if s, ok := codeSummaries[code]; ok {
		return s
	}
	return "see the verdict's reasons"
}

// RecordDigest is "sha256:" and the hex SHA-256 of a record's canonical JSON.
func RecordDigest(r Record) string {
	sum := sha256.Sum256([]byte(CanonicalJSON(r)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Task kinds.
const (
	TaskEffectRefuted       = "effect_refuted"
	TaskEffectIndeterminate = "effect_indeterminate"
	TaskCompensationFailed  = "compensation_failed"
)

// Suggested actions.
const (
	ActionRestoreAccess    = "RESTORE_ACCESS"
	ActionRemoveDuplicates = "REMOVE_DUPLICATES"
	ActionManualRepair     = "MANUAL_REPAIR"
	// ActionReverifyBeforeRetry is the action of every task of a step
	// that halted before its effect: nothing was seen to land, but a slow
	// save may still land, so re-verify before retrying the step.
	ActionReverifyBeforeRetry = "REVERIFY_BEFORE_RETRY"
)

// TaskOptions shape the task NewTask makes. The zero value is the task of
// one effect judged on its own, with plain record digests.
type TaskOptions struct {
	// IrreversibleStep: any effect of the step is irreversible, or the step
	// itself is. Then every non-confirmed effect gets a task, whatever its
	// own risk: a wrong amount beside an irreversible write needs a person
	// as much as the write does.
	IrreversibleStep bool
	// Digest, when set, makes the record digests (matched and deleted)
	// instead of RecordDigest: the daemon passes a keyed digester
	// (KeyedDigester) so that a task names records without being an oracle
	// for them.
	Digest Digester
	// CompensationFailed makes the task record a compensation that stopped
	// part-way (TaskCompensationFailed, MANUAL_REPAIR); Deleted holds the
	// records it removed before failing.
	CompensationFailed bool
	Deleted            []Record
}

// NewTask returns the reconciliation task for a non-confirmed verdict of an
// irreversible effect (or of any effect of an irreversible step), or nil
// when none is due. scope (a session id) and index make the id unique and
// stable.
func NewTask(scope string, index int, substrate string, c *Contract, v *Verdict, opts TaskOptions) *Task {
	if (c.Risk != Irreversible && !opts.IrreversibleStep) || v.Decision == Confirmed {
		return nil
	}
	digest := opts.Digest
	if digest == nil {
		digest = RecordDigest
	}
	t := &Task{
		Kind:         TaskEffectRefuted,
		Substrate:    substrate,
		EffectKind:   c.Kind,
		ContractHash: c.Hash,
		Verdict:      v.Decision,
		Evidence: TaskEvidence{
			ObservedCount: v.ObservedCount,
			ExpectedCount: v.ExpectedCount,
			RecordDigests: make([]string, 0, len(v.Matched)),
		},
	}
	for _, r := range v.Reasons {
		t.Reasons = append(t.Reasons, TaskReason{Code: r.Code, Summary: CodeSummary(r.Code)})
	}
	for _, r := range v.Matched {
		t.Evidence.RecordDigests = append(t.Evidence.RecordDigests, digest(r))
	}
	if c.Kind == FieldEquals && v.ObservedValue != nil && v.ExpectedValue != nil {
		eq := *v.ObservedValue == *v.ExpectedValue
		t.Evidence.ValuesMatch = &eq
	}
	switch {
	case opts.CompensationFailed:
		t.Kind = TaskCompensationFailed
		t.SuggestedAction = ActionManualRepair
		for _, r := range opts.Deleted {
			t.Evidence.DeletedDigests = append(t.Evidence.DeletedDigests, digest(r))
		}
	case v.Decision == Indeterminate:
		t.Kind = TaskEffectIndeterminate
		t.SuggestedAction = ActionRestoreAccess
	case v.ObservedCount != nil && v.ExpectedCount != nil && *v.ObservedCount > *v.ExpectedCount:
		t.SuggestedAction = ActionRemoveDuplicates
	default:
		t.SuggestedAction = ActionManualRepair
	}
	t.ID = taskID(scope, index, t.Kind, c.Hash)
	return t
}

// SuggestForOutcome adjusts the tasks of a step to its outcome: a step
// that HALTED_BEFORE_EFFECT (every effect affirmatively refuted) suggests
// REVERIFY_BEFORE_RETRY for each task, never MANUAL_REPAIR: there is
// nothing to repair yet, and a retry without a fresh verification could
// double a save that was only slow. Nil tasks are skipped.
func SuggestForOutcome(o Outcome, tasks []*Task) {
	if o != HaltedBeforeEffect {
		return
	}
	for _, t := range tasks {
		if t != nil && t.Kind != TaskCompensationFailed {
			t.SuggestedAction = ActionReverifyBeforeRetry
		}
	}
}

func taskID(scope string, index int, kind, hash string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + strconv.Itoa(index) + "\x00" + kind + "\x00" + hash))
	return "rt_" + hex.EncodeToString(sum[:12])
}

// CompensationPlan names the duplicates to delete: Delete holds the records
// past the first expected_count, Keep the ones that stay.
type CompensationPlan struct {
	Keep   []Record
	Delete []Record
}

// PlanCompensation plans the one automatic repair verifierd knows: deleting
// the duplicates of an irreversible record_written refuted with only
// COUNT_OVER, down to expected_count records (lowest identities kept). Any
// other verdict gets an error saying why it cannot be compensated.
func PlanCompensation(c *Contract, v *Verdict) (*CompensationPlan, error) {
	switch {
	case c.Kind != RecordWritten:
		return nil, fmt.Errorf("only record_written duplicates can be compensated, not %s", c.Kind)
	case c.Risk != Irreversible:
		return nil, fmt.Errorf("compensation is only for irreversible effects")
	case v.Decision != Refuted || len(v.Reasons) != 1 || v.Reasons[0].Code != ReasonCountOver:
		return nil, fmt.Errorf("compensation only removes duplicates (a verdict refuted with COUNT_OVER alone)")
	case len(v.Matched) <= c.ExpectedCount:
		return nil, fmt.Errorf("no duplicates to remove")
	}
	type keyed struct {
		id  string
		rec Record
	}
	ks := make([]keyed, len(v.Matched))
	seen := map[string]bool{}
	for i, r := range v.Matched {
		id, ok := fieldIdentity(r, c.IdentityField)
		if !ok {
			return nil, fmt.Errorf("a duplicate has no %q, so it cannot be addressed for deletion", c.IdentityField)
		}
		if seen[id] {
			return nil, fmt.Errorf("two duplicates share one identity, so neither can be deleted alone")
		}
		seen[id] = true
		ks[i] = keyed{id, r}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return compareIdentities(a.id, b.id) })
	plan := &CompensationPlan{}
	for i, k := range ks {
		if i < c.ExpectedCount {
			plan.Keep = append(plan.Keep, k.rec)
		} else {
			plan.Delete = append(plan.Delete, k.rec)
		}
	}
	return plan, nil
}

// compareIdentities orders identities numerically when both are integers,
// and by text otherwise (integers first): the order the merge join expects.
func compareIdentities(a, b string) int {
	return cmpOrd(makeOrdID(a), makeOrdID(b))
}
