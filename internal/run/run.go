// Package run is the run classifier: from the latest state of every step
// and artifact edge of a workflow run it decides the run's one outcome,
// its tier and lowest oracle rung, and the reason codes of anything short
// of VERIFIED. It is a pure function of its input; internal/runs (the
// runs service) gathers the input from the store and seals the answer in
// a run receipt.
// docs/runs.md gives the rules as a table.
package run

import (
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/oracle"
)

// Outcomes of a run. The first five are also step outcomes; ROLLED_BACK_VERIFIED
// is a run's only (RollbackCheck).
const (
	Verified               = "VERIFIED"
	HaltedBeforeEffect     = "HALTED_BEFORE_EFFECT"
	ReconciliationRequired = "RECONCILIATION_REQUIRED"
	RejectedPolicy         = "REJECTED_POLICY"
	FailedPlatform         = "FAILED_PLATFORM"
	RolledBackVerified     = "ROLLED_BACK_VERIFIED"
)

// Reason codes of a run that is not VERIFIED.
const (
	// CodeStepNotBegun: a consequential step has no session in the run.
	CodeStepNotBegun = "step_not_begun"
	// CodeStepNotVerified: a consequential step's latest result is not
	// VERIFIED (or it was never verified).
	CodeStepNotVerified = "step_not_verified"
	// CodeStepRefused: the run stopped on a refused Begin of the step.
	CodeStepRefused = "step_refused"
	// CodeArtifactUnverified: a consumed artifact is not CONFIRMED in the
	// run, or an artifact's check was REFUTED or INDETERMINATE.
	CodeArtifactUnverified = "artifact_unverified"
	// CodeTierBelowRunMin: a step was read at a tier weaker than
	// run_min_tier.
	CodeTierBelowRunMin = "tier_below_run_min"
	// CodeRungBelowRunMin: a step was read on an oracle rung below
	// run_min_rung.
	CodeRungBelowRunMin = "rung_below_run_min"
	// CodeReconciliationSticky: the run was sealed RECONCILIATION_REQUIRED
	// before; only VERIFIED (or a rollback check) leaves that state.
	CodeReconciliationSticky = "reconciliation_sticky"
	// CodeEarlierAttemptLanded: an earlier attempt of a step (a session
	// that ended HALTED_BEFORE_EFFECT before the step began again) no
	// longer reads absent when the run is sealed: its save landed late,
	// beside the step's later attempt.
	CodeEarlierAttemptLanded = "earlier_attempt_landed"
	// CodeVerifiedStepChanged: a step's VERIFIED session no longer reads
	// VERIFIED against its own baseline when the run is sealed (a
	// duplicate landed, its record changed or went).
	CodeVerifiedStepChanged = "verified_step_changed"
)

// Verdicts of an artifact check.
const (
	ArtifactConfirmed     = "CONFIRMED"
	ArtifactRefuted       = "REFUTED"
	ArtifactIndeterminate = "INDETERMINATE"
)

// Step is one workflow step's state in the run.
type Step struct {
	Name string
	// Consequential: risk irreversible or reversible; the run needs it
	// VERIFIED.
	Consequential bool
	// Began: the step has a session in the run.
	Began bool
	// Outcome is the terminal outcome of the step's latest session's
	// latest result (after any Reverify); "" while not verified.
	Outcome string
	// Tier is the weakest tier of the session's effects (0 while not
	// verified); OracleRung the lowest rung.
	Tier       int
	OracleRung oracle.Rung
	// Refused is the terminal outcome of the latest refused Begin of the
	// step (REJECTED_POLICY, FAILED_PLATFORM or HALTED_BEFORE_EFFECT), ""
	// when none since its latest session. It stops the run only while the
	// step has no session or its latest one ended HALTED_BEFORE_EFFECT.
	Refused string
}

// Artifact is one artifact edge of the run.
type Artifact struct {
	Name     string
	FromStep string
	// Consumed: a step of the workflow consumes it.
	Consumed bool
	// Verdict is the latest VerifyArtifact verdict in the run, "" when
	// never checked.
	Verdict string
}

