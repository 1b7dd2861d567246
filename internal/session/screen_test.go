package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
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

// tieredAdapter reports one tier before Configure and another after, as an
// adapter whose mechanism depends on its configuration does.
type tieredAdapter struct {
	*memAdapter
	before, after sdk.Tier
	configured    atomic.Bool
}

func (a *tieredAdapter) Info() sdk.Info {
	info := a.memAdapter.Info()
	info.Tier = a.before
	if a.configured.Load() {
		info.Tier = a.after
	}
	return info
}

func (a *tieredAdapter) Configure(context.Context, sdk.ConfigureRequest) error {
	a.configured.Store(true)
	return nil
}

// TestConfiguredTier: the daemon asks for the tier again after Configure
// and keeps the weaker answer, never stronger than a built-in kind's floor;
// a tier-3/4 CONFIRMED carries SCREEN_CONSISTENCY_ONLY.
func TestConfiguredTier(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		kind          string
		before, after sdk.Tier
		tier          int    // the tier Begin selects
		refused       string // or the refusal
	}{
		"onscreen weakens to 4 after configure":  {"onscreen", 3, 4, 4, ""},
		"onscreen stays at its floor":            {"onscreen", 3, 3, 3, ""},
		"onscreen claims tier 1":                 {"onscreen", 1, 1, 0, "stronger than its mechanism's best"},
		"onscreen claims tier 1 after configure": {"onscreen", 3, 1, 3, ""},
		"a plugin cannot strengthen by config":   {"flip-test", 4, 1, 4, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			a := &tieredAdapter{memAdapter: &memAdapter{kind: tt.kind, absence: true, table: tab}, before: tt.before, after: tt.after}
			m := newManager(t, a)
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: " + tt.kind + ", newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("begin = %v; want a refusal saying %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Effects[0].Tier; got != tt.tier {
				t.Fatalf("begin selected tier %d; want %d", got, tt.tier)
			}
			tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			e := v.Effects[0]
			want := []string{judge.ReasonCountExact, ReasonScreenConsistencyOnly}
			var codes []string
			for _, r := range e.Reasons {
				codes = append(codes, r.Code)
			}
			if diff := cmp.Diff(want, codes); e.Verdict != judge.Confirmed || diff != "" {
				t.Errorf("verify = %s %v; want CONFIRMED with (-want +got):\n%s", e.Verdict, e.Reasons, diff)
			}
			if e.Tier != tt.tier {
				t.Errorf("verify tier %d; want %d", e.Tier, tt.tier)
			}
		})
	}
}
