package session

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
)

func TestContractReads(t *testing.T) {
	t.Parallel()
	key, closed := "run-7", "Closed"
	contracts := []*judge.Contract{
		// 0: counts matches only: its identity field is not read.
		{Kind: judge.RecordWritten, Match: []judge.Pair{{Field: "project", Value: "Ops"}, {Field: "subject", Value: "Disk  full"}}, IdentityField: "id", ExpectedCount: 1},
		// 1: reads its field, its key and, new records only, its identity.
		{Kind: judge.FieldEquals, Match: []judge.Pair{{Field: "project", Value: "Ops"}}, Field: "status", Value: &closed,
			IdempotencyKey: &key, KeyField: "ref", NewOnly: true, IdentityField: "ticket"},
		// 2: exact_new_set: its identity and its members' fields.
		{Kind: judge.ExactNewSet, Match: []judge.Pair{{Field: "project", Value: "ops"}}, IdentityField: "id",
			NewRecords: [][]judge.Pair{{{Field: "subject", Value: "a"}}, {{Field: "subject", Value: "a"}, {Field: "due", Value: "2026-03-04"}}}},
		// 3: not in the read below.
		{Kind: judge.RecordWritten, Match: []judge.Pair{{Field: "owner", Value: "x"}}, IdentityField: "id"},
	}
	tests := []struct {
		name      string
		effects   []int
		freshness string
		fields    []string
		expected  map[string][]string
	}{
		{
			name: "one record_written", effects: []int{0},
			fields:   []string{"project", "subject"},
			expected: map[string][]string{"project": {"Ops"}, "subject": {"Disk  full"}},
		},
		{
			name: "field_equals with a key, new records only", effects: []int{1}, freshness: "updated_at",
			fields:   []string{"project", "status", "ref", "ticket", "updated_at"},
			expected: map[string][]string{"project": {"Ops"}, "status": {"Closed"}, "ref": {"run-7"}},
		},
		{
			name: "a group: every contract's fields and values, each once", effects: []int{0, 1, 2},
			fields: []string{"project", "subject", "status", "ref", "ticket", "id", "due"},
			expected: map[string][]string{
				"project": {"Ops", "ops"}, "subject": {"Disk  full", "a"}, "status": {"Closed"}, "ref": {"run-7"}, "due": {"2026-03-04"},
			},
		},
		{
			name: "a field_equals without a value still reads its field", effects: []int{4},
			fields: []string{"status"},
		},
	}
	contracts = append(contracts, &judge.Contract{Kind: judge.FieldEquals, Field: "status", IdentityField: "id"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fields, expected := contractReads(contracts, tt.effects, tt.freshness)
			if diff := cmp.Diff(tt.fields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.expected, expected); diff != "" {
				t.Errorf("expected values (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCaptureRequestsCarryContractReads checks the requests the daemon
// builds: a read carries its contracts' fields and values, an after read
// the freshness field too, a census only the identity fields it keeps.
func TestCaptureRequestsCarryContractReads(t *testing.T) {
	t.Parallel()
	v := "Closed"
	contracts := []*judge.Contract{
		{Kind: judge.FieldEquals, Match: []judge.Pair{{Field: "subject", Value: "Disk full"}}, Field: "status", Value: &v, IdentityField: "id"},
		{Kind: judge.RecordWritten, Match: []judge.Pair{{Field: "subject", Value: "Disk full"}}, CountNewOnly: true, IdentityField: "id", ExpectedCount: 1},
	}
	req := captureRequest("s1", "before", 0, contracts, []int{0, 1})
	if diff := cmp.Diff([]string{"subject", "status", "id"}, req.ReadFields); diff != "" {
		t.Errorf("before read's fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"subject": {"Disk full"}, "status": {"Closed"}}, req.ExpectedValues); diff != "" {
		t.Errorf("before read's values (-want +got):\n%s", diff)
	}
	if got := freshnessField(&config.FreshnessSetting{Field: "modified", WindowS: 60}); got != "modified" {
		t.Errorf("freshnessField = %q, want modified", got)
	}
	if got := freshnessField(nil); got != "" {
		t.Errorf("freshnessField(nil) = %q, want empty", got)
	}
	census := censusRequest("s1", "census-before", 0, contracts, []int{0, 1})
	if diff := cmp.Diff([]string{"id"}, census.ReadFields); diff != "" || census.ExpectedValues != nil {
		t.Errorf("census read: fields (-want +got):\n%s\nvalues %v, want none", diff, census.ExpectedValues)
	}
}
