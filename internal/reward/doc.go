// Package reward turns one verification of an RL episode into a signed
// reward: reward contracts registered by the operator (a directory with
// contract.yaml, required_effects.yaml, forbidden_effects.yaml and an
// optional certificate.json), episodes registered before their rollout
// (the baseline and the graded subject are fixed then), scoring through the
// daemon's judge into the outcome table, the per-contract policy-update
// high-water mark, and calibration: a corpus derived from the contract,
// trials judged by the same judge, and the exact one-sided Clopper–Pearson
// bound a certificate carries.
//
// The package never reads a system of record itself: an Oracle does (the
// session manager, through the contract's registered deployment), so the
// tier always comes from the selected adapter's mechanism.
package reward
