package server

import (
	"testing"

	"github.com/verifierd/verifierd/judge"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestEverySuggestedActionHasAWireValue: a task's suggested action never
// reaches a client as UNSPECIFIED.
func TestEverySuggestedActionHasAWireValue(t *testing.T) {
	t.Parallel()
	for _, a := range []string{judge.ActionRestoreAccess, judge.ActionRemoveDuplicates, judge.ActionManualRepair, judge.ActionReverifyBeforeRetry} {
		if got := actionToProto[a]; got == verifierv1.SuggestedAction_SUGGESTED_ACTION_UNSPECIFIED || a != got.String() {
			t.Errorf("%s maps to %s", a, got)
		}
	}
}
