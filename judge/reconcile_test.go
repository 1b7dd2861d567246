package judge

import "testing"

// TestNewTaskIrreversibleStep: in an irreversible step every non-confirmed effect gets
// a task, whatever its own risk; outside one, only irreversible effects do.
func TestNewTaskIrreversibleStep(t *testing.T) {
	t.Parallel()
	rev := bindOne(t, `{"kind": "field_equals", "match": {"p": "1"}, "field": "amount", "value": "10"}`, nil)
	wrong := Judge(rev, read(t, `[]`), read(t, `[{"id": 1, "p": "1", "amount": "100"}]`), Options{})
	if wrong.Decision != Refuted {
		t.Fatalf("setup: verdict %s, want REFUTED", wrong.Decision)
	}
	if task := NewTask("s", 1, "sql", rev, &wrong, TaskOptions{IrreversibleStep: false}); task != nil {
		t.Errorf("a reversible effect of a reversible step got a task: %+v", task)
	}
	task := NewTask("s", 1, "sql", rev, &wrong, TaskOptions{IrreversibleStep: true})
	if task == nil || task.Kind != TaskEffectRefuted || task.SuggestedAction != ActionManualRepair || task.ContractHash != rev.Hash {
		t.Fatalf("a wrong amount in an irreversible step: task %+v, want effect_refuted / MANUAL_REPAIR", task)
	}
	if task.ID != NewTask("s", 1, "sql", rev, &wrong, TaskOptions{IrreversibleStep: true, Digest: RecordDigest}).ID {
		t.Error("the digested task has another id")
	}
	right := Judge(rev, read(t, `[]`), read(t, `[{"id": 1, "p": "1", "amount": "10"}]`), Options{})
	if task := NewTask("s", 1, "sql", rev, &right, TaskOptions{IrreversibleStep: true}); task != nil {
		t.Errorf("a confirmed effect got a task: %+v", task)
	}
}

// TestSuggestForOutcome: a step that halted before its effect suggests
// REVERIFY_BEFORE_RETRY for every task; any other outcome keeps each
// task's own action, and a compensation that failed keeps MANUAL_REPAIR.
func TestSuggestForOutcome(t *testing.T) {
	t.Parallel()
	irr := bindOne(t, `{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "risk": "irreversible"}`, nil)
	nothing := Judge(irr, read(t, `[]`), read(t, `[]`), Options{})
	if OutcomeOf([]Verdict{nothing}) != HaltedBeforeEffect {
		t.Fatalf("setup: outcome %s, want HALTED_BEFORE_EFFECT", OutcomeOf([]Verdict{nothing}))
	}
	task := NewTask("s", 0, "sql", irr, &nothing, TaskOptions{})
	if task.SuggestedAction != ActionManualRepair {
		t.Fatalf("setup: action %s", task.SuggestedAction)
	}
	kept := NewTask("s", 0, "sql", irr, &nothing, TaskOptions{})
	SuggestForOutcome(ReconciliationRequired, []*Task{kept, nil})
	if kept.SuggestedAction != ActionManualRepair {
		t.Errorf("RECONCILIATION_REQUIRED changed the action to %s", kept.SuggestedAction)
	}
	failed := NewTask("s", 1, "sql", irr, &nothing, TaskOptions{CompensationFailed: true, Deleted: nil})
	SuggestForOutcome(HaltedBeforeEffect, []*Task{task, nil, failed})
	if task.SuggestedAction != ActionReverifyBeforeRetry {
		t.Errorf("halted step: action %s, want REVERIFY_BEFORE_RETRY", task.SuggestedAction)
	}
	if failed.SuggestedAction != ActionManualRepair {
		t.Errorf("a failed compensation: action %s, want MANUAL_REPAIR", failed.SuggestedAction)
	}
}
