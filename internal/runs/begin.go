package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/receipt"
)

// CodeReconciliationPending: a step of the run that comes earlier in the
// workflow's order has a latest session that ended RECONCILIATION_REQUIRED;
// no later step begins (unless it declares independent: true) until that
// session is re-verified.
const CodeReconciliationPending = "reconciliation_pending"

// stepBegin is one Begin of a step of a run while it is checked.
type stepBegin struct {
	rec  *runRecord
	wf   *workflow.Workflow
	step *workflow.Step
	full session.BeginRequest
}

// refuse records a refused Begin of the step in its run and in the ledger
// (with the deployment's digest, as a refused Begin outside a run).
func (svc *Service) refuseStep(ctx context.Context, b *stepBegin, err error) error {
	svc.noteRunRefusal(ctx, b.rec.ID, b.step.Name, err)
	raw, _ := svc.h.Deployment(b.full.DeploymentName)
	return svc.h.RefuseBegin(ctx, b.full, raw, err)
}

// policyRefusal is a refusal of the step by the run's policy, recorded.
func (svc *Service) policyRefusal(ctx context.Context, b *stepBegin, code, path, format string, args ...any) error {
	return svc.refuseStep(ctx, b, &session.Error{Kind: session.Refused, Reason: session.ReasonPolicy, Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
}

// BeginStep begins a step of a run (session.StepBeginner: a session Begin
// with a RunID comes here): the run's order, handoffs and
// artifacts are checked, the step's parameters are the run's, the
// caller's own and the handed-off values, and the session is bound to the
// run once it is stored (bindStep, which checks again what the binding
// rests on in the same store transaction).
func (svc *Service) BeginStep(ctx context.Context, req session.BeginRequest) (*session.BeginResult, error) {
	b, err := svc.openStepBegin(ctx, req)
	if err != nil {
		return nil, err
	}
	params, err := svc.stepParams(ctx, b, req.Params)
	if err != nil {
		return nil, err
	}
	states, err := svc.stepStates(ctx, b.wf, b.rec)
	if err != nil {
		return nil, err
	}
	if err := svc.checkStepOrder(ctx, b, states); err != nil {
		return nil, err
	}
	seen := len(b.rec.step(b.step.Name).Sessions)
	if err := svc.checkRebegin(ctx, b); err != nil {
		return nil, err
	}
	binding, err := svc.stepBinding(ctx, b, states, params)
	if err != nil {
		return nil, err
	}
	full := b.full
	full.Params = params
	res, err := svc.h.Begin(ctx, full, binding)
	if err != nil {
		return nil, svc.refuseStep(ctx, b, err)
	}
	if err := svc.bindStep(ctx, b.rec.ID, b.step.Name, seen, res.SessionID, binding); err != nil {
		// The session stays unbound: the caller was never told of it, so
		// nothing was done under it, and the retention removes it.
		return nil, err
	}
	return res, nil
}

// openStepBegin reads the run and the step a Begin names, and refuses a
// run that takes no further step (sealed, its workflow or deployment
// changed).
func (svc *Service) openStepBegin(ctx context.Context, req session.BeginRequest) (*stepBegin, error) {
	if req.Workflow != "" || req.DeploymentName != "" || len(req.Deployment) > 0 || len(req.Effects) > 0 {
		return nil, &session.Error{Kind: session.Invalid, Path: "run_id", Message: "a step of a run takes its workflow, deployment and contracts from the run; send only run_id, step and the step's own params"}
	}
	if err := svc.h.CheckParams(req.Params); err != nil {
		return nil, err
	}
	rec, err := svc.loadRun(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	if req.Step == "" {
		return nil, &session.Error{Kind: session.Invalid, Path: "step", Message: fmt.Sprintf("name the step of workflow %q to begin", rec.Workflow)}
	}
	full := session.BeginRequest{DeploymentName: rec.DeploymentName, Workflow: rec.Workflow, Step: req.Step}
	wf, err := svc.runWorkflow(rec)
	if err != nil {
		return nil, svc.h.RefuseBegin(ctx, full, nil, err)
	}
	step, ok := wf.Step(req.Step)
	if !ok {
		return nil, &session.Error{Kind: session.Invalid, Path: "step", Message: fmt.Sprintf("workflow %q has no step %q", rec.Workflow, clip(req.Step))}
	}
	b := &stepBegin{rec: rec, wf: wf, step: step, full: full}
	if rec.Seal != nil && !rec.reconciling() {
		return nil, svc.policyRefusal(ctx, b, CodeRunSealed, "run_id", "run %q was sealed %s (attempt %d); it takes no further step: begin a new run", rec.ID, rec.Seal.Outcome, rec.Attempt)
	}
	// Every step reads through the deployment the run began with and its
	// receipt names: one changed since is refused, not read.
	if raw, err := svc.h.Deployment(full.DeploymentName); err != nil {
		return nil, err
	} else if sha256Hex(raw) != rec.DeploymentDigest {
		return nil, svc.policyRefusal(ctx, b, CodeDeploymentChanged, "run_id", "deployment %q changed since run %q began; finish this run (it is judged on what it read) and begin a new one", rec.DeploymentName, rec.ID)
	}
	return b, nil
}

// stepParams is the step's parameters: the run's, and the caller's own
// (never one the run binds or a handoff fills).
func (svc *Service) stepParams(ctx context.Context, b *stepBegin, own map[string]string) (map[string]string, error) {
	params := maps.Clone(b.rec.Params)
	for _, k := range slices.Sorted(maps.Keys(own)) {
		if _, declared := b.wf.Params[k]; !declared {
			return nil, &session.Error{Kind: session.Invalid, Path: "params." + clip(k), Message: fmt.Sprintf("workflow %q declares no parameter %q under params:", b.rec.Workflow, clip(k))}
		}
		if h, ok := b.step.Handoff(k); ok {
			return nil, svc.policyRefusal(ctx, b, CodeHandoffForged, "params."+k, "step %q takes %q from the record step %q's effect %d matched (handoffs:); the caller may not send it", b.step.Name, k, h.From.Step, h.From.Effect)
		}
		if _, ok := b.rec.Params[k]; ok {
			return nil, svc.policyRefusal(ctx, b, CodeRunParamOverridden, "params."+k, "%q is a parameter of the run, bound at BeginRun; a step may not override it", k)
		}
		params[k] = own[k]
	}
	return params, nil
}

// checkStepOrder refuses the step while a step it comes after (after:, a
// handoff's source) is not VERIFIED in the run, and while a step earlier
// in the workflow's order stands RECONCILIATION_REQUIRED (unless the step
// is independent: true).
func (svc *Service) checkStepOrder(ctx context.Context, b *stepBegin, states []stepState) error {
	step := b.step
	for _, before := range step.Predecessors() {
		if slices.ContainsFunc(step.Consumes, func(c workflow.Consume) bool { return c.FromStep == before }) && !slices.Contains(step.After, before) && !slices.ContainsFunc(step.Handoffs, func(h workflow.Handoff) bool { return h.From.Step == before }) {
			continue // a producer need only have its artifact confirmed (stepBinding)
		}
		if st := stateOf(states, before); st == nil || st.Outcome != run.Verified {
			what := "has no session in the run"
			if st != nil && st.Began {
				what = "is " + cmp.Or(st.Outcome, "not verified yet")
			}
			return svc.policyRefusal(ctx, b, CodeStepOutOfOrder, "step", "step %q comes after step %q, which %s; verify %q first", step.Name, before, what, before)
		}
	}
	if step.Independent {
		return nil
	}
	for _, st := range states {
		if st.Name == step.Name {
			break
		}
		if st.Outcome == run.ReconciliationRequired {
			return svc.policyRefusal(ctx, b, CodeReconciliationPending, "step", "step %q's session %s ended RECONCILIATION_REQUIRED, and step %q comes after it in workflow %q: reconcile that step and Reverify session %s first (or declare the step independent: true in the workflow if it does not rest on it)", st.Name, st.SessionID, step.Name, b.rec.Workflow, st.SessionID)
		}
	}
	return nil
}

// checkRebegin refuses a step that already has a session in the run,
// unless every one ended HALTED_BEFORE_EFFECT and still reads absent now.
func (svc *Service) checkRebegin(ctx context.Context, b *stepBegin) error {
	step := b.step
	for _, sid := range b.rec.step(step.Name).Sessions {
		r, found, err := svc.h.LatestResult(ctx, sid)
		if err != nil {
			return err
		}
		if !found || r == nil || outcomeOf(r) != run.HaltedBeforeEffect {
			what := "not verified yet"
			switch {
			case !found:
				what = "removed from the store, its result unknown"
			case r != nil:
				what = outcomeOf(r)
			}
			return svc.policyRefusal(ctx, b, CodeStepAlreadyBegun, "step", "step %q already has session %s in the run (%s); only a step whose sessions all ended HALTED_BEFORE_EFFECT may begin again: Verify or Reverify that session", step.Name, sid, what)
		}
		// It ended HALTED_BEFORE_EFFECT: it must still read so now, or a
		// save of that attempt that landed late would sit in the new
		// session's baseline beside the new save.
		checks, err := svc.rollbackRead(ctx, step.Name, sid)
		if err != nil {
			return err
		}
		for _, c := range checks {
			if c.Class != run.ClassAbsent {
				return svc.policyRefusal(ctx, b, CodeStepAlreadyBegun, "step", "step %q's session %s ended HALTED_BEFORE_EFFECT, but its effect %d no longer reads absent (%s): Reverify that session instead of beginning the step again", step.Name, sid, c.Effect, c.Class)
			}
		}
	}
	return nil
}

// stepBinding is what the step's session binds: the exact artifacts it
// consumes (each CONFIRMED in the run) and the handed-off values, which it
// puts in params.
func (svc *Service) stepBinding(ctx context.Context, b *stepBegin, states []stepState, params map[string]string) (*receipt.RunBinding, error) {
	step := b.step
	binding := &receipt.RunBinding{RunID: b.rec.ID, Step: step.Name}
	for _, c := range step.Consumes {
		a := b.rec.artifact(c.Artifact)
		if a == nil || a.Verdict != run.ArtifactConfirmed {
			what := "was never checked in the run"
			if a != nil && a.Verdict != "" {
				what = "was checked " + a.Verdict
			}
			return nil, svc.policyRefusal(ctx, b, CodeArtifactUnverified, "step", "step %q consumes artifact %q of step %q, which %s; check it with VerifyArtifact (run_id, run_artifact %s, step %s) until CONFIRMED", step.Name, c.Artifact, c.FromStep, what, c.Artifact, c.FromStep)
		}
		binding.Consumed = append(binding.Consumed, receipt.ConsumedBound{Artifact: c.Artifact, SHA256: a.SHA256, Size: a.Size, ReceiptDigest: a.ReceiptDigest})
	}
	for _, h := range step.Handoffs {
		src := stateOf(states, h.From.Step)
		value, err := handoffValue(src, h)
		if err != nil {
			return nil, svc.policyRefusal(ctx, b, CodeHandoffAmbiguous, "params."+h.Param, "%s", err)
		}
		params[h.Param] = value
		binding.Handoffs = append(binding.Handoffs, receipt.HandoffBound{
			Param: h.Param, FromStep: h.From.Step, FromSession: src.SessionID, Effect: h.From.Effect, Field: h.From.Field,
			ValueDigest: svc.handoffDigest(value),
		})
	}
	return binding, nil
}

// bindStep records a new session of a step in its run, in one store
// transaction that checks again what the Begin was decided on: seen is
// how many sessions the step had when Begin checked it (another Begin of
// the same step that bound first refuses this one), and every artifact
// the binding consumes must still be recorded CONFIRMED at the digest it
// binds (a VerifyArtifact of other bytes that landed meanwhile refuses
// this Begin, so the run's record and the consumer never name two files).
func (svc *Service) bindStep(ctx context.Context, runID, step string, seen int, sid string, b *receipt.RunBinding) error {
	_, err := svc.h.Store().UpdateRun(ctx, runID, func(l store.Ledger, raw []byte) ([]byte, store.RunChange, error) {
		var rec runRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, store.RunChange{}, fmt.Errorf("run %s is corrupt: %w", runID, err)
		}
		if rec.Seal != nil && !rec.reconciling() {
			return nil, store.RunChange{}, &session.Error{Kind: session.Refused, Code: CodeRunSealed, Path: "run_id", Message: CodeRunSealed + ": the run was sealed while the step began; begin a new run"}
		}
		rs := rec.step(step)
		if len(rs.Sessions) != seen {
			return nil, store.RunChange{}, &session.Error{Kind: session.Refused, Code: CodeStepAlreadyBegun, Path: "step", Message: CodeStepAlreadyBegun + fmt.Sprintf(": another Begin of step %q bound a session first", step)}
		}
		if err := consumedStill(&rec, step, b.Consumed); err != nil {
			return nil, store.RunChange{}, err
		}
		rs.Sessions = append(rs.Sessions, sid)
		rs.Handoffs, rs.Consumed, rs.Refused = b.Handoffs, b.Consumed, ""
		if _, err := l.Append(EntryRunStepBound, sid, jsonDigest(map[string]any{"run_id": runID, "step": step, "session_id": sid, "binding": b})); err != nil {
			return nil, store.RunChange{}, err
		}
		out, err := json.Marshal(rec)
		return out, store.RunChange{Hold: []string{sid}}, err
	})
	return err
}

// consumedStill refuses a binding of step whose consumed artifacts are no
// longer recorded in rec CONFIRMED at the exact digest, size and receipt
// the binding names.
func consumedStill(rec *runRecord, step string, consumed []receipt.ConsumedBound) error {
	for _, c := range consumed {
		a := rec.artifact(c.Artifact)
		if a != nil && a.Verdict == run.ArtifactConfirmed && a.SHA256 == c.SHA256 && a.Size == c.Size && a.ReceiptDigest == c.ReceiptDigest {
			continue
		}
		return &session.Error{Kind: session.Refused, Reason: session.ReasonPolicy, Code: CodeArtifactUnverified, Path: "step",
			Message: fmt.Sprintf("%s: artifact %q was checked again while step %q of run %q began, and the run no longer records it CONFIRMED at sha256 %s; begin the step again", CodeArtifactUnverified, c.Artifact, step, rec.ID, c.SHA256)}
	}
	return nil
}
