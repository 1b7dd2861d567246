package session

import (
	"context"
	"errors"

	"github.com/verifierd/verifierd/internal/changes"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/judge"
)

// An episode read through a candidate with changes: is judged on its
// write set, as a session is (writeset.go): the registration reads the
// change log's position after the baseline, stores it in the episode's
// pin and holds it; the scoring read takes every committed change to the
// declared tables from it up to the log's position after the after read,
// and releases the hold. A position that cannot be read refuses the
// registration; a write set that cannot be read at scoring leaves the
// change claims INDETERMINATE CHANGES_UNUSABLE, never judged on the
// narrowed read alone.

// writeSetSourceFunc is Manager.writeSetSource.
type writeSetSourceFunc func(depName string, dep *config.Deployment, ci int) (*changes.Postgres, *changes.Holds, error)

// usesRewardWriteSet reports whether effects read through cand are judged
// on a write set.
func usesRewardWriteSet(cand *config.Candidate, effects []*judge.Contract) bool {
	return cand.Changes != nil && usesWriteSet(effects)
}

// rewardHoldKey names an episode's hold on the slot.
func rewardHoldKey(deployment string, identity map[string]string, from changes.Position) string {
	return "reward/" + deployment + "/" + judge.CanonicalJSON(identity) + "/" + string(from)
}

// rewardWriteSetFrom reads the log's position for a registration through
// candidate ci of deployment and holds it until the episode is scored
// (or the daemon restarts: then a Verify may advance the slot past it,
// and the scoring is CHANGES_UNUSABLE).
func (o RewardOracle) rewardWriteSetFrom(ctx context.Context, deployment string, dep *config.Deployment, ci int, identity map[string]string) (changes.Position, error) {
	if o.writeSets == nil {
		return "", errors.New("this oracle reads no write set")
	}
	src, holds, err := o.writeSets(deployment, dep, ci)
	if err != nil {
		return "", err
	}
	// Held at the log's start until the position is read, as Begin does.
	opening := rewardHoldKey(deployment, identity, "")
	holds.Hold(opening, changes.Position("0/0"))
	defer holds.Release(opening)
	if why, err := src.Ready(ctx); err != nil || why != "" {
		return "", errors.New(cmpText(why, err))
	}
	pos, err := src.Position(ctx)
	if err != nil {
		return "", err
	}
	holds.Hold(rewardHoldKey(deployment, identity, pos), pos)
	return pos, nil
}

// rewardWriteSet reads a scoring's write set: from the position the pin
// stored up to the log's position now; every failure is a write set that
// is not reachable. The registration's hold is released.
func (o RewardOracle) rewardWriteSet(ctx context.Context, deployment string, dep *config.Deployment, ci int, identity map[string]string, pin *reward.OraclePin) *judge.WriteSet {
	if pin == nil || pin.WriteSetFrom == "" {
		return &judge.WriteSet{Reason: "the episode's registration stored no change-log position (it was not registered, or registered before the candidate declared changes:)"}
	}
	if o.writeSets == nil {
		return &judge.WriteSet{Reason: "this oracle reads no write set"}
	}
	src, holds, err := o.writeSets(deployment, dep, ci)
	if err != nil {
		return &judge.WriteSet{Reason: err.Error()}
	}
	from := changes.Position(pin.WriteSetFrom)
	defer holds.Release(rewardHoldKey(deployment, identity, from))
	upTo, err := src.Position(ctx)
	if err != nil {
		return &judge.WriteSet{Reason: err.Error()}
	}
	ws, err := src.Read(ctx, from, upTo)
	if err != nil {
		ws = judge.WriteSet{Reason: err.Error()}
	}
	return &ws
}
