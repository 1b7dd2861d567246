package session

import (
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/sdk"
)

// ResultTier is the weakest tier of a result's effects and their lowest
// oracle rung (oracle.Visual for a result without effects).
func ResultTier(r *Result) (int, oracle.Rung) {
	tier, rung := 0, oracle.Counterparty
	for _, e := range r.Effects {
		tier = max(tier, e.Tier)
		rung = min(rung, oracle.Of(e.Substrate, sdk.Tier(e.Tier)))
	}
	if len(r.Effects) == 0 {
		rung = oracle.Visual
	}
	return tier, rung
}

// ResultRung is the lowest oracle rung of a result's effects (what a
// Reverification reports).
func ResultRung(r *Result) oracle.Rung {
	_, rung := ResultTier(r)
	return rung
}
