package judge

import (
	"bytes"
	"github.com/verifierd/verifierd/internal/compact"
	"strings"
	"testing"
)

// indexRead indexes recs under p (RecordStream.Index), reads the entries
// back (AddEntry) and returns the batch with the digest text the indexing
// wrote. The stream that indexes holds no record afterwards.
func indexRead(t *testing.T, recs []string, p *Projection) (*Batch, string) {
	t.Helper()
	var dig bytes.Buffer
	x := NewRecordStream("records", 0)
	x.Digest(&dig)
	x.Project(p)
	var entries [][]byte
	for _, r := range recs {
		entries = append(entries, bytes.Clone(x.Index([]byte(r))))
	}
	if x.IndexErr() != nil || len(entries) != len(recs) || x.Len() != 0 {
		t.Fatalf("indexing %d records: %d entries, %d kept, %v", len(recs), len(entries), x.Len(), x.IndexErr())
	}
	rs := NewRecordStream("records", len(recs))
	rs.Project(p)
	for _, e := range entries {
		if err := rs.AddEntry(e); err != nil {
			t.Fatalf("%q: %v", e, err)
		}
	}
	return rs.Batch(), dig.String()
}

// sameBatch requires got to hold what want holds: the same records, kept
// whole or in part alike, with the same fields (names, kinds, texts) in
// the same order, and the same sources.
func sameBatch(t *testing.T, via string, want, got *Batch) {
	t.Helper()
	if want.Len() != got.Len() || compact.Projected(want) != compact.Projected(got) || compact.Proj(want) != compact.Proj(got) && (compact.Proj(want) == nil || compact.Proj(got) == nil) {
		t.Fatalf("%s: %d records (projected %v), want %d (%v)", via, got.Len(), compact.Projected(got), want.Len(), compact.Projected(want))
	}
	for i := range want.Len() {
		if compact.Partial(want, i) != compact.Partial(got, i) {
			t.Fatalf("%s: record %d partial %v, want %v", via, i, compact.Partial(got, i), compact.Partial(want, i))
		}
		ws, wok := compact.Source(want, i)
		gs, gok := compact.Source(got, i)
		if ws != gs || wok != gok {
			t.Fatalf("%s: record %d source %q, want %q", via, i, gs, ws)
		}
		wf, gf := compact.At(want, i), compact.At(got, i)
		if len(wf) != len(gf) {
			t.Fatalf("%s: record %d has %d fields, want %d", via, i, len(gf), len(wf))
		}
		for k := range wf {
			if compact.Name(want, wf[k].Name) != compact.Name(got, gf[k].Name) || wf[k].Kind != gf[k].Kind || compact.Text(want, &wf[k]) != compact.Text(got, &gf[k]) {
				t.Fatalf("%s: record %d field %d is %s %v %q, want %s %v %q", via, i, k,
					compact.Name(got, gf[k].Name), gf[k].Kind, compact.Text(got, &gf[k]), compact.Name(want, wf[k].Name), wf[k].Kind, compact.Text(want, &wf[k]))
			}
		}
	}
}

// TestIndexRefuses: an entry without a known mark, a stream without a
// projection, or a record that does not decode makes the index unreadable.
func TestIndexRefuses(t *testing.T) {
	t.Parallel()
	p := ProjectBaseline(nil)
	for _, e := range []string{``, `{"id":1}`, `X{"id":1}`, `w{"id":1}`, `P{"id":`, `W[1]`} {
		rs := NewRecordStream("the stored baseline's records", 1)
		rs.Project(p)
		if err := rs.AddEntry([]byte(e)); err == nil {
			t.Fatalf("entry %q was read", e)
		} else if !strings.Contains(err.Error(), "the stored baseline's records[0]") {
			t.Fatalf("entry %q: %v does not name the record", e, err)
		}
	}
	rs := NewRecordStream("records", 1)
	if err := rs.AddEntry([]byte(`W{"id":1}`)); err == nil {
		t.Fatal("an entry was read without a projection")
	}
	var dig bytes.Buffer
	x := NewRecordStream("records", 0)
	x.Digest(&dig)
	x.Project(p)
	x.Index([]byte(`{"id":1}`))
	if e := string(x.Index([]byte(`{"id":`))); e != `W{"id":` || x.IndexErr() == nil {
		t.Fatalf("a record that does not decode gives %q, %v", e, x.IndexErr())
	}
	if e := string(x.Index([]byte(`{"id":2}`))); e != `W{"id":2}` {
		t.Fatalf("a record after a failure gives %q", e)
	}
}
