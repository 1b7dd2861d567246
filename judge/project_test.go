package judge

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/compact"
)

// projRecord makes one record whose values exercise canonical text (the
// values of randomRead), with an optional timestamp for freshness. id < 0
// leaves the identity out.
func projRecord(rng *rand.Rand, id int, now time.Time) string {
	values := []string{`"p1"`, `"p2"`, `1`, `1.0`, `"1"`, `10e-1`, `true`, `"true"`, `null`, `{"b":1,"a":[2.50,"x"]}`,
		`[1,2]`, `"Zoë"`, `"Zo\u00eb"`, `"\ud83d\ude00"`, `-0`, `0.000`, `"a\"b"`, `1e400`, `123456789012345678901234567890123`}
	var parts []string
	switch {
	case id < 0:
	case rng.IntN(12) == 0:
		parts = append(parts, `"id": `+values[rng.IntN(len(values))])
	case rng.IntN(6) == 0:
		parts = append(parts, fmt.Sprintf(`"id": "%d"`, id))
	default:
		parts = append(parts, fmt.Sprintf(`"id": %d`, id))
	}
	for _, f := range []string{"patient_id", "type", "key", "note"} {
		if rng.IntN(5) != 0 {
			parts = append(parts, fmt.Sprintf(`%q: %s`, f, values[rng.IntN(len(values))]))
		}
	}
	switch rng.IntN(4) {
	case 0:
		parts = append(parts, fmt.Sprintf(`"ts": %d`, now.Unix()-int64(rng.IntN(7200))))
	case 1:
		parts = append(parts, fmt.Sprintf(`"ts": %q`, now.Add(-time.Duration(rng.IntN(7200))*time.Second).Format(time.RFC3339)))
	case 2:
		parts = append(parts, `"ts": "soon"`)
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ", ") + "}"
}

// projReads makes a baseline and an after read of it: most records kept as
// they were, some changed in place, some gone, some added (a few without an
// identity, a few repeating one), in identity order or shuffled.
func projReads(rng *rand.Rand, now time.Time) (before, after []string) {
	n := rng.IntN(40)
	ids := rng.Perm(3*n + 8)
	for i := range n {
		id := ids[i]
		if rng.IntN(15) == 0 {
			id = -1
		}
		r := projRecord(rng, id, now)
		before = append(before, r)
		switch k := rng.IntN(20); {
		case k < 14:
			after = append(after, r)
		case k < 17:
			after = append(after, projRecord(rng, id, now))
		}
	}
	for i := range rng.IntN(6) {
		id := ids[n+i]
		switch rng.IntN(8) {
		case 0:
			id = -1
		case 1:
			id = ids[rng.IntN(n+1)]
		}
		after = append(after, projRecord(rng, id, now))
	}
	if rng.IntN(2) == 0 {
		rng.Shuffle(len(after), func(i, j int) { after[i], after[j] = after[j], after[i] })
	}
	return before, after
}

// streamRead streams records into a batch, projected by p (nil: whole),
// and returns it with the digest text the stream wrote.
func streamRead(t *testing.T, recs []string, p *Projection) (*Batch, string, *RecordStream) {
	t.Helper()
	rs := NewRecordStream("records", len(recs))
	rs.Project(p)
	var dig bytes.Buffer
	rs.Digest(&dig)
	buf := make([]byte, 0, 256)
	for _, r := range recs {
		buf = append(buf[:0], r...)
		if err := rs.Add(buf); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		clear(buf) // the caller's buffer is reused at once
	}
	bt := rs.Batch()
	return bt, dig.String(), rs
}

