package session

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// TestTasksFollowTheStep: every effect of an irreversible step that is not
// confirmed carries a reconciliation task, whatever its own risk; a step
// that halted before its effect suggests REVERIFY_BEFORE_RETRY.
func TestTasksFollowTheStep(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		save       *sdk.Record
		outcome    judge.Outcome
		tasks      []string // per effect: kind/action, "" for none
		kinds      []judge.Decision
		registered bool
	}{
		"wrong note beside the write": {save: &sdk.Record{"id": "1", "p": "1", "note": "wrong"}, registered: true,
			outcome: judge.ReconciliationRequired, kinds: []judge.Decision{judge.Confirmed, judge.Refuted},
			tasks: []string{"", judge.TaskEffectRefuted + "/" + judge.ActionManualRepair}},
		"nothing saved": {registered: true,
			outcome: judge.HaltedBeforeEffect, kinds: []judge.Decision{judge.Refuted, judge.Refuted},
			tasks: []string{judge.TaskEffectRefuted + "/" + judge.ActionReverifyBeforeRetry, judge.TaskEffectRefuted + "/" + judge.ActionReverifyBeforeRetry}},
		"nothing saved, caller effects, one irreversible": {
			outcome: judge.HaltedBeforeEffect, kinds: []judge.Decision{judge.Refuted, judge.Refuted},
			tasks: []string{judge.TaskEffectRefuted + "/" + judge.ActionReverifyBeforeRetry, judge.TaskEffectRefuted + "/" + judge.ActionReverifyBeforeRetry}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			m := newManager(t, &memAdapter{kind: "tasks-test", tier: 1, table: tab})
			m.daemon.Deployments = map[string]string{"mem": writeDeployment(t, "effects: {kind: tasks-test, newness: whole_read}\n")}
			m.workflows = map[string]*workflow.Workflow{"intake": loadTestWorkflow(t)}
			req := BeginRequest{DeploymentName: "mem", Workflow: "intake", Step: "save", Params: map[string]string{"p": "1", "note": "hello"}}
			if !tc.registered {
				// Only the second effect says irreversible; the first
				// gets a task all the same.
				req.Workflow, req.Step = "", ""
				req.Effects = []byte(`[{"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "timeout_s": 0.2},
					{"kind": "field_equals", "match": {"p": {"param": "p"}}, "field": "note", "value": {"param": "note"}, "risk": "irreversible", "timeout_s": 0.2}]`)
			}
			res, err := m.Begin(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.save != nil {
				tab.add(*tc.save)
			}
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if v.Outcome != tc.outcome {
				t.Errorf("outcome %s, want %s", v.Outcome, tc.outcome)
			}
			for i, e := range v.Effects {
				got := ""
				if task := e.ReconciliationTask; task != nil {
					got = task.Kind + "/" + task.SuggestedAction
				}
				if e.Verdict != tc.kinds[i] || got != tc.tasks[i] {
					t.Errorf("effect %d: %s with task %q, want %s with %q", i, e.Verdict, got, tc.kinds[i], tc.tasks[i])
				}
			}
		})
	}
}

// TestJudgeTasksFollowTheStep: the stateless Judge builds tasks by the same
// rule.
func TestJudgeTasksFollowTheStep(t *testing.T) {
	t.Parallel()
	effects := []byte(`[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "risk": "irreversible"},
		{"kind": "field_equals", "match": {"p": "1"}, "field": "note", "value": "x"}]`)
	res, err := Judge(JudgeRequest{Effects: effects, Before: judge.Snapshot{Reachable: true}, After: judge.Snapshot{Reachable: true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != judge.HaltedBeforeEffect {
		t.Fatalf("outcome %s, want HALTED_BEFORE_EFFECT", res.Outcome)
	}
	for i, e := range res.Effects {
		if e.ReconciliationTask == nil || e.ReconciliationTask.SuggestedAction != judge.ActionReverifyBeforeRetry {
			t.Errorf("effect %d task %+v, want one suggesting REVERIFY_BEFORE_RETRY", i, e.ReconciliationTask)
		}
	}
}

// TestSettleFloor: policy.min_settle_s keeps a change claim of an
// irreversible step reading after its first CONFIRMED although the
// candidate sets no settle_s; a reversible step is not held.
func TestSettleFloor(t *testing.T) {
	t.Parallel()
	const irreversible = `[{"kind": "record_written", "match": {"p": {"param": "p"}}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0.2}]`
	for name, tc := range map[string]struct {
		effects string
		floor   float64
		want    judge.Decision
	}{
		"irreversible, floor":    {irreversible, 0.3, judge.Refuted},
		"irreversible, no floor": {irreversible, 0, judge.Confirmed},
		"reversible, floor":      {effectsRW, 0.3, judge.Confirmed},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tab := &table{}
			a := &memAdapter{kind: "floor-test", tier: 1, table: tab}
			a.afterRead = func(n int) {
				if n == 1 {
					tab.add(sdk.Record{"id": json.Number("2"), "p": "1"})
				}
			}
			m := newManager(t, a)
			m.clock = &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			m.daemon.Policy.MinSettleS = &tc.floor
			res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: floor-test, newness: whole_read}\n"), Effects: []byte(tc.effects), Params: map[string]string{"p": "1"}})
			if err != nil {
				t.Fatal(err)
			}
			tab.add(sdk.Record{"id": json.Number("1"), "p": "1"})
			v, err := m.Verify(context.Background(), res.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if e := v.Effects[0]; e.Verdict != tc.want {
				t.Errorf("verify = %s %v, want %s", e.Verdict, e.Reasons, tc.want)
			}
		})
	}
}
