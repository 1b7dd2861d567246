package judge

// Class refines a verdict into what the operator has to reconcile
// (docs/contracts.md §4).
type Class string

// Result classes. Only ClassConfirmed maps to a pass.
const (
	ClassConfirmed     Class = "confirmed"
	ClassStale         Class = "stale"
	ClassUnavailable   Class = "unavailable"
	ClassIndeterminate Class = "indeterminate"
	ClassConflicting   Class = "conflicting"
	ClassRefuted       Class = "refuted"
)

// Classify returns v's result class: the first rule that applies. A refuted
// verdict from an adapter whose surface can hide records
// (opts.AbsenceNotProof) is conflicting, so it can never halt a step as
// "nothing landed".
func Classify(v *Verdict, opts Options) Class {
	switch v.Decision {
	case Confirmed:
		return ClassConfirmed
	case Indeterminate:
		switch {
		case v.Stale:
			return ClassStale
		case v.Unavailable:
			return ClassUnavailable
		}
		return ClassIndeterminate
	case Refuted:
		if opts.AbsenceNotProof || v.HasLoss() || v.hasCode(ReasonExistingRecordChanged) || v.hasCode(ReasonUnexplainedChange) || v.hasCode(ReasonOtherWrite) || (v.ObservedCount != nil && *v.ObservedCount > 0) {
			return ClassConflicting
		}
		return ClassRefuted
	}
	return ClassIndeterminate
}

// Outcome is the outcome of a step (a set of effects).
type Outcome string

// Step outcomes.
const (
	Verified               Outcome = "VERIFIED"
	HaltedBeforeEffect     Outcome = "HALTED_BEFORE_EFFECT"
	ReconciliationRequired Outcome = "RECONCILIATION_REQUIRED"
)

// StepOutcome is VERIFIED only when every effect is confirmed,
// HALTED_BEFORE_EFFECT only when every effect is refuted (affirmatively
// nothing landed), and RECONCILIATION_REQUIRED otherwise, including for an
// empty step, which proves nothing.
func StepOutcome(classes []Class) Outcome {
	if len(classes) == 0 {
		return ReconciliationRequired
	}
	all := func(c Class) bool {
		for _, x := range classes {
			if x != c {
				return false
			}
		}
		return true
	}
	switch {
	case all(ClassConfirmed):
		return Verified
	case all(ClassRefuted):
		return HaltedBeforeEffect
	}
	return ReconciliationRequired
}

// OutcomeOf returns the step outcome of a set of verdicts.
func OutcomeOf(vs []Verdict) Outcome {
	classes := make([]Class, len(vs))
	for i := range vs {
		classes[i] = vs[i].Class
	}
	return StepOutcome(classes)
}

// Demote applies an adapter's demotion to v: CONFIRMED may become REFUTED or
// INDETERMINATE, REFUTED may become INDETERMINATE, and nothing else changes.
// A request to promote, or to keep the same decision, is ignored and
// reported as not applied. The class is made again under opts (Classify).
func Demote(v *Verdict, to Decision, code, message string, opts Options) bool {
	allowed := (v.Decision == Confirmed && (to == Refuted || to == Indeterminate)) ||
		(v.Decision == Refuted && to == Indeterminate)
	if !allowed {
		return false
	}
	if code == "" {
		code = ReasonAdapterDemoted
	}
	demoted := Reason{Code: code, Message: message}
	if v.Decision == Confirmed {
		// The confirming reason no longer holds.
		v.Reasons = []Reason{demoted}
	} else {
		v.Reasons = append(v.Reasons, demoted)
	}
	v.Decision = to
	if to == Indeterminate {
		v.ObservedCount = nil
		v.ExpectedCount = nil
	}
	v.Class = Classify(v, opts)
	return true
}

// hasCode reports whether code is among v's reasons.
func (v *Verdict) hasCode(code string) bool {
	for _, r := range v.Reasons {
		if r.Code == code {
			return true
		}
	}
	return false
}