// TestProjectionAgrees judges random reads with random groups of contracts
// of every kind, with and without freshness and AbsenceNotProof, on whole
// reads and on reads projected for the group, and requires the same
// verdicts: decisions, classes, reasons (with the values they quote),
// counts, matched records (as maps, numbers keeping their source text) and
// the same read digests.
func TestProjectionAgrees(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 2))
	contracts := []string{
		`{"kind": "record_written", "match": {"patient_id": "p1"}}`,
		`{"kind": "record_written", "match": {"patient_id": "1"}, "count_new_only": true}`,
		`{"kind": "record_written", "match": {"patient_id": "p1", "type": "p2"}, "count_new_only": true, "expected_count": 2}`,
		`{"kind": "record_written", "match": {"type": "true"}, "idempotency_key": "1", "forbid_collateral_loss": false}`,
		`{"kind": "record_written", "match": {"type": "p1"}, "idempotency_key": "p2", "key_field": "note"}`,
		`{"kind": "record_written", "match": {}, "expected_count": 3, "identity_field": "note"}`,
		`{"kind": "record_written", "match": {"key": "1"}, "identity_field": "key", "count_new_only": true}`,
		`{"kind": "record_written", "match": {"note": "{\"a\":[2.5,\"x\"],\"b\":1}"}}`,
		`{"kind": "record_written", "match": {"patient_id": "p2"}, "forbid_collateral_loss": false, "expected_count": 0}`,
		`{"kind": "field_equals", "match": {"patient_id": "p2"}, "field": "note", "value": "Zoë"}`,
		`{"kind": "field_equals", "match": {"id": "1"}, "field": "type", "value": "1"}`,
		`{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "ts", "value": "soon"}`,
		`{"kind": "exact_new_set", "new_records": [{"patient_id": "p1"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "match": {"type": "p2"}, "new_records": [{"note": "1"}, {"note": "1"}], "expected_count": 2}`,
		`{"kind": "exact_new_set", "match": {"patient_id": "p1"}, "identity_field": "type", "new_records": [{"note": "Zoë"}], "expected_count": 1}`,
		`{"kind": "exact_new_set", "new_records": [], "expected_count": 0, "forbid_collateral_loss": false}`,
		// The changed-existing-record rule reads the baseline's scope:
		// the selector and a key field outside it.
		`{"kind": "record_written", "match": {"type": "p1"}, "idempotency_key": "p2", "key_field": "note", "count_new_only": true}`,
		`{"kind": "field_equals", "match": {"patient_id": "p1"}, "field": "note", "value": "1", "new_only": true}`,
		`{"kind": "exact_new_set", "match": {"patient_id": "p2"}, "new_records": [{"note": "1"}], "expected_count": 1}`,
	}
	bound := bindContracts(t, contracts)
	changed := 0
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	decisions := map[Decision]int{}
	partial, kept, in := 0, 0, 0
	for round := range 1500 {
		beforeRecs, afterRecs := projReads(rng, now)
		var group []*Contract
		for range 1 + rng.IntN(3) {
			group = append(group, bound[rng.IntN(len(bound))])
		}
		opts := Options{AbsenceNotProof: rng.IntN(3) == 0}
		if rng.IntN(2) == 0 {
			opts.Freshness = &Freshness{Field: "ts", WindowS: 3600, Now: now}
		}
		fullB, digB, _ := streamRead(t, beforeRecs, nil)
		fullA, digA, _ := streamRead(t, afterRecs, nil)
		projB, pdigB, rsB := streamRead(t, beforeRecs, ProjectBaseline(group))
		projA, pdigA, rsA := streamRead(t, afterRecs, ProjectAfter(group))
		idxB, idigB := indexRead(t, beforeRecs, ProjectBaseline(group))
		if idigB != pdigB {
			t.Fatalf("round %d: the index's digest text %q, the stream's %q", round, idigB, pdigB)
		}
		sameBatch(t, fmt.Sprintf("round %d", round), projB, idxB)
		for _, side := range []struct {
			name        string
			recs        []string
			full        *Batch
			dig, projDg string
			proj        *Batch
			rs          *RecordStream
		}{{"baseline", beforeRecs, fullB, digB, pdigB, projB, rsB}, {"after", afterRecs, fullA, digA, pdigA, projA, rsA}} {
			var want strings.Builder
			for _, r := range side.recs {
				tree, err := DecodeJSON([]byte(r))
				if err != nil {
					t.Fatal(err)
				}
				want.WriteString(CanonicalJSON(tree) + "\n")
			}
			if side.dig != want.String() || side.projDg != want.String() {
				t.Fatalf("round %d %s: digest text differs:\nwhole     %q\nprojected %q\nwant      %q", round, side.name, side.dig, side.projDg, want.String())
			}
			canon := compact.NewCanonicaliser(side.full)
			var got strings.Builder
			for i := range side.full.Len() {
				got.Write(append(canon.Append(nil, i), '\n'))
			}
			if got.String() != want.String() {
				t.Fatalf("round %d %s: compact.Canonicaliser %q, want %q", round, side.name, got.String(), want.String())
			}
			size := 0
			for _, r := range side.recs {
				size += len(r)
			}
			if side.proj.Len() != len(side.recs) || compact.Bytes(side.rs) != size {
				t.Fatalf("round %d %s: %d records of %d bytes, want %d of %d", round, side.name, side.proj.Len(), compact.Bytes(side.rs), len(side.recs), size)
			}
			for i := range side.proj.Len() {
				if compact.Partial(side.proj, i) {
					partial++
					if _, ok := compact.Source(side.proj, i); ok {
						t.Fatalf("round %d %s: a projected record gives a source", round, side.name)
					}
				} else if src, ok := compact.Source(side.proj, i); !ok || src != side.recs[i] {
					t.Fatalf("round %d %s: record %d kept whole has source %q, want %q", round, side.name, i, src, side.recs[i])
				}
			}
			kept += compact.Kept(side.rs)
			in += compact.Bytes(side.rs)
		}
		before := BatchSnapshot{Reachable: true, Batch: fullB}
		after := BatchSnapshot{Reachable: true, Batch: fullA}
		pbefore := BatchSnapshot{Reachable: true, Batch: projB}
		pafter := BatchSnapshot{Reachable: true, Batch: projA}
		for _, c := range group {
			want := JudgeBatch(c, before, after, opts)
			got := JudgeBatch(c, pbefore, pafter, opts)
			checkBatchAgrees(t, "indexed", got, JudgeBatch(c, BatchSnapshot{Reachable: true, Batch: idxB}, pafter, opts))
			decisions[want.Decision]++
			if len(want.Changed) > 0 {
				changed++
			}
			via := fmt.Sprintf("round %d, %s %v", round, c.Kind, c.Match)
			checkBatchAgrees(t, via, want, got)
			if !reflect.DeepEqual(want.Matched, got.Matched) {
				t.Fatalf("%s: matched %v, projected %v", via, want.Matched, got.Matched)
			}
			for _, r := range got.Reasons {
				if r.Code == ReasonReadProjected {
					t.Fatalf("%s: %s", via, r.Message)
				}
			}
		}
	}
	if decisions[Confirmed] == 0 || decisions[Refuted] == 0 || decisions[Indeterminate] == 0 || changed == 0 {
		t.Fatalf("decisions %v, %d with existing records changed: the generator does not exercise the judge", decisions, changed)
	}
	if partial == 0 || kept*2 > in {
		t.Fatalf("%d records projected, %d of %d bytes kept: the projection keeps too much to be tested", partial, kept, in)
	}
	t.Logf("decisions %v; %d records projected; %d of %d bytes kept", decisions, partial, kept, in)
}

