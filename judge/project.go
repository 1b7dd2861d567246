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
//     baseline, JUDGE.md §3.2), to tell added records from pre-existing
//     ones; a record without one is identified by its whole canonical
//     JSON, so it is kept whole;
//   - of a baseline record, whether it matches a contract's selector (the
//     collateral and scope loss rules), so the selector fields;
//   - of an after record that matches a contract's selector, everything:
//     it may be counted, read back (field_equals), key-filtered, checked
//     for freshness and shown as evidence. An after record that matches no
//     selector is never counted nor shown: only its identity is read.
//
// A projected record is marked in its batch (Batch.Partial), and JudgeBatch
// refuses to judge a contract the projection of either read does not cover
// (INDETERMINATE, never a guess from less information). The read's digest
// is taken while the record is still whole (RecordStream.Digest).
type Projection struct {
	after bool
	// ids: a record without a value for one of these is kept whole.
	ids []string
	// keep: the fields a projected record keeps (ids first).
	keep []string
	// whole: an after record matching one of these selectors is kept
	// whole.
	whole [][]Pair
}

// ProjectBaseline is the projection of a baseline judged by cs: identities
// and selector fields.
func ProjectBaseline(cs []*Contract) *Projection {
	p := &Projection{ids: identityFields(cs)}
	p.keep = slices.Clone(p.ids)
	for _, c := range cs {
		for _, pr := range c.Match {
			if !slices.Contains(p.keep, pr.Field) {
				p.keep = append(p.keep, pr.Field)
			}
		}
	}
	return p
}

// ProjectAfter is the projection of an after read judged by cs: a record
// that matches any contract's selector whole, of the others their
// identities.
func ProjectAfter(cs []*Contract) *Projection {
	p := &Projection{after: true, ids: identityFields(cs)}
	p.keep = slices.Clone(p.ids)
	for _, c := range cs {
		p.whole = append(p.whole, c.Match)
	}
	return p
}

// identityFields are the identity fields of the contracts that compare a
// read with its baseline.
func identityFields(cs []*Contract) []string {
	var ids []string
	for _, c := range cs {
		if NeedsBaseline(c) && !slices.Contains(ids, c.IdentityField) {
			ids = append(ids, c.IdentityField)
		}
	}
	return ids
}

// covers reports whether judging c reads nothing of a batch projected by p
// that p dropped. A nil projection covers everything.
func (p *Projection) covers(c *Contract) error {
	if p == nil {
		return nil
	}
	if NeedsBaseline(c) && !slices.Contains(p.ids, c.IdentityField) {
		return fmt.Errorf("its identity field %q", c.IdentityField)
	}
	if p.after {
		if !slices.ContainsFunc(p.whole, func(sel []Pair) bool { return slices.Equal(sel, c.Match) }) {
			return fmt.Errorf("its selector")
		}
		return nil
	}
	for _, pr := range c.Match {
		if !slices.Contains(p.keep, pr.Field) {
			return fmt.Errorf("its selector field %q", pr.Field)
		}
	}
	return nil
}

// projector applies a Projection to the records of one batch as they
// arrive. Name indexes are resolved as names appear.
type projector struct {
	p     *Projection
	names int     // len(b.Names) when ids and sels were resolved
	ids   []int64 // p.ids resolved
	sels  [][]bpair
	keep  []bool // per name index: kept in a projected record
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
	for _, sel := range pj.p.whole {
		pj.sels = append(pj.sels, resolve(b, sel))
	}
	for i := len(pj.keep); i < len(b.Names); i++ {
		pj.keep = append(pj.keep, slices.Contains(pj.p.keep, b.Names[i]))
	}
}

// whole reports whether rec is kept whole.
func (pj *projector) whole(b *Batch, rec []Field) bool {
	pj.resolve(b)
	for _, id := range pj.ids {
		if _, ok := b.get(rec, id); !ok {
			return true
		}
	}
	for _, sel := range pj.sels {
		if b.match(rec, sel) {
			return true
		}
	}
	return false
}

// Partial reports whether record i was projected: it holds only the fields
// its read's Projection keeps, so its map form and canonical JSON are not
// the record's.
func (b *Batch) Partial(i int) bool {
	return b != nil && i >= 0 && i/64 < len(b.part) && b.part[i/64]&(1<<(i%64)) != 0
}

// Projected reports whether any record of b was projected.
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
