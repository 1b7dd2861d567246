package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/changes"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
)

// The write set's holds live in the session store (store.WriteSetHolds,
// one value: slot -> hold key -> Begin position), not in a daemon's
// memory: a restart keeps them, and every replica on one PostgreSQL store
// reads and writes the same ones. A Begin stores a hold at the log's start
// before it reads its position, then replaces it with the position; a
// Verify releases its own hold, reads the holds and advances the slot to
// the oldest (or to where it read up to when none is held). The advance's
// bound is thus a position read before the holds were read, and a Begin
// whose hold that read did not see reads its position after storing the
// hold, so later: no replica advances the slot past an open session's
// Begin position, and no lock spans the advance.

// holdsValueKey is the one key the holds are stored under.
const holdsValueKey = "holds"

// holdWriteTimeout bounds a hold's store write made after the caller's
// context ended (a release after a canceled Verify).
const holdWriteTimeout = 10 * time.Second

// staleHoldAfter is how old a hold must be before it is dropped because
// its session is not in the store: a Begin that crashed after storing its
// hold, or a session the retention removed unverified. A Begin still
// running by then only risks its own write set (CHANGES_UNUSABLE).
const staleHoldAfter = 15 * time.Minute

// staleRewardHoldAfter is how old a reward episode's hold must be before
// it is dropped: the hold has no session to look up, and an episode
// registered again (or never scored) would otherwise keep the log for
// ever. An episode scored later than this finds its log released:
// CHANGES_UNUSABLE, never a guess.
const staleRewardHoldAfter = 24 * time.Hour

// holdStore reads and writes the holds in the session store; every
// replica's Manager and reward oracle make one over the same store.
type holdStore struct {
	store  store.Backend
	clock  judge.Clock
	logger hclog.Logger
}

// slotHolds are the stored holds, by slot.
type slotHolds map[string]changes.Holds

func parseHolds(v []byte) (slotHolds, error) {
	h := slotHolds{}
	if v == nil {
		return h, nil
	}
	if err := json.Unmarshal(v, &h); err != nil {
		return nil, fmt.Errorf("the write set's holds in the session store do not parse: %w", err)
	}
	for slot, hs := range h {
		if hs == nil {
			delete(h, slot)
		}
	}
	return h, nil
}

// readHolds reads every slot's holds.
func (m holdStore) readHolds(ctx context.Context) (slotHolds, error) {
	v, err := m.store.RewardGet(ctx, store.WriteSetHolds, holdsValueKey)
	if err != nil {
		return nil, fmt.Errorf("reading the write set's holds: %w", err)
	}
	return parseHolds(v)
}

// updateHolds changes the holds with fn in one store transaction,
// serialized with every other update on every replica; fn reports
// whether it changed anything (nothing is written otherwise).
func (m holdStore) updateHolds(ctx context.Context, fn func(slotHolds) bool) error {
	return m.store.RewardUpdate(ctx, func(tx store.RewardTx) error {
		v, err := tx.Get(store.WriteSetHolds, holdsValueKey)
		if err != nil {
			return err
		}
		h, err := parseHolds(v)
		if err != nil {
			return err
		}
		if !fn(h) {
			return nil
		}
		for slot, hs := range h {
			if len(hs) == 0 {
				delete(h, slot)
			}
		}
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		return tx.Put(store.WriteSetHolds, holdsValueKey, b)
	})
}

// hold stores key's hold on slot at p.
func (m holdStore) hold(ctx context.Context, slot, key string, p changes.Position) error {
	at := m.clock.Now().UTC()
	return m.updateHolds(ctx, func(h slotHolds) bool {
		if h[slot] == nil {
			h[slot] = changes.Holds{}
		}
		h[slot][key] = changes.Hold{From: p, At: at}
		return true
	})
}

// releaseHolds forgets every hold, on every slot, whose key starts with
// prefix. It reads first, so a session that holds nothing writes nothing.
func (m holdStore) releaseHolds(ctx context.Context, prefix string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdWriteTimeout)
	defer cancel()
	h, err := m.readHolds(ctx)
	if err != nil {
		return err
	}
	held := false
	for _, hs := range h {
		for k := range hs {
			held = held || strings.HasPrefix(k, prefix)
		}
	}
	if !held {
		return nil
	}
	return m.updateHolds(ctx, func(h slotHolds) bool {
		changed := false
		for _, hs := range h {
			changed = hs.ReleasePrefix(prefix) || changed
		}
		return changed
	})
}

// advanceBound is the oldest position held on slot by an open session of
// any replica (ok false when none is), after dropping the stale holds
// (staleHoldAfter). An error leaves the slot where it is.
func (m holdStore) advanceBound(ctx context.Context, slot string) (changes.Position, bool, error) {
	h, err := m.readHolds(ctx)
	if err != nil {
		return "", false, err
	}
	hs := h[slot]
	if stale := m.staleHolds(ctx, hs); len(stale) > 0 {
		err := m.updateHolds(ctx, func(h slotHolds) bool {
			changed := false
			for k, at := range stale {
				if cur, ok := h[slot][k]; ok && cur.At.Equal(at) {
					delete(h[slot], k)
					changed = true
				}
			}
			return changed
		})
		if err != nil {
			return "", false, err
		}
		for k := range stale {
			delete(hs, k)
		}
		m.logger.Warn("dropped write-set holds of sessions that are not in the store", "slot", slot, "holds", len(stale))
	}
	p, ok := hs.Oldest(changes.LessLSN)
	return p, ok, nil
}

// staleHolds are the holds older than staleHoldAfter whose session is not
// in the store, with the time each was taken.
func (m holdStore) staleHolds(ctx context.Context, hs changes.Holds) map[string]time.Time {
	out := map[string]time.Time{}
	cutoff := m.clock.Now().Add(-staleHoldAfter)
	rewardCutoff := m.clock.Now().Add(-staleRewardHoldAfter)
	for k, h := range hs {
		if strings.HasPrefix(k, rewardHoldPrefix) {
			if h.At.Before(rewardCutoff) {
				out[k] = h.At
			}
			continue
		}
		if !h.At.Before(cutoff) {
			continue
		}
		id, _, _ := strings.Cut(k, "/")
		if _, _, err := m.store.Session(ctx, id); errors.Is(err, store.ErrNotFound) {
			out[k] = h.At
		}
	}
	return out
}
