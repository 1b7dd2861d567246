package session

import (
	"context"
	"errors"
	"fmt"

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
type writeSetSourceFunc func(depName string, dep *config.Deployment, ci int) (*changes.Postgres, error)

// usesRewardWriteSet reports whether effects read through cand are judged
// on a write set.
func usesRewardWriteSet(cand *config.Candidate, effects []*judge.Contract) bool {
	return cand.Changes != nil && usesWriteSet(effects)
}

// rewardHoldPrefix starts every reward episode's hold key (no session id
// does: those are random hex).
const rewardHoldPrefix = "reward/"

// rewardHoldKey names an episode's hold on the slot.
func rewardHoldKey(deployment string, identity map[string]string, from changes.Position) string {
	return rewardHoldPrefix + deployment + "/" + judge.CanonicalJSON(identity) + "/" + string(from)
}

// rewardWriteSetFrom reads the log's position for a registration through
// candidate ci of deployment and holds it until the episode is scored
// (the hold is in the store, as a session's is: a restart keeps it; it is
// dropped after staleRewardHoldAfter, and a later scoring is then
// CHANGES_UNUSABLE).
func (o RewardOracle) rewardWriteSetFrom(ctx context.Context, deployment string, dep *config.Deployment, ci int, identity map[string]string) (changes.Position, error) {
	if o.writeSets == nil {
		return "", errors.New("this oracle reads no write set")
	}
	src, err := o.writeSets(deployment, dep, ci)
	if err != nil {
		return "", err
	}
	// Held at the log's start until the position is read, as Begin does.
	opening := rewardHoldKey(deployment, identity, "")
	if err := o.holds.hold(ctx, src.Names.Slot, opening, changes.Position("0/0")); err != nil {
		return "", fmt.Errorf("its hold on the slot could not be stored: %w", err)
	}
	defer func() {
		if err := o.holds.releaseHolds(ctx, opening); err != nil {
			o.holds.logger.Warn("a reward registration's opening hold could not be released; it is dropped when stale", "slot", src.Names.Slot, "error", err.Error())
		}
	}()
	if why, err := src.Ready(ctx); err != nil || why != "" {
		return "", errors.New(cmpText(why, err))
	}
	pos, err := src.Position(ctx)
	if err != nil {
		return "", err
	}
	if err := o.holds.hold(ctx, src.Names.Slot, rewardHoldKey(deployment, identity, pos), pos); err != nil {
		return "", fmt.Errorf("its hold on the slot could not be stored: %w", err)
	}
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
	src, err := o.writeSets(deployment, dep, ci)
	if err != nil {
		return &judge.WriteSet{Reason: err.Error()}
	}
	from := changes.Position(pin.WriteSetFrom)
	defer func() {
		if err := o.holds.releaseHolds(ctx, rewardHoldKey(deployment, identity, from)); err != nil {
			o.holds.logger.Warn("a scored episode's hold could not be released; it is dropped when stale", "slot", src.Names.Slot, "error", err.Error())
		}
	}()
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
