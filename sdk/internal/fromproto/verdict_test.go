package fromproto

import (
	"testing"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
)

// TestVerdictBothWays: each verdict maps to its own enum and back; an
// unknown verdict is UNSPECIFIED on the wire, and UNSPECIFIED or an
// unknown enum reads as no verdict (which a demotion takes as
// INDETERMINATE).
func TestVerdictBothWays(t *testing.T) {
	t.Parallel()
	want := map[sdk.Verdict]adapterv1.Verdict{
		sdk.VerdictConfirmed:     adapterv1.Verdict_VERDICT_CONFIRMED,
		sdk.VerdictRefuted:       adapterv1.Verdict_VERDICT_REFUTED,
		sdk.VerdictIndeterminate: adapterv1.Verdict_VERDICT_INDETERMINATE,
	}
	for v, e := range want {
		if got := toproto.Verdict(v); got != e {
			t.Errorf("toproto.Verdict(%q) = %v, want %v", v, got, e)
		}
		if got := Verdict(e); got != v {
			t.Errorf("Verdict(%v) = %q, want %q", e, got, v)
		}
	}
	if got := toproto.Verdict("MAYBE"); got != adapterv1.Verdict_VERDICT_UNSPECIFIED {
		t.Errorf("an unknown verdict went out as %v", got)
	}
	for _, e := range []adapterv1.Verdict{adapterv1.Verdict_VERDICT_UNSPECIFIED, adapterv1.Verdict(99)} {
		if got := Verdict(e); got != "" {
			t.Errorf("Verdict(%v) = %q, want none", e, got)
		}
	}
	if d := Demotion(&adapterv1.VerdictResponse{Demotion: &adapterv1.Demotion{Verdict: adapterv1.Verdict(99)}}); d.Verdict != sdk.VerdictIndeterminate {
		t.Errorf("a demotion to an unknown verdict reads as %q, want INDETERMINATE", d.Verdict)
	}
}