// TestProjectionCovers: a read projected for other contracts than the one
// judged is never judged from less: INDETERMINATE READ_PROJECTED, whatever
// the records say.
func TestProjectionCovers(t *testing.T) {
	t.Parallel()
	bind := func(js string) *Contract { return bindContracts(t, []string{js})[0] }
	p1 := bind(`{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}`)
	p2 := bind(`{"kind": "record_written", "match": {"patient_id": "p2"}, "count_new_only": true}`)
	other := bind(`{"kind": "record_written", "match": {"type": "x"}, "forbid_collateral_loss": false}`)
	byNote := bind(`{"kind": "record_written", "match": {"patient_id": "p1"}, "identity_field": "note", "count_new_only": true}`)
	before := []string{`{"id": 1, "patient_id": "p0", "type": "x", "note": "a"}`}
	after := []string{`{"id": 1, "patient_id": "p0", "type": "x", "note": "a"}`, `{"id": 2, "patient_id": "p1", "type": "x", "note": "b"}`}
	for _, tt := range []struct {
		name    string
		group   []*Contract
		judged  *Contract
		decided Decision
	}{
		{"the contract it was made for", []*Contract{p1}, p1, Confirmed},
		{"a group holding it", []*Contract{p2, p1}, p1, Confirmed},
		{"another selector", []*Contract{p1}, p2, Indeterminate},
		{"another selector field", []*Contract{p1}, other, Indeterminate},
		{"another identity field", []*Contract{p1}, byNote, Indeterminate},
	} {
		b, _, _ := streamRead(t, before, ProjectBaseline(tt.group))
		a, _, _ := streamRead(t, after, ProjectAfter(tt.group))
		v := JudgeBatch(tt.judged, BatchSnapshot{Reachable: true, Batch: b}, BatchSnapshot{Reachable: true, Batch: a}, Options{})
		if v.Decision != tt.decided {
			t.Errorf("%s: %s %v, want %s", tt.name, v.Decision, v.Reasons, tt.decided)
		}
		if tt.decided == Indeterminate && (len(v.Reasons) != 1 || v.Reasons[0].Code != ReasonReadProjected) {
			t.Errorf("%s: reasons %v, want %s", tt.name, v.Reasons, ReasonReadProjected)
		}
	}
	// A counted record that was projected (a batch assembled by hand) is
	// never shown in part.
	a, _, _ := streamRead(t, after, ProjectAfter([]*Contract{p1}))
	compact.MarkPartial(a, 1)
	b, _, _ := streamRead(t, before, ProjectBaseline([]*Contract{p1}))
	v := JudgeBatch(p1, BatchSnapshot{Reachable: true, Batch: b}, BatchSnapshot{Reachable: true, Batch: a}, Options{})
	if v.Decision != Indeterminate || v.Reasons[0].Code != ReasonReadProjected || len(v.Matched) != 0 {
		t.Fatalf("a partial match gave %s %v", v.Decision, v.Reasons)
	}
}

