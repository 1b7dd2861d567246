// Package oracle places a read on the oracle ladder that receipts state
// beside the internal tier: how far the evidence stands from the surface
// the automation acted on. The table lives here and nowhere else;
// docs/receipts.md gives it to users.
package oracle

import "github.com/verifierd/verifierd/sdk"

// Rung is a step of the oracle ladder. Higher is stronger.
type Rung int32

const (
	// Visual is evidence read off a screen (on-screen reads, at any
	// tier): what the application shows, not what it stored.
	Visual Rung = 0
	// SeparateSession is a read through a separate read-only session of
	// the application (UI read-back).
	SeparateSession Rung = 1
	// SystemOfRecord is a read of the system of record itself: its
	// database, API, files or mail.
	SystemOfRecord Rung = 2
	// Counterparty is an acknowledgment from the other party of the
	// write. No adapter reaches it today: a plugin would have to declare
	// and prove it.
	Counterparty Rung = 3
)

// Of is the rung of a read by an adapter of kind at tier. A first-party
// kind has its rung fixed by what it reads; any other kind (a customer
// plugin) is placed by the tier it declared: tier 1 reads the system of
// record, tier 2 a separate session, tiers 3 and 4 a screen.
func Of(kind string, tier sdk.Tier) Rung {
	switch kind {
	case "onscreen":
		return Visual
	case "ui_readback":
		return SeparateSession
	case "sql", "rest", "graphql", "fhir", "email", "file", "document", "document-hash":
		return SystemOfRecord
	}
	switch tier {
	case sdk.TierIndependentSystem:
		return SystemOfRecord
	case sdk.TierIndependentSession:
		return SeparateSession
	default:
		return Visual
	}
}

// Reward is the rung of a reward read by an adapter of kind: a reward read
// from a file or a document is visual-floor evidence whatever its tier,
// since whoever writes the file writes the answer.
func Reward(kind string, tier sdk.Tier) Rung {
	switch kind {
	case "file", "document", "document-hash":
		return Visual
	}
	return Of(kind, tier)
}
