package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/verifierd/verifierd/internal/run"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// sessionReread is one session of a run judged again against its own
// original baseline: the session as stored, the judge's fresh result and
// each effect as a run.EffectCheck.
type sessionReread struct {
	md     *meta
	res    *Result
	ev     *stepEvidence
	checks []run.EffectCheck
}

// rollbackRead judges a fresh read of one session's effects against its
// original baseline (as Reverify does, the compensator never runs) and
// stores nothing.
func (m *Runs) rollbackRead(ctx context.Context, step, sid string) ([]run.EffectCheck, error) {
	r, err := m.rereadSession(ctx, step, sid)
	if err != nil {
		return nil, err
	}
	return r.checks, nil
}

// rereadSession is rollbackRead with the session and the judge's result
// kept (md and res nil for a session the store no longer has). It judges
// through judgeStep, the one judging path.
func (m *Runs) rereadSession(ctx context.Context, step, sid string) (*sessionReread, error) {
	unlock, raw, _, err := m.lockSession(ctx, sid)
	if isKind(err, NotFound) {
		// Bound to the run, then removed (the retention): what it did
		// cannot be read back, so it remains.
		return &sessionReread{checks: []run.EffectCheck{{Step: step, SessionID: sid, Class: string(judge.ClassIndeterminate),
			Reasons: []run.Reason{{Code: "session_removed", Message: fmt.Sprintf("session %s of step %q is no longer in the store; its effects cannot be read back", sid, step)}}}}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	var md meta
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("session %s is corrupt: %w", sid, err)
	}
	res, ev, err := m.judgeStep(ctx, sid, &md, true)
	if err != nil {
		return nil, err
	}
	out := &sessionReread{md: &md, res: res, ev: ev, checks: make([]run.EffectCheck, len(res.Effects))}
	for i, e := range res.Effects {
		c := run.EffectCheck{Step: step, SessionID: sid, Effect: i, ContractHash: e.ContractHash, Class: string(e.Result), Source: effectSource(&md, i)}
		if ev != nil && i < len(ev.Verdicts) {
			c.Lost, c.Changed = ev.Verdicts[i].Lost, ev.Verdicts[i].Changed
		}
		for _, r := range e.Reasons {
			c.Reasons = append(c.Reasons, run.Reason{Code: r.Code, Message: r.Message})
		}
		out.checks[i] = c
	}
	return out, nil
}

// runCreated is the identities of the records the run's sessions counted
// as new (their change claims' matched records, in every result of each
// session: a duplicate the run wrote, seen by a result a Reverify
// replaced, is the run's too): a later step's baseline holds them, and
// their removal is the rollback or the repair, not a loss.
func (m *Runs) runCreated(ctx context.Context, rec *runRecord) (map[string]bool, error) {
	out := map[string]bool{}
	for _, rs := range rec.Steps {
		if err := m.sessionsCreated(ctx, rs.Sessions, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sessionsCreated adds to out the records sessions counted as new in any
// of their results (run.CreatedKey of the effect's source and the
// record's identity).
func (m *Runs) sessionsCreated(ctx context.Context, sessions []string, out map[string]bool) error {
	for _, sid := range sessions {
		raw, _, err := m.store.Session(ctx, sid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var md meta
		if json.Unmarshal(raw, &md) != nil {
			continue
		}
		ids, err := m.sessionChangeIDs(ctx, sid, &md)
		if err != nil {
			return err
		}
		for i, list := range ids {
			for _, id := range list {
				out[run.CreatedKey(effectSource(&md, i), id)] = true
			}
		}
	}
	return nil
}

// sessionChangeIDs is, per effect of session sid (stored as md), the
// identities of the records its change claims counted as new in any of its
// results (the first and every re-verification): a duplicate a Reverify
// no longer counts is still the session's.
func (m *Runs) sessionChangeIDs(ctx context.Context, sid string, md *meta) ([][]string, error) {
	return m.sessionMatchedIDs(ctx, sid, md, true)
}

// sessionMatchedIDs is sessionChangeIDs, of every effect when changeOnly
// is false (matchedIdentities).
func (m *Runs) sessionMatchedIDs(ctx context.Context, sid string, md *meta, changeOnly bool) ([][]string, error) {
	_, first, err := m.store.Session(ctx, sid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && first == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	more, err := m.store.Reverifications(ctx, sid)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, raw := range append([][]byte{first}, more...) {
		var r Result
		if err := decodeResult(raw, &r); err != nil {
			return nil, err
		}
		for i, ids := range matchedIdentities(md, &r, changeOnly) {
			for len(out) <= i {
				out = append(out, nil)
			}
			for _, id := range ids {
				if !slices.Contains(out[i], id) {
					out[i] = append(out[i], id)
				}
			}
		}
	}
	return out, nil
}

// changeIdentities is, per effect of a session, the identities of the
// records a change claim of r matched (nil for an effect that is no change
// claim, or whose collection no capture names; none when the session's
// effects no longer parse or do not line up with r's).
func changeIdentities(md *meta, r *Result) [][]string {
	return matchedIdentities(md, r, true)
}

// matchedIdentities is changeIdentities of every effect when changeOnly is
// false, except one r reads affirmatively absent (it touched nothing).
func matchedIdentities(md *meta, r *Result, changeOnly bool) [][]string {
	effects, err := effectsList(md.Effects)
	if err != nil || len(effects) != len(r.Effects) {
		return nil
	}
	out := make([][]string, len(effects))
	for i, e := range effects {
		if (changeOnly && !workflow.IsChangeClaim(e)) || effectSource(md, i) == "" || (!changeOnly && r.Effects[i].Result == judge.Class(run.ClassAbsent)) {
			continue
		}
		field := cmpOr(e.IdentityField, judge.DefaultIdentityField)
		for _, mr := range r.Effects[i].MatchedRecords {
			// The judge's identity text (judge.Verdict.Lost is in it too).
			if id, ok := judge.Canon(mr[field]); ok {
				out[i] = append(out[i], id)
			}
		}
	}
	return out
}
