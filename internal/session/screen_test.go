package session

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// TestMarkScreenConsistency: a CONFIRMED at tier 3 or 4 gains the reason
// and keeps its decision and class; other verdicts and tiers are untouched.
func TestMarkScreenConsistency(t *testing.T) {
	t.Parallel()
	confirmed := func() judge.Verdict {
		return judge.Verdict{Decision: judge.Confirmed, Class: judge.ClassConfirmed, Reasons: []judge.Reason{{Code: "OK", Message: "ok"}}}
	}
	tests := map[string]struct {
		v     judge.Verdict
		tier  sdk.Tier
		codes []string
	}{
		"tier 3 confirmed": {confirmed(), sdk.TierReacquiredState, []string{"OK", ReasonScreenConsistencyOnly}},
		"tier 4 confirmed": {confirmed(), sdk.TierScreenConsistency, []string{"OK", ReasonScreenConsistencyOnly}},
		"tier 2 confirmed": {confirmed(), sdk.TierIndependentSession, []string{"OK"}},
		"tier 3 refuted":   {judge.Verdict{Decision: judge.Refuted, Class: judge.ClassConflicting, Reasons: []judge.Reason{{Code: "COUNT_UNDER"}}}, sdk.TierReacquiredState, []string{"COUNT_UNDER"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := tt.v
			decision, class := v.Decision, v.Class
			markScreenConsistency(&v, tt.tier)
			markScreenConsistency(&v, tt.tier) // idempotent
			if diff := cmp.Diff(tt.codes, v.Codes()); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
			if v.Decision != decision || v.Class != class {
				t.Errorf("decision/class changed to %s/%s", v.Decision, v.Class)
			}
		})
	}
}
