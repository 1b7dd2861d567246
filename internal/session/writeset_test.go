package session

import (
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
)

// A changes: candidate's proof says write_set only when the judge was
// given its write set; judged on its reads alone (a reward's stored
// reads), the proof says what the reads prove: a narrowed read proves
// newly matching records.
func TestProofNewnessOfAWriteSetCandidate(t *testing.T) {
	dep, err := config.ParseDeployment([]byte(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id FROM encounters WHERE patient_id = :pid
  sql_query_params: {pid: {param: pid}}
  changes: {source: logical, tables: [encounters]}
  sql_connect_args: {host: 127.0.0.1, user: r, database: d}
`))
	if err != nil {
		t.Fatal(err)
	}
	cand := &dep.Candidates[0]
	with := proofOf(cand, withWriteSet(judge.Options{}, &judge.WriteSet{Reachable: true, Complete: true}), nil)
	if with.Newness != config.NewnessWriteSet || with.CollateralScope != config.ScopeCollection {
		t.Errorf("with its write set: newness %q scope %q, want write_set collection", with.Newness, with.CollateralScope)
	}
	without := proofOf(cand, judge.Options{}, nil)
	if without.Newness != config.NewnessNewlyMatching || without.CollateralScope != config.ScopeSubject {
		t.Errorf("without its write set: newness %q scope %q, want newly_matching subject", without.Newness, without.CollateralScope)
	}
}

// The holds are in the session store: a Manager that shares it (another
// replica, or this daemon after a restart) sees a Begin's placeholder and
// its position, and releasing a refused session's holds frees the slot
// again for every one of them. A hold whose session is not in the store is
// dropped once it is stale, and only then.
func TestWriteSetHoldsAreInTheStore(t *testing.T) {
	ctx := t.Context()
	m := newManager(t)
	replica := &Manager{store: m.store, clock: m.clock, logger: m.logger}
	replica.holdStore = holdStore{replica.store, replica.clock, replica.logger}
	if err := m.holdStore.hold(ctx, "verifierd_x", holdKey("s1", 0), "0/0"); err != nil {
		t.Fatal(err)
	}
	if err := m.holdStore.hold(ctx, "verifierd_x", holdKey("s10", 0), "0/5"); err != nil {
		t.Fatal(err)
	}
	if err := m.holdStore.hold(ctx, "verifierd_y", holdKey("s2", 1), "0/9"); err != nil {
		t.Fatal(err)
	}
	if p, ok, err := replica.holdStore.advanceBound(ctx, "verifierd_x"); err != nil || !ok || p != "0/0" {
		t.Fatalf("oldest %s (%v, %v), want the placeholder 0/0", p, ok, err)
	}
	m.releaseWriteSets(ctx, "s1")
	if p, ok, err := replica.holdStore.advanceBound(ctx, "verifierd_x"); err != nil || !ok || p != "0/5" {
		t.Fatalf("after releasing s1: oldest %s (%v, %v), want s10's 0/5 kept", p, ok, err)
	}
	if p, ok, _ := replica.holdStore.advanceBound(ctx, "verifierd_y"); !ok || p != "0/9" {
		t.Fatalf("another slot's hold: %s (%v), want 0/9", p, ok)
	}
	later := &Manager{store: m.store, clock: shiftedClock{m.clock, staleHoldAfter + time.Minute}, logger: m.logger}
	later.holdStore = holdStore{later.store, later.clock, later.logger}
	if p, ok, _ := replica.holdStore.advanceBound(ctx, "verifierd_x"); !ok || p != "0/5" {
		t.Fatalf("a fresh hold of a session not in the store: %s (%v), want it kept", p, ok)
	}
	if p, ok, err := later.holdStore.advanceBound(ctx, "verifierd_x"); err != nil || ok {
		t.Fatalf("a stale hold of a session not in the store: %s (%v, %v), want it dropped", p, ok, err)
	}
	if h, err := m.holdStore.readHolds(ctx); err != nil || len(h["verifierd_x"]) != 0 || len(h["verifierd_y"]) != 1 {
		t.Fatalf("stored holds after the stale one was dropped: %v (%v)", h, err)
	}
}

type shiftedClock struct {
	judge.Clock
	by time.Duration
}

func (c shiftedClock) Now() time.Time { return c.Clock.Now().Add(c.by) }
