package session

import (
	"context"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/internal/workflow"
)

// TestPreflightNewnessRefusal: TestConnection says, naming
// require_proven_newness and the first refused claim, when Begin would
// refuse every change claim of the registered workflow steps through a
// candidate (a plugin's read, never proven whole, with no declaration);
// a newness: declaration, the daemon's policy turned off, or no registered
// workflow leave the candidate without a refusal.
func TestPreflightNewnessRefusal(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := newManager(t, &memAdapter{kind: "pf-newness", tier: 1, table: tab})
	m.workflows = map[string]*workflow.Workflow{"intake": loadTestWorkflow(t)}
	params := map[string]string{"p": "1"}
	refusal := func(dep string) string {
		t.Helper()
		checks, err := m.TestConnection(context.Background(), []byte(dep), "", params)
		if err != nil {
			t.Fatal(err)
		}
		if len(checks) != 1 || !checks[0].Reachable {
			t.Fatalf("checks %+v, want one reachable candidate", checks)
		}
		return checks[0].NewnessRefusal
	}
	got := refusal("effects: {kind: pf-newness}\n")
	for _, want := range []string{"require_proven_newness", "(4, first workflows.intake.steps[0].effects[0])", "the plugin kind pf-newness reads through its own adapter", "census:"} {
		if !strings.Contains(got, want) {
			t.Errorf("refusal %q does not say %q", got, want)
		}
	}
	for _, dep := range []string{"effects: {kind: pf-newness, newness: newly_matching}\n", "effects: {kind: pf-newness, newness: whole_read}\n"} {
		if got := refusal(dep); got != "" {
			t.Errorf("%s: refusal %q, want none", dep, got)
		}
	}
	m.workflows = nil
	if got := refusal("effects: {kind: pf-newness}\n"); got != "" {
		t.Errorf("no registered workflow: refusal %q, want none", got)
	}
	m.workflows = map[string]*workflow.Workflow{"intake": loadTestWorkflow(t)}
	off := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireProvenNewness: &off})
	if got := refusal("effects: {kind: pf-newness}\n"); got != "" {
		t.Errorf("policy off: refusal %q, want none", got)
	}
}
