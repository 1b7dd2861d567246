package run

import (
	"slices"
	"testing"

	"github.com/verifierd/verifierd/internal/oracle"
)

func codes(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Code
	}
	return out
}

func verified(name string, tier int, rung oracle.Rung) Step {
	return Step{Name: name, Consequential: true, Began: true, Outcome: Verified, Tier: tier, OracleRung: rung}
}

func halted(name string) Step {
	return Step{Name: name, Consequential: true, Began: true, Outcome: HaltedBeforeEffect, Tier: 1, OracleRung: oracle.SystemOfRecord}
}

func notBegun(name string) Step { return Step{Name: name, Consequential: true} }

// TestClassify covers every row of the classifier's table (docs/runs.md).
func TestClassify(t *testing.T) {
	t.Parallel()
	letter := func(verdict string) Artifact {
		return Artifact{Name: "letter", FromStep: "posting", Consumed: true, Verdict: verdict}
	}
	readOnly := Step{Name: "lookup", Began: true, Outcome: Verified, Tier: 1, OracleRung: oracle.SystemOfRecord}
	for _, tc := range []struct {
		name     string
		in       Input
		outcome  string
		codes    []string
		tier     int
		rung     oracle.Rung
		reasonOn string // the step or artifact the first reason names
	}{
		{name: "every step VERIFIED, the consumed artifact CONFIRMED",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 2, oracle.SeparateSession), readOnly, verified("send", 1, oracle.SystemOfRecord)}, Artifacts: []Artifact{letter(ArtifactConfirmed)}, RunMinTier: 2},
			outcome: Verified, tier: 2, rung: oracle.SeparateSession},
		{name: "a read-only step that never began does not block",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "lookup"}}, RunMinTier: 2},
			outcome: Verified, tier: 1, rung: oracle.SystemOfRecord},
		{name: "an artifact nobody consumes need not be checked",
			in:      Input{Steps: []Step{verified("posting", 1, oracle.SystemOfRecord)}, Artifacts: []Artifact{{Name: "copy", FromStep: "posting"}}, RunMinTier: 2},
			outcome: Verified, tier: 1, rung: oracle.SystemOfRecord},
		{name: "every begun step HALTED_BEFORE_EFFECT",
			in:      Input{Steps: []Step{halted("intake"), notBegun("posting")}, RunMinTier: 2},
			outcome: HaltedBeforeEffect, codes: []string{CodeStepNotVerified, CodeStepNotBegun}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "no step began",
			in:      Input{Steps: []Step{notBegun("intake"), notBegun("posting")}, RunMinTier: 2},
			outcome: HaltedBeforeEffect, codes: []string{CodeStepNotBegun, CodeStepNotBegun}, reasonOn: "intake"},
		{name: "stopped on a policy refusal, nothing landed",
			in:      Input{Steps: []Step{{Name: "intake", Consequential: true, Refused: RejectedPolicy}, notBegun("posting")}, RunMinTier: 2},
			outcome: RejectedPolicy, codes: []string{CodeStepRefused, CodeStepNotBegun}, reasonOn: "intake"},
		{name: "stopped on a platform failure after a halted step",
			in:      Input{Steps: []Step{halted("intake"), {Name: "posting", Consequential: true, Refused: FailedPlatform}}, RunMinTier: 2},
			outcome: FailedPlatform, codes: []string{CodeStepNotVerified, CodeStepRefused}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "a refused Begin after something landed is partial state",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "posting", Consequential: true, Refused: RejectedPolicy}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepRefused}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
		{name: "a refused second Begin of a VERIFIED step does not count",
			in:      Input{Steps: []Step{{Name: "intake", Consequential: true, Began: true, Outcome: Verified, Tier: 1, Refused: RejectedPolicy, OracleRung: oracle.SystemOfRecord}}, RunMinTier: 2},
			outcome: Verified, tier: 1, rung: oracle.SystemOfRecord},
		{name: "a read-only step's refusal does not stop the run",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "lookup", Refused: RejectedPolicy}}, RunMinTier: 2},
			outcome: Verified, tier: 1, rung: oracle.SystemOfRecord},
		{name: "one step landed, the next never began",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), notBegun("posting")}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotBegun}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
		{name: "a step RECONCILIATION_REQUIRED (double submit)",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "posting", Consequential: true, Began: true, Outcome: ReconciliationRequired, Tier: 1, OracleRung: oracle.SystemOfRecord}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
		{name: "a step begun and never verified",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "posting", Consequential: true, Began: true}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
		{name: "a begun unverified step is no proof that nothing landed",
			in:      Input{Steps: []Step{halted("intake"), {Name: "posting", Consequential: true, Began: true}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified, CodeStepNotVerified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "sticky: a run sealed RECONCILIATION_REQUIRED never falls back to nothing landed",
			in:      Input{Steps: []Step{halted("intake"), halted("posting")}, RunMinTier: 2, Sticky: true},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified, CodeStepNotVerified, CodeReconciliationSticky}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "sticky, re-sealed once the offending step is VERIFIED after a Reverify",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 1, oracle.SystemOfRecord)}, RunMinTier: 2, Sticky: true},
			outcome: Verified, tier: 1, rung: oracle.SystemOfRecord},
		{name: "a tier-3 step under the default run_min_tier",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 3, oracle.Visual)}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeTierBelowRunMin}, tier: 3, rung: oracle.Visual, reasonOn: "posting"},
		{name: "a tier-3 step under run_min_tier 3",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 3, oracle.Visual)}, RunMinTier: 3},
			outcome: Verified, tier: 3, rung: oracle.Visual},
		{name: "a read-only step's weak tier blocks VERIFIED too",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), {Name: "lookup", Began: true, Outcome: Verified, Tier: 4}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeTierBelowRunMin}, tier: 4, rung: oracle.Visual, reasonOn: "lookup"},
		{name: "a separate-session step under the default run_min_rung",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 2, oracle.SeparateSession)}, RunMinTier: 2, RunMinRung: oracle.SystemOfRecord},
			outcome: ReconciliationRequired, codes: []string{CodeRungBelowRunMin}, tier: 2, rung: oracle.SeparateSession, reasonOn: "posting"},
		{name: "a separate-session step under run_min_rung lowered to 1",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 2, oracle.SeparateSession)}, RunMinTier: 2, RunMinRung: oracle.SeparateSession},
			outcome: Verified, tier: 2, rung: oracle.SeparateSession},
		{name: "a tier-3 screen step under both default floors",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 3, oracle.Visual)}, RunMinTier: 2, RunMinRung: oracle.SystemOfRecord},
			outcome: ReconciliationRequired, codes: []string{CodeTierBelowRunMin, CodeRungBelowRunMin}, tier: 3, rung: oracle.Visual, reasonOn: "posting"},
		{name: "a consumed artifact never checked",
			in:      Input{Steps: []Step{verified("posting", 1, oracle.SystemOfRecord), verified("send", 1, oracle.SystemOfRecord)}, Artifacts: []Artifact{letter("")}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeArtifactUnverified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "letter"},
		{name: "an artifact REFUTED",
			in:      Input{Steps: []Step{verified("posting", 1, oracle.SystemOfRecord)}, Artifacts: []Artifact{letter(ArtifactRefuted)}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeArtifactUnverified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "letter"},
		{name: "an artifact INDETERMINATE while its steps halted is not nothing landed",
			in:      Input{Steps: []Step{halted("posting")}, Artifacts: []Artifact{{Name: "letter", FromStep: "posting", Verdict: ArtifactIndeterminate}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified, CodeArtifactUnverified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
		{name: "an earlier attempt's late save beside the step's VERIFIED attempt",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord)}, Drifted: []Drift{{Step: "intake", SessionID: "s1", Recorded: HaltedBeforeEffect, Class: "conflicting"}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeEarlierAttemptLanded}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "an earlier attempt landed while the step's latest attempt halted too is not nothing landed",
			in:      Input{Steps: []Step{halted("intake")}, Drifted: []Drift{{Step: "intake", SessionID: "s1", Recorded: HaltedBeforeEffect, Class: "confirmed"}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified, CodeEarlierAttemptLanded}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "the halted latest session's save landed after its Verify",
			in:      Input{Steps: []Step{halted("intake")}, Drifted: []Drift{{Step: "intake", SessionID: "s1", Latest: true, Recorded: HaltedBeforeEffect, Class: "confirmed"}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeStepNotVerified, CodeStepNotVerified}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "intake"},
		{name: "a VERIFIED step that no longer reads VERIFIED at the seal",
			in:      Input{Steps: []Step{verified("intake", 1, oracle.SystemOfRecord), verified("posting", 1, oracle.SystemOfRecord)}, Drifted: []Drift{{Step: "posting", SessionID: "s2", Latest: true, Recorded: Verified, Class: "conflicting"}}, RunMinTier: 2},
			outcome: ReconciliationRequired, codes: []string{CodeVerifiedStepChanged}, tier: 1, rung: oracle.SystemOfRecord, reasonOn: "posting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Classify(tc.in)
			if c.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s (reasons %+v)", c.Outcome, tc.outcome, c.Reasons)
			}
			if got := codes(c.Reasons); !slices.Equal(got, tc.codes) && (len(got) > 0 || len(tc.codes) > 0) {
				t.Fatalf("reason codes %q, want %q", got, tc.codes)
			}
			if c.Tier != tc.tier || c.OracleRung != tc.rung {
				t.Fatalf("tier %d rung %d, want tier %d rung %d", c.Tier, c.OracleRung, tc.tier, tc.rung)
			}
			if tc.reasonOn != "" {
				r := c.Reasons[0]
				if r.Step != tc.reasonOn && r.Artifact != tc.reasonOn {
					t.Fatalf("the first reason names step %q artifact %q, want %q", r.Step, r.Artifact, tc.reasonOn)
				}
				if r.Message == "" {
					t.Fatal("a reason without a message")
				}
			}
		})
	}
}

// TestRolledBack is the ROLLED_BACK_VERIFIED row: every change gone, or
// what remains listed.
func TestRolledBack(t *testing.T) {
	t.Parallel()
	gone := []EffectCheck{{Step: "intake", Effect: 0, Class: ClassAbsent}, {Step: "posting", Effect: 0, Class: ClassAbsent}}
	if ok, remains := RolledBack(gone); !ok || len(remains) != 0 {
		t.Fatalf("every effect absent: %v %+v, want rolled back", ok, remains)
	}
	left := []EffectCheck{{Step: "intake", Effect: 0, Class: ClassAbsent}, {Step: "posting", Effect: 1, Class: "conflicting"}, {Step: "posting", Effect: 0, Class: "confirmed"}, {Step: "send", Class: "unavailable"}}
	ok, remains := RolledBack(left)
	if ok || len(remains) != 3 || remains[0].Step != "posting" || remains[0].Effect != 1 || remains[2].Class != "unavailable" {
		t.Fatalf("a record left, a loss, an unreadable store: %v %+v; want the three listed", ok, remains)
	}
}

// TestForgivenClass: undoing an earlier step shows as a loss against
// a later step's baseline; only a loss of records the run created, by the
// judge's complete list of lost identities, is forgiven.
func TestForgivenClass(t *testing.T) {
	t.Parallel()
	loss := Reason{Code: codeCollateralLoss, Message: "pre-existing record(s) outside the selector vanished"}
	under := Reason{Code: codeCountUnder, Message: "found 0 new matching records, expected exactly 1"}
	exact := Reason{Code: "COUNT_OVER"}
	created := map[string]bool{CreatedKey("patients", "p-9"): true, CreatedKey("patients", "p-10"): true}
	seven := []string{"p-9", "p-10", "p-11", "p-12", "p-13", "p-14", "p-15"}
	checks := []EffectCheck{
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: []string{"p-9"}},
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: []string{"p-9", "p-10"}},
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: []string{"p-9", "old-1"}},
		// More than the five a message names: every one is checked.
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: seven},
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{exact, loss}, Lost: []string{"p-9"}},
		// A loss reason without its identities is never forgiven.
		{Step: "posting", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss}},
		{Step: "posting", Source: "patients", Class: "unavailable", Reasons: []Reason{loss}, Lost: []string{"p-9"}},
		// The same identity lost from another collection is another
		// record: not forgiven.
		{Step: "posting", Source: "postings", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: []string{"p-9"}},
		{Step: "posting", Class: "conflicting", Reasons: []Reason{under, loss}, Lost: []string{"p-9"}},
		// A VERIFIED step's only fault a loss of the run's own records:
		// it still holds.
		{Step: "audit", Source: "patients", Class: "conflicting", Reasons: []Reason{loss}, Lost: []string{"p-10"}},
		// An existing record changed as well: not forgiven.
		{Step: "audit", Source: "patients", Class: "conflicting", Reasons: []Reason{under, loss, {Code: "EXISTING_RECORD_CHANGED"}}, Lost: []string{"p-10"}, Changed: []string{"p-9"}},
	}
	want := []string{ClassAbsent, ClassAbsent, "conflicting", "conflicting", "conflicting", "conflicting", "unavailable", "conflicting", "conflicting", ClassConfirmed, "conflicting"}
	for i, c := range checks {
		if got := ForgivenClass(c, created); got != want[i] {
			t.Errorf("check %d: class %s, want %s", i, got, want[i])
		}
	}
}
