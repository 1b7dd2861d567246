package compact

import "slices"

// Projection says which parts of a read's records are kept (the judge
// builds it from the contracts that will judge the read: judge.Projection).
// A record without a value for one of ids is kept whole. Of an after read
// (after), a record matching one of sels is kept whole; of a baseline, a
// record matching one keeps ids and selFields. Any other record keeps its
// ids only. Its fields are unexported (NewProjection, Parts):
// judge.Projection is an alias of it, and every exported field would be
// judge's promise.
type Projection struct {
	after     bool
	ids       []string
	sels      [][]Sel
	selFields []string
}

// NewProjection is the projection of an after read (after) or a baseline
// keeping the identity fields ids, the records matching one of sels and,
// of a baseline, the selector fields selFields.
func NewProjection(after bool, ids []string, sels [][]Sel, selFields []string) *Projection {
	return &Projection{after: after, ids: ids, sels: sels, selFields: selFields}
}

// Parts is what NewProjection made p of.
func Parts(p *Projection) (after bool, ids []string, sels [][]Sel, selFields []string) {
	return p.after, p.ids, p.sels, p.selFields
}

// Proj is the Projection b was read under (nil: its records are whole).
func Proj(b *Batch) *Projection {
	if b == nil {
		return nil
	}
	return b.proj
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
	names int     // len(b.names) when ids and sels were resolved
	ids   []int64 // p.ids resolved
	sels  [][]BPair
	// Per name index: kept by keepIdentity, kept by keepSelected.
	idName, selName []bool
}

func (pj *projector) resolve(b *Batch) {
	if pj.names == len(b.names) && pj.ids != nil {
		return
	}
	pj.names = len(b.names)
	pj.ids = pj.ids[:0]
	for _, f := range pj.p.ids {
		pj.ids = append(pj.ids, NameIndex(b, f))
	}
	if pj.ids == nil {
		pj.ids = []int64{}
	}
	pj.sels = pj.sels[:0]
	for _, sel := range pj.p.sels {
		pj.sels = append(pj.sels, Resolve(b, sel))
	}
	for i := len(pj.idName); i < len(b.names); i++ {
		id := slices.Contains(pj.p.ids, b.names[i])
		pj.idName = append(pj.idName, id)
		pj.selName = append(pj.selName, id || slices.Contains(pj.p.selFields, b.names[i]))
	}
}

// keep says what of rec is kept, and the names kept when not whole.
func (pj *projector) keep(b *Batch, rec []Field) (int, []bool) {
	pj.resolve(b)
	for _, id := range pj.ids {
		if _, ok := Get(b, rec, id); !ok {
			return keepWhole, nil
		}
	}
	for _, sel := range pj.sels {
		if Match(b, rec, sel) {
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
func Partial(b *Batch, i int) bool {
	return b != nil && i >= 0 && i/64 < len(b.part) && b.part[i/64]&(1<<(i%64)) != 0
}

// Projected reports whether b was read under a Projection (some of its
// records may be kept in part).
func Projected(b *Batch) bool { return b != nil && b.proj != nil }

// MarkPartial marks record i as kept in part (Partial).
func MarkPartial(b *Batch, i int) {
	for i/64 >= len(b.part) {
		b.part = append(b.part, 0)
	}
	b.part[i/64] |= 1 << (i % 64)
}
