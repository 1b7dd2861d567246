package judge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Unreachable states exactly the verdict Judge gives on an unreachable
// after read, for every kind.
func TestUnreachableConstructor(t *testing.T) {
	for _, src := range []string{
		`{"kind": "record_written", "match": {"a": "1"}, "expected_count": 1, "count_new_only": true}`,
		`{"kind": "field_equals", "match": {"a": "1"}, "field": "b", "value": "x"}`,
		`{"kind": "exact_new_set", "identity_field": "id", "match": {"a": "1"}, "new_records": [{"a": "1"}], "expected_count": 1}`,
	} {
		c := bindOne(t, src, nil)
		want := Judge(c, Snapshot{}, Snapshot{Reachable: false, Reason: "down"}, Options{})
		got := Unreachable(c, "down")
		if d := cmp.Diff(want, got, cmp.AllowUnexported(Reason{})); d != "" {
			t.Errorf("%s: Unreachable differs from Judge (-Judge +Unreachable):\n%s", src, d)
		}
		if got.Decision != Indeterminate || got.Class != ClassUnavailable || got.Codes()[0] != ReasonSORUnreachable {
			t.Errorf("%s: %s %s %v, want INDETERMINATE unavailable SOR_UNREACHABLE", src, got.Decision, got.Class, got.Codes())
		}
	}
}
