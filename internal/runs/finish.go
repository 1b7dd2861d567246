package runs

import (
	"context"
	"sync"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// runNow loads run id, its workflow (refused when it changed since the
// run began) and its steps' states as they stand: what FinishRun and
// RollbackCheck decide on.
func (svc *Service) runNow(ctx context.Context, id string) (*runRecord, *workflow.Workflow, []stepState, error) {
	rec, err := svc.loadRun(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	wf, err := svc.runWorkflow(rec)
	if err != nil {
		return nil, nil, nil, err
	}
	states, err := svc.stepStates(ctx, wf, rec)
	if err != nil {
		return nil, nil, nil, err
	}
	return rec, wf, states, nil
}

// finishRunOnce decides and seals a run once (FinishRun retries it while
// the run changes under it).
func (svc *Service) finishRunOnce(ctx context.Context, id string) (*RunView, error) {
	rec, wf, states, err := svc.runNow(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Seal != nil && !rec.reconciling() {
		return svc.viewOf(rec, wf, states), nil
	}
	in := classifierInput(wf, rec, states)
	// A seal is a claim about the system of record as it is now: every
	// session the run stands on is read again first.
	if in.Drifted, err = svc.driftedSessions(ctx, wf, rec); err != nil {
		return nil, err
	}
	c := run.Classify(in)
	// The digest leaves Sticky out: it turns on with the first seal
	// itself, which is no change in what the run depends on.
	bare := in
	bare.Sticky = false
	digest := jsonDigest(bare)
	if rec.reconciling() && c.Outcome == run.ReconciliationRequired && rec.Seal.InputDigest == digest {
		return svc.viewOf(rec, wf, states), nil
	}
	view, err := svc.sealRun(ctx, rec, wf, states, c, "run_finish", digest)
	if err == nil && c.Outcome == run.Verified {
		svc.h.ReleaseWriteSets(sessionsOf(rec))
	}
	return view, err
}

// reread is one session FinishRun reads again before it seals.
type reread struct {
	step, sid string
	// later are the step's sessions begun after this one.
	later    []string
	recorded string
	got      *session.Reread
	err      error
}

// driftedSessions reads again, before any seal, every session of every
// consequential step of the run whose latest result is VERIFIED or
// HALTED_BEFORE_EFFECT (each attempt of each step, not only the one that
// stands for the step) against its own original baseline, and returns
// those that no longer read as that result: a VERIFIED effect no longer
// CONFIRMED, a HALTED_BEFORE_EFFECT effect no longer affirmatively absent
// (a save that landed late). The reads run together, each settling as its
// deployment's settle setting says, so they all fall in one settle window;
// they are judged only once every one is back. A session with another
// result, not verified yet, or no longer stored is left to the classifier
// (it is never VERIFIED there).
func (svc *Service) driftedSessions(ctx context.Context, wf *workflow.Workflow, rec *runRecord) ([]run.Drift, error) {
	reads, err := svc.rereadsOf(ctx, wf, rec)
	if err != nil {
		return nil, err
	}
	created, err := svc.runCreated(ctx, rec)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for i := range reads {
		wg.Go(func() { reads[i].got, reads[i].err = svc.h.Reread(ctx, reads[i].step, reads[i].sid) })
	}
	wg.Wait()
	var out []run.Drift
	for _, r := range reads {
		if r.err != nil {
			return nil, r.err
		}
		d, err := svc.drift(ctx, r, created)
		if err != nil {
			return nil, err
		}
		if d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// drift judges one re-read: nil when every effect still reads as the
// session's recorded result. A loss of records the run itself created
// (created: a repair removed a duplicate the run wrote) is set aside
// (run.ForgivenClass). An earlier attempt's re-read sees the records the
// step's later attempts created as new against its baseline; those are
// accounted for (laterExplained), anything else it sees is its own save
// landed late.
func (svc *Service) drift(ctx context.Context, r reread, created map[string]bool) (*run.Drift, error) {
	want := run.ClassAbsent
	if r.recorded == run.Verified {
		want = run.ClassConfirmed
	}
	var later map[string]bool
	for _, c := range r.got.Checks() {
		if run.ForgivenClass(c, created) == want {
			continue
		}
		if r.recorded == run.HaltedBeforeEffect && len(r.later) > 0 && r.got.Result() != nil {
			if later == nil {
				later = map[string]bool{}
				if err := svc.h.SessionsCreated(ctx, r.later, later); err != nil {
					return nil, err
				}
			}
			if laterExplained(r.got, c, later) {
				continue
			}
		}
		return &run.Drift{Step: r.step, SessionID: r.sid, Latest: len(r.later) == 0, Recorded: r.recorded, Effect: c.Effect, Class: c.Class, Codes: run.ReasonCodes(c.Reasons)}, nil
	}
	return nil, nil
}

// laterExplained reports whether effect check c of an earlier attempt's
// re-read reads only what the step's later attempts did: a change claim
// whose every new record is one a later attempt created (later, by
// run.CreatedKey) and that lost or changed nothing, or another claim read
// CONFIRMED (the later attempt set it; its own re-read judges it). A doubt
// (INDETERMINATE, unavailable) is never explained.
func laterExplained(got *session.Reread, c run.EffectCheck, later map[string]bool) bool {
	if c.Class != string(judge.ClassConfirmed) && c.Class != string(judge.ClassConflicting) {
		return false
	}
	for _, r := range c.Reasons {
		switch r.Code {
		case judge.ReasonCollateralLoss, judge.ReasonSetScopeLoss, judge.ReasonExistingRecordChanged:
			return false
		}
	}
	ids := got.ChangeIDs()
	if c.Effect >= len(ids) || ids[c.Effect] == nil {
		claim, ok := got.ChangeClaim(c.Effect)
		return ok && !claim && c.Class == string(judge.ClassConfirmed)
	}
	for _, id := range ids[c.Effect] {
		if !later[run.CreatedKey(c.Source, id)] {
			return false
		}
	}
	return len(got.Result().Effects[c.Effect].MatchedRecords) == len(ids[c.Effect])
}

// rereadsOf lists the sessions driftedSessions reads again.
func (svc *Service) rereadsOf(ctx context.Context, wf *workflow.Workflow, rec *runRecord) ([]reread, error) {
	var out []reread
	for _, rs := range rec.Steps {
		if s, ok := wf.Step(rs.Step); !ok || !s.Consequential() {
			continue
		}
		for i, sid := range rs.Sessions {
			r, found, err := svc.h.LatestResult(ctx, sid)
			if err != nil {
				return nil, err
			}
			if !found || r == nil {
				continue
			}
			if o := outcomeOf(r); o == run.Verified || o == run.HaltedBeforeEffect {
				out = append(out, reread{step: rs.Step, sid: sid, later: rs.Sessions[i+1:], recorded: o})
			}
		}
	}
	return out, nil
}

// sessionsOf is every session of every step of a run.
func sessionsOf(rec *runRecord) []string {
	var out []string
	for _, rs := range rec.Steps {
		out = append(out, rs.Sessions...)
	}
	return out
}