// Input is what the classifier reads.
type Input struct {
	// Steps are the workflow's steps, in the workflow's order.
	Steps     []Step
	Artifacts []Artifact
	// RunMinTier is the weakest step tier a VERIFIED run may have.
	RunMinTier int
	// RunMinRung is the lowest oracle rung a step of a VERIFIED run may
	// have been read on.
	RunMinRung oracle.Rung
	// Sticky: the run was sealed RECONCILIATION_REQUIRED before, or an
	// artifact check was REFUTED or INDETERMINATE: something may have
	// landed, so no "nothing landed" outcome can follow.
	Sticky bool
	// Drifted are the sessions that, read again against their own
	// baselines when the run is sealed, no longer read as their recorded
	// result (empty when every one still does).
	Drifted []Drift `json:",omitempty"`
}

// Drift is one session of a consequential step that no longer reads as its
// recorded result when the run is sealed.
type Drift struct {
	Step      string
	SessionID string
	// Latest: the session stands for the step (its latest); false for an
	// earlier attempt the step began again after.
	Latest bool
	// Recorded is the session's recorded outcome (VERIFIED or
	// HALTED_BEFORE_EFFECT); Effect and Class the first effect that reads
	// otherwise now and the judge's class of it.
	Recorded string
	Effect   int
	Class    string
	// Codes are the judge's reason codes of that effect's re-read
	// (CHANGES_UNUSABLE: its write set's log was released), named in
	// the reason's message.
	Codes []string
}

// reason is the run reason a drift gives.
func (d Drift) reason() Reason {
	switch {
	case !d.Latest:
		return Reason{Code: CodeEarlierAttemptLanded, Step: d.Step, Message: fmt.Sprintf("step %q's earlier attempt, session %s, ended %s, but its effect %d no longer reads absent (%s): its save landed after the step began again; reconcile the duplicate, then Reverify session %s", d.Step, d.SessionID, d.Recorded, d.Effect, d.Class, d.SessionID)}
	case d.Recorded == HaltedBeforeEffect:
		return Reason{Code: CodeStepNotVerified, Step: d.Step, Message: fmt.Sprintf("step %q's session %s ended HALTED_BEFORE_EFFECT, but its effect %d no longer reads absent (%s): Reverify that session", d.Step, d.SessionID, d.Effect, d.Class)}
	default:
		return Reason{Code: CodeVerifiedStepChanged, Step: d.Step, Message: fmt.Sprintf("step %q's session %s was %s, but its effect %d reads %s%s against its baseline now: reconcile the record, then finish the run again", d.Step, d.SessionID, d.Recorded, d.Effect, d.Class, codesNote(d.Codes))}
	}
}

// codesNote is " (A, B)" for reason codes, "" for none.
func codesNote(codes []string) string {
	if len(codes) == 0 {
		return ""
	}
	return " (" + strings.Join(codes, ", ") + ")"
}

// ReasonCodes are the codes of rs, in order.
func ReasonCodes(rs []Reason) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

// Reason is one reason a run is not VERIFIED.
type Reason struct {
	Code string `json:"code"`
	// Step or Artifact names what the reason is about.
	Step     string `json:"step,omitempty"`
	Artifact string `json:"artifact,omitempty"`
	Message  string `json:"message"`
}

// Classification is the classifier's answer.
type Classification struct {
	Outcome string
	// Reasons are empty when VERIFIED.
	Reasons []Reason
	// Tier is the weakest tier of the steps with a result (0: none);
	// OracleRung the lowest rung of those steps (0 when none).
	Tier       int
	OracleRung oracle.Rung
}

