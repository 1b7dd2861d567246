package session

import (
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/sdk"
)

// RunBinding is what a session of a run records in its metadata and its
// verdict receipt binds: the run, the step, the values handed to it (by
// keyed digest) and the exact artifacts it consumed. The runs service
// (internal/runs) decides it; a session only keeps it.
type RunBinding struct {
	RunID    string          `json:"run_id"`
	Step     string          `json:"step"`
	Handoffs []HandoffBound  `json:"handoffs,omitempty"`
	Consumed []ConsumedBound `json:"consumed,omitempty"`
}

// HandoffBound is one handed-off value: where it came from and its keyed
// digest (the value itself is only in the session's parameters).
type HandoffBound struct {
	Param       string `json:"param"`
	FromStep    string `json:"from_step"`
	FromSession string `json:"from_session"`
	Effect      int    `json:"effect"`
	Field       string `json:"field"`
	ValueDigest string `json:"value_digest"`
}

// ConsumedBound is one artifact a step consumed: the exact digest and size
// CONFIRMED in the run and that verification's receipt digest.
type ConsumedBound struct {
	Artifact      string `json:"artifact"`
	SHA256        string `json:"sha256"`
	Size          int64  `json:"size"`
	ReceiptDigest string `json:"receipt_digest"`
}

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
