package session

import (
	"slices"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// A session bound to a run that the store no longer has (removed by the
// retention of a run sealed RECONCILIATION_REQUIRED, which goes on) is a
// doubt, not a step that never began: the step may not begin again (that
// would hide the duplicate the removed session found), the run is not
// VERIFIED, and a rollback check lists it as remaining.
func TestRunRemovedSessionIsADoubt(t *testing.T) {
	t.Parallel()
	f := newRunFixture(t, sdk.TierIndependentSystem, "runmem")
	ctx := t.Context()
	f.beginRun(t, "gone")
	v := f.step(t, "gone", "intake", nil, sdk.Record{"id": "p-1", "kind": "patient", "name": "Ada"}, sdk.Record{"id": "p-2", "kind": "patient", "name": "Ada"})
	if v.Outcome != judge.ReconciliationRequired {
		t.Fatalf("double intake: %s", v.Outcome)
	}
	view, err := f.m.FinishRun(ctx, "gone")
	if err != nil || view.Outcome != run.ReconciliationRequired {
		t.Fatalf("first seal %+v %v", view, err)
	}
	n, err := f.m.Store.RemoveExpired(ctx, time.Now().Add(48*time.Hour), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("RemoveExpired = %d, %v", n, err)
	}
	// Re-beginning intake would read a baseline holding both patients and
	// confirm one more: refused.
	_, err = f.begin(t, "gone", "intake", nil)
	wantRefusal(t, err, Refused, CodeStepAlreadyBegun, "step")
	view, err = f.m.GetRun(ctx, "gone")
	if err != nil || view.Steps[0].SessionID != v.SessionID {
		t.Fatalf("GetRun after the removal: %+v %v", view, err)
	}
	view, err = f.m.FinishRun(ctx, "gone")
	if err != nil || view.Outcome != run.ReconciliationRequired || !slices.Contains(reasonCodes(view.Reasons), run.CodeStepNotVerified) {
		t.Fatalf("FinishRun after the removal: %+v %v", view, err)
	}
	f.tab.mu.Lock()
	f.tab.rows = nil
	f.tab.mu.Unlock()
	rb, err := f.m.RollbackCheck(ctx, "gone")
	if err != nil || rb.RolledBack || len(rb.Remains) != 1 || rb.Remains[0].SessionID != v.SessionID {
		t.Fatalf("rollback check of a removed session: %+v %v", rb, err)
	}
}