// Classify decides a run's outcome:
//
//   - VERIFIED: every consequential step's latest result is VERIFIED,
//     every consumed artifact is CONFIRMED, no artifact check failed, and
//     every step with a result was read at run_min_tier or stronger and
//     on run_min_rung or higher;
//   - HALTED_BEFORE_EFFECT: nothing landed: every begun consequential
//     step ended HALTED_BEFORE_EFFECT (or none began), no artifact was
//     seen, and no Begin was refused;
//   - REJECTED_POLICY / FAILED_PLATFORM: nothing landed as above, and the
//     run stopped on a Begin refused by policy / by a platform failure
//     (the first such step in workflow order decides);
//   - RECONCILIATION_REQUIRED: anything else, and whatever is not VERIFIED
//     once the run is Sticky; a session that drifted (Input.Drifted) is
//     never VERIFIED nor nothing landed.
func Classify(in Input) Classification {
	c := Classification{}
	first := true
	for _, s := range in.Steps {
		if s.Outcome == "" || s.Tier == 0 {
			continue
		}
		c.Tier = max(c.Tier, s.Tier)
		if first || s.OracleRung < c.OracleRung {
			c.OracleRung = s.OracleRung
		}
		first = false
	}

	var reasons []Reason
	for _, s := range in.Steps {
		switch {
		case s.stopped() && s.Consequential:
			reasons = append(reasons, Reason{Code: CodeStepRefused, Step: s.Name, Message: fmt.Sprintf("the Begin of step %q was refused (%s)", s.Name, s.Refused)})
		case !s.Consequential:
		case !s.Began:
			reasons = append(reasons, Reason{Code: CodeStepNotBegun, Step: s.Name, Message: fmt.Sprintf("step %q has no session in the run", s.Name)})
		case s.Outcome != Verified:
			what := s.Outcome
			if what == "" {
				what = "not verified"
			}
			reasons = append(reasons, Reason{Code: CodeStepNotVerified, Step: s.Name, Message: fmt.Sprintf("step %q is %s", s.Name, what)})
		}
		if s.Outcome != "" && s.Tier > in.RunMinTier {
			reasons = append(reasons, Reason{Code: CodeTierBelowRunMin, Step: s.Name, Message: fmt.Sprintf("step %q was read at tier %d, weaker than run_min_tier %d", s.Name, s.Tier, in.RunMinTier)})
		}
		if s.Outcome != "" && s.OracleRung < in.RunMinRung {
			reasons = append(reasons, Reason{Code: CodeRungBelowRunMin, Step: s.Name, Message: fmt.Sprintf("step %q was read on oracle rung %d, below run_min_rung %d", s.Name, s.OracleRung, in.RunMinRung)})
		}
	}
	for _, d := range in.Drifted {
		reasons = append(reasons, d.reason())
	}
	seen := len(in.Drifted) > 0
	for _, a := range in.Artifacts {
		if a.Verdict != "" {
			seen = true
		}
		switch {
		case a.Verdict == ArtifactRefuted || a.Verdict == ArtifactIndeterminate:
			reasons = append(reasons, Reason{Code: CodeArtifactUnverified, Artifact: a.Name, Step: a.FromStep, Message: fmt.Sprintf("artifact %q of step %q was checked %s", a.Name, a.FromStep, a.Verdict)})
		case a.Consumed && a.Verdict != ArtifactConfirmed:
			reasons = append(reasons, Reason{Code: CodeArtifactUnverified, Artifact: a.Name, Step: a.FromStep, Message: fmt.Sprintf("artifact %q of step %q is consumed but not CONFIRMED in the run", a.Name, a.FromStep)})
		}
	}
	if len(reasons) == 0 {
		c.Outcome = Verified
		return c
	}
	c.Reasons = reasons
	if in.Sticky {
		c.Outcome = ReconciliationRequired
		c.Reasons = append(c.Reasons, Reason{Code: CodeReconciliationSticky, Message: "the run needed reconciling before; it stays RECONCILIATION_REQUIRED until every step is VERIFIED again"})
		return c
	}
	if !seen && nothingLanded(in.Steps) {
		c.Outcome = HaltedBeforeEffect
		for _, s := range in.Steps {
			if s.stopped() && s.Consequential {
				c.Outcome = s.Refused
				break
			}
		}
		return c
	}
	c.Outcome = ReconciliationRequired
	return c
}

// stopped reports whether a refused Begin stopped the run at s.
func (s Step) stopped() bool {
	return s.Refused != "" && (!s.Began || s.Outcome == HaltedBeforeEffect)
}

