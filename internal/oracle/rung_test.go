package oracle

import (
	"testing"

	"github.com/verifierd/verifierd/internal/builtin"
	"github.com/verifierd/verifierd/sdk"
)

func TestOf(t *testing.T) {
	cases := []struct {
		kind string
		tier sdk.Tier
		want Rung
	}{
		{"onscreen", sdk.TierReacquiredState, Visual},
		{"onscreen", sdk.TierScreenConsistency, Visual},
		{"ui_readback", sdk.TierIndependentSession, SeparateSession},
		{"sql", sdk.TierIndependentSystem, SystemOfRecord},
		{"document-hash", sdk.TierIndependentSystem, SystemOfRecord},
		{"ldap", sdk.TierIndependentSystem, SystemOfRecord},
		{"ldap", sdk.TierIndependentSession, SeparateSession},
		{"ldap", sdk.TierReacquiredState, Visual},
		{"ldap", sdk.TierScreenConsistency, Visual},
	}
	for _, c := range cases {
		if got := Of(c.kind, c.tier); got != c.want {
			t.Errorf("Of(%q, %d) = %d, want %d", c.kind, c.tier, got, c.want)
		}
	}
}

// TestEveryBuiltinPlaced: a new first-party kind must be placed by name,
// not fall through to its tier unnoticed.
func TestEveryBuiltinPlaced(t *testing.T) {
	for _, a := range builtin.Adapters {
		// A kind placed by name keeps its rung at every tier.
		if Of(a.Kind, sdk.TierIndependentSystem) != Of(a.Kind, sdk.TierScreenConsistency) {
			t.Errorf("first-party kind %q has no rung of its own in Of", a.Kind)
		}
	}
}

func TestReward(t *testing.T) {
	if got := Reward("file", sdk.TierIndependentSystem); got != Visual {
		t.Errorf("Reward(file) = %d, want %d", got, Visual)
	}
	if got := Reward("document", sdk.TierIndependentSystem); got != Visual {
		t.Errorf("Reward(document) = %d, want %d", got, Visual)
	}
	if got := Reward("sql", sdk.TierIndependentSystem); got != SystemOfRecord {
		t.Errorf("Reward(sql) = %d, want %d", got, SystemOfRecord)
	}
}
