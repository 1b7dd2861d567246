package reward

import (
	"fmt"
	"slices"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// Outcomes of a scored episode.
const (
	OutcomeVerified               = "verified"
	OutcomeWrongEffect            = "wrong_effect"
	OutcomeHaltedBeforeEffect     = "halted_before_effect"
	OutcomeRefused                = "refused"
	OutcomeRejectedPolicy         = "rejected_policy"
	OutcomeReconciliationRequired = "reconciliation_required"
	OutcomeFailedPlatform         = "failed_platform"
)

// Runtime signals an episode may report. The signal is an input only: the
// read decides.
const (
	SignalCompleted = "completed"
)

var signals = map[string]bool{
	SignalCompleted: true, OutcomeHaltedBeforeEffect: true, OutcomeRefused: true,
	OutcomeRejectedPolicy: true, OutcomeFailedPlatform: true,
}

// Uncertainty values.
const (
	UncertaintyNone              = "none"
	UncertaintyOracleUnavailable = "oracle_unavailable"
	UncertaintyEffectUncertain   = "effect_uncertain"
)

// Judged is the judgement of one episode.
type Judged struct {
	Outcome     string
	Uncertainty string
	// Reason is the first reason code that decided a non-verified outcome.
	Reason string
	// Newness is how the oracle candidate proved a record new (Proof).
	Newness   string
	Required  []judge.Verdict
	Forbidden []judge.Verdict
}

// BindEffects binds the contract's effects to the graded subject.
func BindEffects(c *Contract, identity map[string]string) (req, forb []*judge.Contract, err error) {
	for i, e := range c.Required {
		b, err := judge.Bind(e, identity, fmt.Sprintf("required_effects[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		req = append(req, b)
	}
	for i, e := range c.Forbidden {
		b, err := judge.Bind(e, identity, fmt.Sprintf("forbidden_effects[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		forb = append(forb, b)
	}
	return req, forb, nil
}

// EffectJudge judges bound effects on an episode's baseline and after
// read: the daemon's one judging path (Oracle.Judge), one verdict per
// effect.
type EffectJudge func(effects []*judge.Contract, before, after OracleRead) Proof

// JudgeEpisode judges the bound effects on the episode's baseline and after
// read through judgeFn, and maps the verdicts to an outcome; the first
// matching row of the outcome table wins (docs/rewards.md). A judge that
// answers for another number of effects leaves every effect INDETERMINATE.
func JudgeEpisode(judgeFn EffectJudge, req, forb []*judge.Contract, before, afterRead OracleRead, signal string) Judged {
	j := Judged{Uncertainty: UncertaintyNone}
	after := afterRead.Snapshot
	proof := judgeFn(append(append([]*judge.Contract{}, req...), forb...), before, afterRead)
	vs := proof.Verdicts
	j.Newness = proof.Newness
	if len(vs) != len(req)+len(forb) {
		vs = make([]judge.Verdict, len(req)+len(forb))
		for i := range vs {
			vs[i] = judge.Verdict{Decision: judge.Indeterminate, Class: judge.ClassIndeterminate,
				Reasons: []judge.Reason{{Code: "JUDGE_FAILED", Message: "the judge did not answer for every effect"}}}
		}
	}
	j.Required, j.Forbidden = vs[:len(req):len(req)], vs[len(req):]
	if signal == "" {
		signal = SignalCompleted
	}
	switch {
	case signal == OutcomeFailedPlatform:
		j.Outcome = OutcomeFailedPlatform
		return j
	case !after.Reachable:
		j.Outcome, j.Uncertainty, j.Reason = OutcomeFailedPlatform, UncertaintyOracleUnavailable, judge.ReasonSORUnreachable
		return j
	}
	for _, vs := range [][]judge.Verdict{j.Required, j.Forbidden} {
		for _, v := range vs {
			if v.Decision == judge.Indeterminate {
				j.Outcome, j.Uncertainty, j.Reason = OutcomeReconciliationRequired, UncertaintyEffectUncertain, lastCode(v)
				return j
			}
		}
	}
	for i, v := range j.Forbidden {
		if forbiddenPresent(forb[i], v) {
			j.Outcome, j.Reason = OutcomeWrongEffect, "FORBIDDEN_PRESENT"
			return j
		}
	}
	if signal == SignalCompleted {
		for _, v := range j.Required {
			if v.Decision != judge.Confirmed {
				j.Outcome, j.Reason = OutcomeWrongEffect, lastCode(v)
				return j
			}
		}
		j.Outcome = OutcomeVerified
		return j
	}
	if slices.ContainsFunc(j.Required, requiredPresent) {
		j.Outcome, j.Uncertainty, j.Reason = OutcomeReconciliationRequired, UncertaintyEffectUncertain, "EFFECT_PRESENT_AFTER_"+signal
		return j
	}
	j.Outcome = signal
	return j
}

func lastCode(v judge.Verdict) string {
	if len(v.Reasons) == 0 {
		return ""
	}
	return v.Reasons[len(v.Reasons)-1].Code
}

func requiredPresent(v judge.Verdict) bool {
	return v.Decision == judge.Confirmed || (v.ObservedCount != nil && *v.ObservedCount > 0) || len(v.Matched) > 0
}

func forbiddenPresent(c *judge.Contract, v judge.Verdict) bool {
	if c.Kind == judge.FieldEquals {
		return v.Decision == judge.Confirmed
	}
	return v.Decision == judge.Confirmed || (v.ObservedCount != nil && *v.ObservedCount > 0) || len(v.Matched) > 0
}

// Scalar is the contract's scalar for an outcome; ok is false for an
// unscored outcome, which never becomes 0.
func (s Scoring) Scalar(outcome string) (float64, bool) {
	switch outcome {
	case OutcomeVerified:
		return s.VerifiedReward, true
	case OutcomeWrongEffect:
		return s.WrongEffectReward, true
	case OutcomeHaltedBeforeEffect:
		return s.HaltedBeforeEffectReward, true
	case OutcomeRefused:
		return s.RefusedReward, true
	case OutcomeRejectedPolicy:
		return s.RejectedPolicyReward, true
	}
	return 0, false
}

// Components splits a scalar by weight: value = scalar × weight ÷ Σ weights.
func (c *Contract) ComponentValues(scalar float64) []receipt.RewardComponent {
	var total float64
	for _, comp := range c.Components {
		total += comp.Weight
	}
	out := make([]receipt.RewardComponent, 0, len(c.Components))
	for _, comp := range c.Components {
		out = append(out, receipt.RewardComponent{Name: comp.Name, Weight: comp.Weight, Value: scalar * comp.Weight / total})
	}
	return out
}
