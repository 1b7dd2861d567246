package session

import (
	"fmt"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// ReasonScreenConsistencyOnly marks a CONFIRMED read off the acting
// application's own screen (tier 3, reacquired state, or tier 4, screen
// consistency): the screen agreed with the contract, which is a consistency
// signal and not a read of the system of record.
const ReasonScreenConsistencyOnly = "SCREEN_CONSISTENCY_ONLY"

// markScreenConsistency adds ReasonScreenConsistencyOnly to a CONFIRMED
// verdict read at tier 3 or 4. The reason is informational: the decision,
// the class and the counts stay as they are. A Verdict hook cannot do this
// (it may only demote, and a demotion replaces a CONFIRMED's reasons), so
// the daemon adds it, keyed on the tier the adapter declared after
// Configure.
func markScreenConsistency(v *judge.Verdict, tier sdk.Tier) {
	if v.Decision != judge.Confirmed || tier < sdk.TierReacquiredState {
		return
	}
	for _, r := range v.Reasons {
		if r.Code == ReasonScreenConsistencyOnly {
			return
		}
	}
	what := "reacquired state: the application's own screen, re-opened by another path"
	if tier >= sdk.TierScreenConsistency {
		what = "screen consistency: the screen the save left"
	}
	v.Reasons = append(v.Reasons, judge.Reason{Code: ReasonScreenConsistencyOnly,
		Message: fmt.Sprintf("confirmed on the application's own screen (tier %d, %s); a consistency check, not a read of the system of record", tier, what)})
}
