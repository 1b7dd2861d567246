package judge

import (
	"fmt"
	"slices"
)

// Projection says which parts of a read's records the judgement of a set
// of contracts can look at, so that a RecordStream keeps only those and a
// large read costs a fraction of its size. What JudgeBatch reads of a
// record (judgebatch.go):
//
//   - its identity (the identity_field of every contract that needs the
//     baseline, docs/contracts.md §3.2), to tell added records from pre-existing
//     ones; a record without one is identified by its whole canonical
//     JSON, so it is kept whole;
//   - of a baseline record, whether it matches a contract's selector (the
//     collateral and scope loss rules): one that matches some selector
//     keeps every selector field, one that matches none needs none of them
//     to match none (a selector with a missing field matches nothing, and
//     the empty selector matches every record);
//   - of an after record that matches a contract's selector, everything:
//     it may be counted, read back (field_equals), key-filtered, checked
//     for freshness and shown as evidence. An after record that matches no
//     selector is never counted nor shown: only its identity is read.
//
// A projected record is marked in its batch (Batch.Partial), and JudgeBatch
// refuses to judge a contract the projection of either read was not made
// for, or to count a record kept in part (INDETERMINATE, never a guess from
// less information). The read's digest is taken while the record is still
// whole (RecordStream.Digest).
type Projection struct {
	after bool
	// ids: a record without a value for one of these is kept whole.
	ids []string
	// sels: the contracts' selectors. An after record matching one is
	// kept whole; a baseline record matching one keeps ids and selFields.
	sels      [][]Pair
	selFields []string
}

// ProjectBaseline is the projection of a baseline judged by cs.
func ProjectBaseline(cs []*Contract) *Projection { return project(cs, false) }

// ProjectAfter is the projection of an after read judged by cs.
func ProjectAfter(cs []*Contract) *Projection { return project(cs, true) }

func project(cs []*Contract, after bool) *Projection {
	p := &Projection{after: after}
	for _, c := range cs {
		if NeedsBaseline(c) && !slices.Contains(p.ids, c.IdentityField) {
			p.ids = append(p.ids, c.IdentityField)
		}
		p.sels = append(p.sels, c.Match)
		for _, pr := range c.Match {
			if !slices.Contains(p.selFields, pr.Field) {
				p.selFields = append(p.selFields, pr.Field)
			}
		}
	}
	return p
}

// covers reports whether p was made for c: judging c reads nothing of a
// batch projected by p that p dropped. A nil projection covers everything.
func (p *Projection) covers(c *Contract) error {
	if p == nil {
		return nil
	}
	if NeedsBaseline(c) && !slices.Contains(p.ids, c.IdentityField) {
		return fmt.Errorf("its identity field %q", c.IdentityField)
	}
	if !slices.ContainsFunc(p.sels, func(sel []Pair) bool { return slices.Equal(sel, c.Match) }) {
		return fmt.Errorf("its selector")
	}
	return nil
}

// What a projector keeps of one record.
const (
	keepWhole = iota
	keepSelected
	keepIdentity
)

// projector applies a Projection to the records of one batch as they
// arrive. Name indexes are resolved as names appear.
type projector struct {
	p     *Projection
	names int     // len(b.Names) when ids and sels were resolved
	ids   []int64 // p.ids resolved
	sels  [][]bpair
	// Per name index: kept by keepIdentity, kept by keepSelected.
	idName, selName []bool
}

func (pj *projector) resolve(b *Batch) {
	if pj.names == len(b.Names) && pj.ids != nil {
		return
	}
	pj.names = len(b.Names)
	pj.ids = pj.ids[:0]
	for _, f := range pj.p.ids {
		pj.ids = append(pj.ids, b.nameIndex(f))
	}
	if pj.ids == nil {
		pj.ids = []int64{}
	}
	pj.sels = pj.sels[:0]
	for _, sel := range pj.p.sels {
		pj.sels = append(pj.sels, resolve(b, sel))
	}
	for i := len(pj.idName); i < len(b.Names); i++ {
		id := slices.Contains(pj.p.ids, b.Names[i])
		pj.idName = append(pj.idName, id)
		pj.selName = append(pj.selName, id || slices.Contains(pj.p.selFields, b.Names[i]))
	}
}

// keep says what of rec is kept, and the names kept when not whole.
func (pj *projector) keep(b *Batch, rec []Field) (int, []bool) {
	pj.resolve(b)
	for _, id := range pj.ids {
		if _, ok := b.get(rec, id); !ok {
			return keepWhole, nil
		}
	}
	for _, sel := range pj.sels {
		if b.match(rec, sel) {
			if pj.p.after {
				return keepWhole, nil
			}
			return keepSelected, pj.selName
		}
	}
	return keepIdentity, pj.idName
}

// Partial reports whether record i was projected: it holds only the fields
// its read's Projection keeps, so its map form and canonical JSON are not
// the record's.
func (b *Batch) Partial(i int) bool {
	return b != nil && i >= 0 && i/64 < len(b.part) && b.part[i/64]&(1<<(i%64)) != 0
}

// Projected reports whether b was read under a Projection (some of its
// records may be kept in part).
func (b *Batch) Projected() bool { return b != nil && b.proj != nil }

func (b *Batch) markPartial(i int) {
	for i/64 >= len(b.part) {
		b.part = append(b.part, 0)
	}
	b.part[i/64] |= 1 << (i % 64)
}

// projectionGap names what c would read of before or after that their
// projections dropped, or returns "".
func projectionGap(c *Contract, before, after *Batch) string {
	if err := before.proj.covers(c); err != nil {
		return "the baseline was kept without " + err.Error()
	}
	if err := after.proj.covers(c); err != nil {
		return "the after read was kept without " + err.Error()
	}
	return ""
}

// ReasonReadProjected: a read was kept in part for other contracts than
// the one judged (a caller's mistake); the judge does not guess.
const ReasonReadProjected = "READ_PROJECTED"
