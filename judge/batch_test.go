package judge

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/compact"
)

// scanSnapshot decodes a read with the fast decoder when every element is
// an object (the map path of fuzzSnapshot skips the others).
func scanSnapshot(data []byte, reachable bool) (BatchSnapshot, bool) {
	if !reachable {
		return BatchSnapshot{}, true
	}
	b, err := compact.DecodeRecords(string(data), "records")
	if err != nil {
		return BatchSnapshot{}, false
	}
	return BatchSnapshot{Reachable: true, Batch: b}, true
}

// verdictSummary is everything a verdict says, with the matched records as
// their canonical JSON (the compact path carries numbers canonically).
func verdictSummary(v Verdict) map[string]any {
	matched := make([]string, len(v.Matched))
	for i, r := range v.Matched {
		matched[i] = CanonicalJSON(r)
	}
	reasons := make([]string, len(v.Reasons))
	for i, r := range v.Reasons {
		reasons[i] = r.Code + ": " + r.Message + fmt.Sprint(r.shown)
	}
	deref := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	sref := func(p *string) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return map[string]any{
		"decision": v.Decision, "class": v.Class, "reasons": reasons,
		"observed": deref(v.ObservedCount), "expected": deref(v.ExpectedCount),
		"observed_value": sref(v.ObservedValue), "expected_value": sref(v.ExpectedValue),
		"matched": matched, "hash": v.ContractHash, "stale": v.Stale, "unavailable": v.Unavailable,
		"lost": v.Lost, "changed": v.Changed, "unexplained": v.Unexplained,
	}
}

func checkBatchAgrees(t *testing.T, via string, want, got Verdict) {
	t.Helper()
	if diff := cmp.Diff(verdictSummary(want), verdictSummary(got)); diff != "" {
		t.Fatalf("%s: JudgeBatch differs from Judge (-Judge +JudgeBatch):\n%s", via, diff)
	}
}

// randomRead makes a read whose values exercise canonical text: numbers
// written several ways, strings that spell numbers, booleans, nulls,
// nested values, missing identities, non-ASCII text.
func randomRead(rng *rand.Rand, n int, ordered bool) string {
	values := []string{`"p1"`, `"p2"`, `1`, `1.0`, `"1"`, `10e-1`, `true`, `"true"`, `null`, `{"b":1,"a":[2.50,"x"]}`,
		`[1,2]`, `"Zoë"`, `"Zo\u00eb"`, `"\ud83d\ude00"`, `-0`, `0.000`, `"a\"b"`, `1e400`, `123456789012345678901234567890123`}
	var sb strings.Builder
	sb.WriteByte('[')
	ids := rng.Perm(n * 2)[:n]
	if ordered {
		slices.Sort(ids)
	}
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('{')
		sep := ""
		switch rng.IntN(10) {
		case 0: // no identity
		case 1:
			fmt.Fprintf(&sb, `"id": "%d"`, ids[i])
			sep = ", "
		case 2:
			fmt.Fprintf(&sb, `"id": %s`, values[rng.IntN(len(values))])
			sep = ", "
		default:
			fmt.Fprintf(&sb, `"id": %d`, ids[i])
			sep = ", "
		}
		for _, f := range []string{"patient_id", "type", "key", "note"} {
			if rng.IntN(5) == 0 {
				continue
			}
			fmt.Fprintf(&sb, `%s"%s": %s`, sep, f, values[rng.IntN(len(values))])
			sep = ", "
		}
		sb.WriteByte('}')
	}
	sb.WriteByte(']')
	return sb.String()
}

