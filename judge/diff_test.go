package judge

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// joinResult records what a join strategy reported.
type joinResult struct {
	InBase []bool // per after record
	Gone   []int  // baseline indexes reported gone, in order
}

func runJoin(t *testing.T, join func([]Record, []Record, string, func(Record, bool), func(Record)) bool, before, after []Record) (joinResult, bool) {
	t.Helper()
	var res joinResult
	idx := func(recs []Record, r Record) int {
		for i := range recs {
			if fmt.Sprintf("%p", recs[i]) == fmt.Sprintf("%p", r) {
				return i
			}
		}
		t.Fatalf("record %v not found", r)
		return -1
	}
	ok := join(before, after, "id",
		func(r Record, inBase bool) { res.InBase = append(res.InBase, inBase); _ = idx(after, r) },
		func(r Record) { res.Gone = append(res.Gone, idx(before, r)) })
	return res, ok
}

// randomReads makes a baseline and an after read with overlapping, possibly
// duplicated identities of the given flavour, optionally sorted.
func randomReads(rng *rand.Rand, flavour string, sorted bool) ([]Record, []Record) {
	id := func(n int) any {
		switch flavour {
		case "int":
			return json.Number(fmt.Sprint(n - 20))
		case "text":
			return fmt.Sprintf("k%03d", n)
		case "mixed":
			if n%3 == 0 {
				return fmt.Sprintf("t%d", n)
			}
			return json.Number(fmt.Sprint(n))
		case "missing":
			if n%7 == 0 {
				return nil
			}
			return json.Number(fmt.Sprint(n))
		}
		panic(flavour)
	}
	gen := func(count int) []Record {
		ns := make([]int, count)
		for i := range ns {
			ns[i] = rng.IntN(60)
		}
		if sorted {
			slices.Sort(ns)
			ns = slices.Compact(ns)
		}
		recs := make([]Record, len(ns))
		for i, n := range ns {
			r := Record{"v": fmt.Sprint(i)}
			if v := id(n); v != nil {
				r["id"] = v
			}
			recs[i] = r
		}
		return recs
	}
	return gen(rng.IntN(40)), gen(rng.IntN(40))
}

// TestJoinStrategiesAgree: the merge join, the partitioned join and the
// identity index report exactly the same thing on every input they accept.
func TestJoinStrategiesAgree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	merged, partitioned := 0, 0
	for iter := range 3000 {
		flavour := []string{"int", "text", "mixed", "missing"}[iter%4]
		before, after := randomReads(rng, flavour, iter%2 == 0)
		want, _ := runJoin(t, func(b, a []Record, f string, on func(Record, bool), gone func(Record)) bool {
			indexDiff(b, a, f, on, gone)
			return true
		}, before, after)
		if got, ok := runJoin(t, mergeDiff, before, after); ok {
			merged++
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("merge join disagrees on %s before=%v after=%v (-index +merge):\n%s", flavour, before, after, diff)
			}
		}
		if got, ok := runJoin(t, partitionDiff, before, after); ok {
			partitioned++
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("partitioned join disagrees on %s before=%v after=%v (-index +partitioned):\n%s", flavour, before, after, diff)
			}
		}
	}
	// Both fast paths must actually have been exercised.
	if merged < 500 || partitioned < 1000 {
		t.Errorf("merge ran %d times, partitioned %d times; the test did not exercise them", merged, partitioned)
	}
}

// TestPartitionedJoinManyPartitions runs the partitioned join across many
// partitions (more than 8192 records per side) against the index.
func TestPartitionedJoinManyPartitions(t *testing.T) {
	t.Parallel()
	for _, flavour := range []string{"int", "text"} {
		rng := rand.New(rand.NewPCG(3, 5))
		mk := func(n int) []Record {
			recs := make([]Record, n)
			for i := range recs {
				k := rng.IntN(3 * n)
				if flavour == "int" {
					recs[i] = Record{"id": json.Number(fmt.Sprint(k))}
				} else {
					recs[i] = Record{"id": fmt.Sprintf("id-%d", k)}
				}
			}
			return recs
		}
		before, after := mk(40000), mk(40000)
		want, _ := runJoinFast(indexDiffOK, before, after)
		got, ok := runJoinFast(partitionDiff, before, after)
		if !ok {
			t.Fatalf("%s: partitioned join declined", flavour)
		}
		if !slices.Equal(want.InBase, got.InBase) || !slices.Equal(want.Gone, got.Gone) {
			t.Errorf("%s: partitioned join disagrees with the index", flavour)
		}
	}
}

func indexDiffOK(b, a []Record, f string, on func(Record, bool), gone func(Record)) bool {
	indexDiff(b, a, f, on, gone)
	return true
}

// runJoinFast records gone baseline records by identity pointer via a map.
func runJoinFast(join func([]Record, []Record, string, func(Record, bool), func(Record)) bool, before, after []Record) (joinResult, bool) {
	pos := make(map[string]int, len(before))
	for i, r := range before {
		pos[fmt.Sprintf("%p", r)] = i
	}
	var res joinResult
	ok := join(before, after, "id",
		func(_ Record, inBase bool) { res.InBase = append(res.InBase, inBase) },
		func(r Record) { res.Gone = append(res.Gone, pos[fmt.Sprintf("%p", r)]) })
	return res, ok
}
