package judge

import "encoding/json"

// readDiff compares a baseline with an after read by identity. It calls
// onAfter for every after record, in order, saying whether its identity is
// in the baseline, and onGone for every baseline record, in order, whose
// identity is absent from the whole after read.
//
// Reads ordered by identity (an ORDER BY id query, a sorted listing) are
// merge-joined in one sequential pass with no index; any other shape falls
// back to a hash join. Both give the same answers; the merge is attempted
// first, and reset() is called before the fallback so that callers can drop
// what the abandoned attempt reported.
func readDiff(before, after []Record, field string, reset func(), onAfter func(r Record, inBase bool), onGone func(r Record)) {
	if mergeDiff(before, after, field, onAfter, onGone) {
		return
	}
	reset()
	hashDiff(before, after, field, onAfter, onGone)
}

// mergeDiff is the merge join. It gives up (returning false) as soon as a
// record has no identity field or either read is not strictly increasing.
func mergeDiff(before, after []Record, field string, onAfter func(Record, bool), onGone func(Record)) bool {
	i, j := 0, 0
	var idB, idA, prevB, prevA ordID
	haveB, haveA := false, false
	for i < len(before) || j < len(after) {
		if i < len(before) && !haveB {
			id, ok := ordIdentity(before[i], field)
			if !ok {
				return false
			}
			idB = id
			if i > 0 && cmpOrd(idB, prevB) <= 0 {
				return false
			}
			haveB = true
		}
		if j < len(after) && !haveA {
			id, ok := ordIdentity(after[j], field)
			if !ok {
				return false
			}
			idA = id
			if j > 0 && cmpOrd(idA, prevA) <= 0 {
				return false
			}
			haveA = true
		}
		c := 0
		if i < len(before) && j < len(after) {
			c = cmpOrd(idB, idA)
		}
		switch {
		case j == len(after) || (i < len(before) && c < 0):
			onGone(before[i])
			prevB, haveB = idB, false
			i++
		case i == len(before) || c > 0:
			onAfter(after[j], false)
			prevA, haveA = idA, false
			j++
		default: // the same identity on both sides
			onAfter(after[j], true)
			prevB, haveB = idB, false
			prevA, haveA = idA, false
			i++
			j++
		}
	}
	return true
}

// ordID is an identity with its order class worked out once: integers
// (numerically, negative first) before text (bytewise).
type ordID struct {
	s        string
	num, neg bool
}

// ordIdentity is fieldIdentity with the order class, classifying integer
// text once.
func ordIdentity(r Record, field string) (ordID, bool) {
	raw, ok := r[field]
	if !ok {
		return ordID{}, false
	}
	switch x := raw.(type) {
	case string:
		return makeOrdID(x), true
	case json.Number:
		if s := string(x); isPlainInteger(s) {
			return ordID{s: s, num: true, neg: s[0] == '-'}, true
		}
	}
	text, has := Canon(raw)
	if !has {
		return ordID{}, false
	}
	return makeOrdID(text), true
}

func makeOrdID(s string) ordID {
	num := isPlainInteger(s)
	return ordID{s: s, num: num, neg: num && s[0] == '-'}
}

// cmpOrd compares two identities: -1, 0 or +1.
func cmpOrd(a, b ordID) int {
	if a.s == b.s {
		return 0
	}
	switch {
	case a.num && b.num:
		if a.neg != b.neg {
			if a.neg {
				return -1
			}
			return 1
		}
		c := 1
		if len(a.s) != len(b.s) {
			if len(a.s) < len(b.s) {
				c = -1
			}
		} else if a.s < b.s {
			c = -1
		}
		if a.neg {
			c = -c
		}
		return c
	case a.num != b.num:
		if a.num {
			return -1
		}
		return 1
	}
	if a.s < b.s {
		return -1
	}
	return 1
}

// hashDiff is the general join: an index of baseline identities, one probe
// per after record, then a sequential pass for the baseline records no
// probe touched.
func hashDiff(before, after []Record, field string, onAfter func(Record, bool), onGone func(Record)) {
	base := newIDIndex(field, len(before))
	slots := make([]int32, len(before))
	for i, r := range before {
		slots[i] = base.add(r)
	}
	for _, r := range after {
		slot, inBase := base.lookup(r)
		if inBase {
			base.seen[slot] = true
		}
		onAfter(r, inBase)
	}
	for i, r := range before {
		if !base.seen[slots[i]] {
			onGone(r)
		}
	}
}

// idIndex maps identities to slots. Records with an identity field live in
// byField; records without one are identified by their whole canonical JSON
// in byWhole, a separate namespace, so that no field value can collide with
// a whole-record identity.
type idIndex struct {
	field   string
	byField map[string]int32
	byWhole map[string]int32
	seen    []bool
}

func newIDIndex(field string, size int) *idIndex {
	return &idIndex{field: field, byField: make(map[string]int32, size), seen: make([]bool, 0, size)}
}

// key returns r's identity and whether it comes from the identity field.
func (x *idIndex) key(r Record) (string, bool) {
	if id, ok := fieldIdentity(r, x.field); ok {
		return id, true
	}
	return CanonicalJSON(r), false
}

// add indexes r and returns its slot (shared by records of one identity).
func (x *idIndex) add(r Record) int32 {
	id, byField := x.key(r)
	m := x.byField
	if !byField {
		if x.byWhole == nil {
			x.byWhole = map[string]int32{}
		}
		m = x.byWhole
	}
	if slot, ok := m[id]; ok {
		return slot
	}
	slot := int32(len(x.seen))
	m[id] = slot
	x.seen = append(x.seen, false)
	return slot
}

// lookup returns r's slot, if its identity is in the index.
func (x *idIndex) lookup(r Record) (int32, bool) {
	id, byField := x.key(r)
	if byField {
		slot, ok := x.byField[id]
		return slot, ok
	}
	if x.byWhole == nil {
		return 0, false
	}
	slot, ok := x.byWhole[id]
	return slot, ok
}