// nothingLanded: every step that began ended HALTED_BEFORE_EFFECT (a
// read-only step's result counts too: it may have been wrong about
// nothing, but it changes nothing either, so only its absence of a
// result is a doubt).
func nothingLanded(steps []Step) bool {
	for _, s := range steps {
		if !s.Began {
			continue
		}
		if !s.Consequential && s.Outcome != "" {
			continue
		}
		if s.Outcome != HaltedBeforeEffect {
			return false
		}
	}
	return true
}

// EffectCheck is one effect of a begun step as a rollback check re-read
// it against the step's original baseline.
type EffectCheck struct {
	Step         string
	SessionID    string
	Effect       int
	ContractHash string
	// Class is the judge's result class of the re-read (judge.Class):
	// "refuted" when the effect is affirmatively absent again (no new
	// record, no lost record, no existing record changed).
	Class string
	// Reasons are the re-read's reason codes and messages.
	Reasons []Reason
	// Source names the collection the effect was read from (the
	// deployment candidate): a loss is forgiven only of records the run
	// created in that same collection.
	Source string
	// Lost and Changed are the identities of every record the re-read
	// counted in a loss reason and in EXISTING_RECORD_CHANGED
	// (judge.Verdict.Lost and Changed: complete, where a message names a
	// few). Internal evidence: never shown.
	Lost    []string `json:"-"`
	Changed []string `json:"-"`
}

// CreatedKey is the key of a record the run created, with identity id, in
// the collection source (the created set ForgivenClass reads).
func CreatedKey(source, id string) string { return source + "\x00" + id }

// ClassAbsent is the judge class of an effect affirmatively absent.
const ClassAbsent = "refuted"

// RolledBack decides a rollback check: the run is ROLLED_BACK_VERIFIED
// when every effect of every begun step reads affirmatively absent
// against its original baseline; otherwise it returns what remains (every
// other effect, in the order given) and the run is unchanged.
func RolledBack(checks []EffectCheck) (bool, []EffectCheck) {
	var remains []EffectCheck
	for _, c := range checks {
		if c.Class != ClassAbsent {
			remains = append(remains, c)
		}
	}
	return len(remains) == 0, remains
}

// Judge reason codes and classes a forgiven loss is read through
// (judge.ReasonCountUnder, judge.ReasonCollateralLoss,
// judge.ReasonSetScopeLoss, judge.ClassConfirmed).
const (
	codeCountUnder     = "COUNT_UNDER"
	codeCollateralLoss = "COLLATERAL_LOSS"
	codeSetScopeLoss   = "SET_SCOPE_LOSS"
	// ClassConfirmed is the judge class of an effect that holds.
	ClassConfirmed = "confirmed"
	classConflict  = "conflicting"
)

// ForgivenClass reads a later step's "collateral loss" as what it is
// when every record lost was created by the run itself: a step's baseline
// holds the records earlier steps wrote, so undoing those steps (or
// removing a duplicate the run wrote) shows up as a loss against it. It
// is c's class once a loss of records the run created is set aside: when c is "conflicting", changed no existing record, and every
// identity it lost (the judge's complete list, Lost) is in created for its
// own Source (CreatedKey), it reads ClassAbsent if what is left of its
// reasons is COUNT_UNDER alone, ClassConfirmed if nothing is left. Any
// other loss, a loss without its identities, or any other fault keeps
// c.Class.
func ForgivenClass(c EffectCheck, created map[string]bool) string {
	if c.Class != classConflict || c.Source == "" || len(c.Lost) == 0 || len(c.Changed) > 0 {
		return c.Class
	}
	for _, id := range c.Lost {
		if !created[CreatedKey(c.Source, id)] {
			return c.Class
		}
	}
	var rest []string
	for _, r := range c.Reasons {
		if r.Code != codeCollateralLoss && r.Code != codeSetScopeLoss {
			rest = append(rest, r.Code)
		}
	}
	switch {
	case len(rest) == 0:
		return ClassConfirmed
	case len(rest) == 1 && rest[0] == codeCountUnder:
		return ClassAbsent
	}
	return c.Class
}
