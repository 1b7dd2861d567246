package session

import (
	"cmp"
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

// Reread is one session of a run judged again against its own original
// baseline (RunHost.Reread): the session as stored, the judge's fresh
// result and each effect as a run.EffectCheck. What the runs service asks
// of it goes through its methods; the session's internals stay here.
type Reread struct {
	md     *meta
	res    *Result
	ev     *stepEvidence
	checks []run.EffectCheck
}

// Checks is each effect of the re-read as a run.EffectCheck (one check,
// INDETERMINATE, for a session the store no longer has).
func (r *Reread) Checks() []run.EffectCheck { return r.checks }

// Stored reports whether the store still has the session.
func (r *Reread) Stored() bool { return r.md != nil }

// Result is the judge's fresh result (nil when the session is not stored).
func (r *Reread) Result() *Result { return r.res }

// ChangeIDs is, per effect, the identities of the records a change claim
// of the fresh result matched (changeIdentities).
func (r *Reread) ChangeIDs() [][]string {
	if r.md == nil || r.res == nil {
		return nil
	}
	return changeIdentities(r.md, r.res)
}

// ChangeClaim reports whether effect i is a change claim; ok is false when
// the session's effects no longer parse or have no effect i.
func (r *Reread) ChangeClaim(i int) (claim, ok bool) {
	if r.md == nil {
		return false, false
	}
	effects, err := effectsList(r.md.Effects)
	if err != nil || i < 0 || i >= len(effects) {
		return false, false
	}
	return workflow.IsChangeClaim(effects[i]), true
}

// IdentityField is effect i's identity field ("" when the session's
// effects no longer parse).
func (r *Reread) IdentityField(i int) string {
	if r.md == nil {
		return ""
	}
	effects, err := effectsList(r.md.Effects)
	if err != nil || i >= len(effects) {
		return ""
	}
	return cmp.Or(effects[i].IdentityField, judge.DefaultIdentityField)
}

// Sees reports whether the read of effect i's capture saw the whole
// collection (a census, or a whole read of keyless records).
func (r *Reread) Sees(i int) bool { return r.collectionOf(i) != nil }

// Holds reports whether the whole collection effect i's read saw holds a
// record with identity id (the judge's identity text) in field; false
// when it did not see the whole collection (Sees).
func (r *Reread) Holds(i int, field, id string) bool {
	seen := r.collectionOf(i)
	return seen != nil && seen.holds(field, id)
}

// collectionOf is what the read of effect i's capture saw of the whole
// collection (nil when it cannot see it).
func (r *Reread) collectionOf(i int) *collectionSeen {
	if r.ev == nil || r.md == nil {
		return nil
	}
	for n, cm := range r.md.Captures {
		if slices.Contains(cm.Effects, i) && n < len(r.ev.Groups) {
			return r.ev.Groups[n].collection
		}
	}
	return nil
}

// Reread judges a fresh read of session sid (of the run's step) against
// its original baseline, as Reverify does (the compensator never runs),
// and stores nothing. It judges through judgeStep, the one judging path. A
// session the store no longer has reads as one INDETERMINATE check.
func (h *RunHost) Reread(ctx context.Context, step, sid string) (*Reread, error) {
	m := h.m
	unlock, raw, _, err := m.lockSession(ctx, sid)
	if isKind(err, NotFound) {
		// Bound to the run, then removed (the retention): what it did
		// cannot be read back, so it remains.
		return &Reread{checks: []run.EffectCheck{{Step: step, SessionID: sid, Class: string(judge.ClassIndeterminate),
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
	out := &Reread{md: &md, res: res, ev: ev, checks: make([]run.EffectCheck, len(res.Effects))}
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

// SessionsCreated adds to out the records sessions counted as new in any
// of their results (run.CreatedKey of the effect's source and the
// record's identity). A session the store no longer has adds nothing.
func (h *RunHost) SessionsCreated(ctx context.Context, sessions []string, out map[string]bool) error {
	for _, sid := range sessions {
		raw, _, err := h.m.store.Session(ctx, sid)
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
		ids, err := h.matchedIDs(ctx, sid, &md, true)
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

// RecordIDs is, per effect of the re-read session, the identities of the
// records its results matched, in any of them (the first and every
// re-verification): of its change claims only when changeOnly (a
// duplicate a Reverify no longer counts is still the session's), else of
// every effect a result did not read affirmatively absent
// (matchedIdentities). None for a session the store no longer has.
func (h *RunHost) RecordIDs(ctx context.Context, sid string, got *Reread, changeOnly bool) ([][]string, error) {
	if got.md == nil {
		return nil, nil
	}
	return h.matchedIDs(ctx, sid, got.md, changeOnly)
}

// matchedIDs is RecordIDs of session sid stored as md.
func (h *RunHost) matchedIDs(ctx context.Context, sid string, md *meta, changeOnly bool) ([][]string, error) {
	_, first, err := h.m.store.Session(ctx, sid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && first == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	more, err := h.m.store.Reverifications(ctx, sid)
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
		field := cmp.Or(e.IdentityField, judge.DefaultIdentityField)
		for _, mr := range r.Effects[i].MatchedRecords {
			// The judge's identity text (judge.Verdict.Lost is in it too).
			if id, ok := judge.Canon(mr[field]); ok {
				out[i] = append(out[i], id)
			}
		}
	}
	return out
}

// effectSource names the collection effect i of a session was read from:
// the deployment candidate its baseline capture pinned (every session of a
// run reads through the run's one deployment). "" when no capture holds it.
func effectSource(md *meta, i int) string {
	for _, c := range md.Captures {
		if slices.Contains(c.Effects, i) {
			return fmt.Sprintf("candidate %d", c.Candidate)
		}
	}
	return ""
}
