package session

import (
	"encoding/json"
	"testing"

	"github.com/verifierd/verifierd/judge"
)

func TestJudgeArtifact(t *testing.T) {
	t.Parallel()
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	a := Artifact{SHA256: sum, Size: 4, Name: "report.pdf"}
	rec := func(name, sha string, size string) judge.Record {
		return judge.Record{"name": name, "path": "out/" + name, "sha256": sha, "size": json.Number(size)}
	}
	other := "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
	for name, tc := range map[string]struct {
		snap    judge.Snapshot
		absence bool
		verdict judge.Decision
		reason  string
	}{
		"exact":                    {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("a.pdf", sum, "4"), rec("report.pdf", sum, "4")}}, false, judge.Confirmed, ReasonArtifactExact},
		"same digest, other size":  {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("report.pdf", sum, "5")}}, false, judge.Refuted, ReasonArtifactOther},
		"other bytes":              {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("report.pdf", other, "4")}}, false, judge.Refuted, ReasonArtifactOther},
		"bytes under another name": {judge.Snapshot{Reachable: true, Records: []judge.Record{rec("copy.pdf", sum, "4")}}, false, judge.Refuted, ReasonArtifactAbsent},
		"absent, absence no proof": {judge.Snapshot{Reachable: true}, true, judge.Indeterminate, ReasonArtifactAbsent},
		"unreadable":               {judge.Snapshot{Reachable: false, Reason: "root gone"}, false, judge.Indeterminate, judge.ReasonSORUnreachable},
	} {
		v, rs := judgeArtifact(tc.snap, a, tc.absence)
		if v != tc.verdict || len(rs) != 1 || rs[0].Code != tc.reason {
			t.Errorf("%s: %s %v, want %s %s", name, v, rs, tc.verdict, tc.reason)
		}
	}
}
