package compact

// BPair is a selector pair with its field resolved to a batch's name index
// (-1 when no record of the batch has the field: the pair matches nothing).
type BPair struct {
	name  int64
	value string
	as    string
}

// Sel is one pair of a contract's selector: a field, the canonical text
// its value must have, and the comparison type (TypedText; "" is text).
type Sel struct {
	Field string
	Value string
	As    string
}

// Resolve resolves sel's fields to b's name indexes.
func Resolve(b *Batch, sel []Sel) []BPair {
	out := make([]BPair, len(sel))
	for i, p := range sel {
		out[i] = BPair{name: NameIndex(b, p.Field), value: p.Value, as: p.As}
	}
	return out
}

// Match reports whether rec satisfies every pair of sel.
func Match(b *Batch, rec []Field, sel []BPair) bool {
	for i := range sel {
		if !Holds(b, rec, &sel[i]) {
			return false
		}
	}
	return true
}

// Holds reports whether rec satisfies one pair: as pairHolds does on a
// map-form record.
func Holds(b *Batch, rec []Field, p *BPair) bool {
	if p.name < 0 {
		return false
	}
	n := uint32(p.name)
	for i := range rec {
		if f := &rec[i]; f.Name == n {
			switch f.Kind {
			case KindNull, KindObject, KindArray:
				return false
			}
			if p.as == "" {
				return Text(b, f) == p.value
			}
			got, ok := TypedText(p.as, f.Kind, Text(b, f))
			return ok && got == p.value
		}
	}
	return false
}

// Records returns the records idx in map form, or false when one of them
// was projected (its read kept only part of it): a verdict is never given
// on, or shows, less than the whole record.
func Records(b *Batch, idx []int) ([]Record, bool) {
	out := make([]Record, len(idx))
	for i, k := range idx {
		if Partial(b, k) {
			return nil, false
		}
		out[i] = b.Record(k)
	}
	return out, true
}
