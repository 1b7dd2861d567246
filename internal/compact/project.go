package compact

import "slices"

// Projection says which parts of a read's records are kept (the judge
// builds it from the contracts that will judge the read: judge.Projection).
// A record without a value for one of IDs is kept whole. Of an after read
// (After), a record matching one of Sels is kept whole; of a baseline, a
// record matching one keeps IDs and SelFields. Any other record keeps its
// IDs only.
type Projection struct {
	After     bool
	IDs       []string
	Sels      [][]Sel
	SelFields []string
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
	names int     // len(b.Names) when ids and sels were resolved
	ids   []int64 // p.ids resolved
	sels  [][]BPair
	// Per name index: kept by keepIdentity, kept by keepSelected.
	idName, selName []bool
}

func (pj *projector) resolve(b *Batch) {
	if pj.names == len(b.Names) && pj.ids != nil {
		return
	}
	pj.names = len(b.Names)
	pj.ids = pj.ids[:0]
	for _, f := range pj.p.IDs {
		pj.ids = append(pj.ids, NameIndex(b, f))
	}
	if pj.ids == nil {
		pj.ids = []int64{}
	}
	pj.sels = pj.sels[:0]
	for _, sel := range pj.p.Sels {
		pj.sels = append(pj.sels, Resolve(b, sel))
	}
	for i := len(pj.idName); i < len(b.Names); i++ {
		id := slices.Contains(pj.p.IDs, b.Names[i])
		pj.idName = append(pj.idName, id)
		pj.selName = append(pj.selName, id || slices.Contains(pj.p.SelFields, b.Names[i]))
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
			if pj.p.After {
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