// TestRecordStreamProjects: a projected stream keeps an unmatched record's
// identity only, a matched one whole, a record without an identity whole;
// names seen first in a projected record survive it.
func TestRecordStreamProjects(t *testing.T) {
	t.Parallel()
	c := bindContracts(t, []string{`{"kind": "record_written", "match": {"patient_id": "p1"}, "count_new_only": true}`})[0]
	recs := []string{
		`{"note": "long text \u00e9", "id": 7, "patient_id": "p0", "o": {"b": [1.0]}, "n": 2.50}`,
		`{"id": 8, "patient_id": "p1", "note": "kept"}`,
		`{"patient_id": "p0", "note": "no identity"}`,
		`{"id": "a\"b", "fresh": true}`,
	}
	for _, tt := range []struct {
		p     *Projection
		canon []string // the records as kept
	}{
		{ProjectAfter([]*Contract{c}), []string{`{"id":7}`, `{"id":8,"note":"kept","patient_id":"p1"}`, `{"note":"no identity","patient_id":"p0"}`, `{"id":"a\"b"}`}},
		{ProjectBaseline([]*Contract{c}), []string{`{"id":7}`, `{"id":8,"patient_id":"p1"}`, `{"note":"no identity","patient_id":"p0"}`, `{"id":"a\"b"}`}},
	} {
		b, _, rs := streamRead(t, recs, tt.p)
		for i, want := range tt.canon {
			if got := compact.CanonicalRecord(b, i); got != want {
				t.Errorf("record %d kept as %s, want %s", i, got, want)
			}
		}
		if fresh, o := compact.NameIndex(b, "fresh"), compact.NameIndex(b, "o"); fresh < 0 || o < 0 || compact.Name(b, uint32(fresh)) != "fresh" || compact.Name(b, uint32(o)) != "o" {
			t.Fatalf("name indexes: fresh %d, o %d", fresh, o)
		}
		if compact.Kept(rs) >= compact.Bytes(rs)/2 {
			t.Errorf("kept %d of %d bytes", compact.Kept(rs), compact.Bytes(rs))
		}
	}
}

