package session

import (
	"testing"

	"github.com/verifierd/verifierd/internal/changes"
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

// A Begin holds the log's start before it reads the position, so a
// concurrent Verify cannot advance the slot past it; releasing a refused
// session's holds frees the slot again.
func TestWriteSetHoldsOfARefusedBegin(t *testing.T) {
	m := &Manager{writeSets: newWriteSetSources()}
	h := changes.NewHolds(changes.LessLSN)
	m.writeSets.holds["verifierd_x"] = h
	h.Hold(holdKey("s1", 0), "0/0")
	h.Hold(holdKey("s10", 0), "0/5")
	if p, _ := h.Oldest(); p != "0/0" {
		t.Fatalf("oldest %s, want the placeholder 0/0", p)
	}
	m.releaseWriteSets("s1")
	if p, ok := h.Oldest(); !ok || p != "0/5" {
		t.Fatalf("after releasing s1: oldest %s (%v), want s10's 0/5 kept", p, ok)
	}
}