// TestJudgeBatchAgrees judges random reads with random contracts of every
// kind through Judge (maps) and JudgeBatch (compact, built from the maps
// and by the fast decoder) and requires the same verdicts.
func TestJudgeBatchAgrees(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 14))
	contracts := []string{
		`{"kind": "record_written", "match": {"patient_id": "p1"}}`,
		`{"kind": "record_written", "match": {"patient_id": "1"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": "true"}, "idempotency_key": "1", "forbid_collateral_loss": false}`,
		`{"kind": "record_written", "match": {}, "expected_count": 3, "identity_field": "note"}`,
		`{"kind": "record_written", "match": {"note": "{\"a\":[2.5,\"x\"],\"b\":1}"}}`,
		`{"kind": "field_equals", "match": {"patient_id": "p2"}, "field": "note", "value": "Zoë"}`,
		`{"kind": "field_equals", "match": {"id": "1"}, "field": "type", "value": "1"}`,
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "match": {"type": "p2"}, "new_records": [{"note": "1"}, {"note": "1"}], "expected_count": 2}`,
		`{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "forbid_collateral_loss": false}`,
		// Typed comparison (§2a) and read-backs of new records.
		`{"kind": "record_written", "match": {"patient_id": {"literal": "1", "as": "decimal"}}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"type": {"literal": "TRUE", "as": "boolean"}}, "idempotency_key": {"literal": "1.0", "as": "integer"}}`,
		`{"kind": "field_equals", "match": {"patient_id": {"literal": "1.0", "as": "integer"}}, "field": "note", "value": {"literal": "1", "as": "decimal"}, "new_only": true}`,
		`{"kind": "field_equals", "match": {"type": "p2"}, "field": "note", "value": {"literal": "true", "as": "boolean"}}`,
		`{"kind": "exact_new_set", "new_records": [{"note": {"literal": "1", "as": "decimal"}}], "expected_count": 1}`,
		// Existing records changed into scope (by the selector, by the key).
		`{"kind": "record_written", "match": {"type": "p1"}, "idempotency_key": "p2", "key_field": "note", "count_new_only": true}`,
		`{"kind": "exact_new_set", "match": {"patient_id": "p2"}, "new_records": [{"note": "1"}], "expected_count": 1}`,
	}
	bound := bindContracts(t, contracts)
	// A census of random identities: usable unless a record lacks "id".
	randomCensus := func(rng *rand.Rand, reads ...Snapshot) *Census {
		ids := func() Snapshot {
			s := Snapshot{Reachable: rng.IntN(12) != 0, Records: []Record{}}
			if !s.Reachable {
				return s
			}
			for _, r := range reads {
				for _, rec := range r.Records {
					if id, ok := rec["id"]; ok && rng.IntN(4) != 0 {
						s.Records = append(s.Records, Record{"id": id})
					}
				}
			}
			for range rng.IntN(3) {
				s.Records = append(s.Records, Record{"id": json.Number(strconv.Itoa(rng.IntN(24)))})
			}
			if rng.IntN(10) == 0 {
				s.Records = append(s.Records, Record{"uuid": "x"})
			}
			return s
		}
		return &Census{Before: ids(), After: ids()}
	}
	confirmed, changed, changedAlone := 0, 0, 0
	for round := range 400 {
		ordered := round%2 == 0
		beforeJS, afterJS := randomRead(rng, rng.IntN(12), ordered), randomRead(rng, rng.IntN(12), ordered)
		before, ok1 := fuzzSnapshot([]byte(beforeJS), true)
		after, ok2 := fuzzSnapshot([]byte(afterJS), true)
		if !ok1 || !ok2 {
			t.Fatalf("round %d: generated reads do not decode", round)
		}
		bb, ok1 := scanSnapshot([]byte(beforeJS), true)
		ab, ok2 := scanSnapshot([]byte(afterJS), true)
		if !ok1 || !ok2 {
			t.Fatalf("round %d: the fast decoder refused generated reads", round)
		}
		opts := Options{}
		if round%3 != 0 {
			opts.Census = randomCensus(rng, before, after)
		}
		for _, c := range bound {
			v := Judge(c, before, after, opts)
			if v.Decision == Confirmed {
				confirmed++
			}
			if slices.Contains(v.Codes(), ReasonExistingRecordChanged) {
				changed++
				if opts.Census == nil {
					changedAlone++
				}
			}
			checkBatchAgrees(t, "BatchOf", v, JudgeBatch(c, batchOf(before), batchOf(after), opts))
			checkBatchAgrees(t, "compact.Scanner", v, JudgeBatch(c, bb, ab, opts))
		}
	}
	if confirmed == 0 || changed == 0 || changedAlone == 0 {
		t.Fatalf("%d confirmed, %d existing records changed (%d without a census): the generator does not exercise the judge", confirmed, changed, changedAlone)
	}
}

// bindContracts loads and binds each contract (JSON, no run parameters).
func bindContracts(t *testing.T, contracts []string) []*Contract {
	t.Helper()
	var bound []*Contract
	for i, js := range contracts {
		tree, err := DecodeJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		e, err := LoadEffect(tree, "effects[0]")
		if err != nil {
			t.Fatalf("contract %d: %v", i, err)
		}
		c, err := Bind(e, nil, "effects[0]")
		if err != nil {
			t.Fatal(err)
		}
		bound = append(bound, c)
	}
	return bound
}

// batchOf turns a map-form snapshot into compact form.
func batchOf(s Snapshot) BatchSnapshot {
	b := compact.NewBatch()
	for _, r := range s.Records {
		compact.Append(b, r)
	}
	return BatchSnapshot{Reachable: s.Reachable, Reason: s.Reason, Code: s.Code, Batch: b}
}