// BenchmarkRecordStream1M streams the 1,000,000 records of the
// record_written benchmark's baseline one JSON object at a time (a stored
// baseline, a wire read) into a batch with its SHA-256 digest, whole and
// projected for the contract, and judges the projected reads. Reports the
// time per record and the batch's memory (kept bytes, fields, ends and
// source offsets).
func BenchmarkRecordStream1M(b *testing.B) {
	before, after := benchReads(true)
	raws := func(s Snapshot) [][]byte {
		out := make([][]byte, len(s.Records))
		for i, r := range s.Records {
			out[i] = []byte(CanonicalJSON(r))
		}
		return out
	}
	braw, araw := raws(before), raws(after)
	c, err := Bind(rwNewOnlyCollateral, nil, "effects[0]")
	if err != nil {
		b.Fatal(err)
	}
	stream := func(recs [][]byte, p *Projection) (*Batch, int) {
		rs := NewRecordStream("records", len(braw))
		rs.Project(p)
		h := sha256.New()
		rs.Digest(h)
		for _, r := range recs {
			if err := rs.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		bt := rs.Batch()
		return bt, compact.Kept(rs) + 16*compact.FieldCount(bt) + 4*bt.Len() + 4*(bt.Len()+1)
	}
	for _, tt := range []struct {
		name string
		p    *Projection
	}{{"whole", nil}, {"projected", ProjectBaseline([]*Contract{c})}} {
		b.Run(tt.name, func(b *testing.B) {
			runtime.GC()
			size := 0
			for b.Loop() {
				_, size = stream(braw, tt.p)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
			b.ReportMetric(float64(size)/(1<<20), "batch-MiB")
		})
	}
	b.Run("judge-projected", func(b *testing.B) {
		bb, _ := stream(braw, ProjectBaseline([]*Contract{c}))
		ab, _ := stream(araw, ProjectAfter([]*Contract{c}))
		runtime.GC()
		for b.Loop() {
			v := JudgeBatch(c, BatchSnapshot{Reachable: true, Batch: bb}, BatchSnapshot{Reachable: true, Batch: ab}, Options{})
			if v.Decision != Confirmed {
				b.Fatalf("verdict %s %v, want CONFIRMED", v.Decision, v.Codes())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
	})
	// What Begin does per record when it stores the baseline as an
	// index (digest, project, write the entry), and what Verify then
	// does to read the entries back.
	p := ProjectBaseline([]*Contract{c})
	b.Run("index", func(b *testing.B) {
		runtime.GC()
		var chunk []byte // as the store's writer copies each entry
		for b.Loop() {
			x := compact.NewIndexer(p, sha256.New())
			chunk = chunk[:0]
			for _, r := range braw {
				chunk = append(chunk, x.Entry(r)...)
			}
			if x.Err() != nil {
				b.Fatal(x.Err())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
		b.ReportMetric(float64(len(chunk))/(1<<20), "index-MiB")
		src := 0
		for _, r := range braw {
			src += len(r)
		}
		b.ReportMetric(float64(src)/(1<<20), "records-MiB")
	})
	b.Run("read-index", func(b *testing.B) {
		x := compact.NewIndexer(p, sha256.New())
		entries := make([][]byte, len(braw))
		for i, r := range braw {
			entries[i] = bytes.Clone(x.Entry(r))
		}
		runtime.GC()
		for b.Loop() {
			rs := NewRecordStream("records", len(entries))
			rs.Project(p)
			for _, e := range entries {
				if err := rs.AddEntry(e); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBaseline, "ns/record")
	})
}
