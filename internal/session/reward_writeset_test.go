package session

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/judge"
)

// TestRewardJudgedOnTheWriteSet: an episode scored through a candidate
// with changes: is judged on its write set, never on the narrowed reads
// alone. The reads here would show one newly matching record (a re-point
// the narrowed read cannot tell from a creation); the write set says it
// was an existing record changed, and a scoring read without a write set
// is CHANGES_UNUSABLE. Before the fix the reward path judged the reads
// alone and scored the re-point verified.
func TestRewardJudgedOnTheWriteSet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deployment.yaml")
	must(t, os.WriteFile(path, []byte(`effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id FROM encounters WHERE patient_id = %(pid)s
  sql_query_params: {pid: {param: pid}}
  changes: {source: logical, tables: [encounters]}
  sql_connect_args: {host: 127.0.0.1, user: r, database: d}
`), 0o600))
	o := newRewardOracle(&config.Daemon{Deployments: map[string]string{"clinic": path}}, nil, nil, os.LookupEnv, afterReader{})
	c, err := judge.Bind(judge.Effect{Kind: judge.RecordWritten, Match: judge.Selector{"patient_id": {Literal: "p1"}},
		ExpectedCount: 1, CountNewOnly: true, ForbidCollateralLoss: true, KeyField: judge.DefaultKeyField, IdentityField: judge.DefaultIdentityField}, nil, "effects[0]")
	must(t, err)
	pin := &reward.OraclePin{Index: 0, Kind: "sql", WriteSetFrom: "0/10"}
	before := reward.OracleRead{Snapshot: judge.Snapshot{Reachable: true, Records: []judge.Record{}}, Pin: pin}
	after := reward.OracleRead{Snapshot: judge.Snapshot{Reachable: true, Records: []judge.Record{{"id": "5", "patient_id": "p1"}}}, Pin: pin}
	repoint := &judge.WriteSet{Reachable: true, Complete: true, Changes: []judge.Change{{Op: judge.OpUpdate, Table: "encounters",
		Before: judge.Record{"id": "5", "patient_id": "p2"}, After: judge.Record{"id": "5", "patient_id": "p1"}}}}
	honest := &judge.WriteSet{Reachable: true, Complete: true, Changes: []judge.Change{{Op: judge.OpInsert, Table: "encounters",
		After: judge.Record{"id": "5", "patient_id": "p1"}}}}
	for _, tc := range []struct {
		name     string
		ws       *judge.WriteSet
		decision judge.Decision
		code     string
	}{
		{"re-pointed", repoint, judge.Refuted, judge.ReasonExistingRecordChanged},
		{"no write set read", nil, judge.Indeterminate, judge.ReasonChangesUnusable},
		{"honest", honest, judge.Confirmed, "COUNT_EXACT"},
	} {
		a := after
		a.WriteSet = tc.ws
		p := o.Judge("clinic", pin, []*judge.Contract{c}, before, a)
		if len(p.Verdicts) != 1 || p.Verdicts[0].Decision != tc.decision || !slices.Contains(p.Verdicts[0].Codes(), tc.code) {
			t.Errorf("%s: %+v, want %s with %s", tc.name, p.Verdicts, tc.decision, tc.code)
		}
		if p.Newness != config.NewnessWriteSet {
			t.Errorf("%s: newness %q, want write_set", tc.name, p.Newness)
		}
	}
}
