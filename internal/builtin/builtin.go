// Package builtin is the one list of the adapter kinds verifierd ships: for
// each, its kind, the tier its mechanism earns, and where its plugin main
// lives (cmd/plugins/<kind>, built as verifier-adapter-<kind>). The
// deployment parser, the plugin host and the end-to-end tests read it; the
// Makefile builds every folder under cmd/plugins, and a test here keeps
// those folders and this table the same.
package builtin

import (
	"slices"

	"github.com/verifierd/verifierd/sdk"
)

// BinaryPrefix starts every adapter binary's name: verifier-adapter-<kind>.
const BinaryPrefix = "verifier-adapter-"

// Adapter is one first-party adapter.
type Adapter struct {
	// Kind is the deployment's `kind:` and the name of the folder of its
	// main under cmd/plugins.
	Kind string
	// Tier is pinned: a built-in binary that reports another tier is
	// refused. With ConfiguredTier it is the strongest tier the mechanism
	// can have; its configuration may only weaken it.
	Tier sdk.Tier
	// ConfiguredTier: the tier depends on the configuration (onscreen: 3
	// when it re-opens the record, 4 when it reads the save's own screen).
	ConfiguredTier bool
}

// Binary is the adapter binary's file name.
func (a Adapter) Binary() string { return BinaryPrefix + a.Kind }

// Package is the import path of the adapter's main, relative to the module
// root.
func (a Adapter) Package() string { return "./cmd/plugins/" + a.Kind }

// Adapters are the first-party adapters, in the order the docs list them.
var Adapters = []Adapter{
	{Kind: "sql", Tier: sdk.TierIndependentSystem},
	{Kind: "document-hash", Tier: sdk.TierIndependentSystem},
	{Kind: "document", Tier: sdk.TierIndependentSystem},
	{Kind: "file", Tier: sdk.TierIndependentSystem},
	{Kind: "email", Tier: sdk.TierIndependentSystem},
	{Kind: "rest", Tier: sdk.TierIndependentSystem},
	{Kind: "graphql", Tier: sdk.TierIndependentSystem},
	{Kind: "fhir", Tier: sdk.TierIndependentSystem},
	{Kind: "ui_readback", Tier: sdk.TierIndependentSession},
	{Kind: "onscreen", Tier: sdk.TierReacquiredState, ConfiguredTier: true},
}

// Reserved are kinds verifierd keeps for itself without shipping an
// adapter yet; no plugin may take them either.
var Reserved = []string{}

// IsKind reports whether kind is built in or reserved: a plugin can never
// take it.
func IsKind(kind string) bool {
	_, ok := Lookup(kind)
	return ok || slices.Contains(Reserved, kind)
}

// Lookup returns the first-party adapter of kind.
func Lookup(kind string) (Adapter, bool) {
	i := slices.IndexFunc(Adapters, func(a Adapter) bool { return a.Kind == kind })
	if i < 0 {
		return Adapter{}, false
	}
	return Adapters[i], true
}
