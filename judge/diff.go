package judge

import (
	"encoding/json"
	"hash/maphash"
	"math/bits"

	"github.com/verifierd/verifierd/internal/compact"
)

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
		if s := string(x); compact.IsPlainInteger(s) {
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
	num := compact.IsPlainInteger(s)
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

// hashDiff is the general join. When every record of both reads has an
// identity field it runs a radix-partitioned hash join (partitionDiff);
// otherwise the identity index below.
func hashDiff(before, after []Record, field string, onAfter func(Record, bool), onGone func(Record)) {
	if partitionDiff(before, after, field, onAfter, onGone) {
		return
	}
	indexDiff(before, after, field, onAfter, onGone)
}

// indexDiff joins through an index of baseline identities, one probe per
// after record, then a sequential pass for the baseline records no probe
// touched. It handles records identified by their whole JSON.
func indexDiff(before, after []Record, field string, onAfter func(Record, bool), onGone func(Record)) {
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

// partitionDiff is a radix-partitioned hash join: identities are collected
// in one sequential pass per read, scattered into partitions small enough
// for the CPU cache, and each partition is built and probed there. A large
// unordered read then costs a few sequential passes instead of one cache
// miss per record. Integer identities are joined on their exact value;
// text identities on a 64-bit hash, confirmed by comparing the text. It
// reports false (having called nothing) when a record has no identity.
func partitionDiff(before, after []Record, field string, onAfter func(Record, bool), onGone func(Record)) bool {
	inBaseA, seenB, ok := partitionJoin(len(before), len(after),
		func(i int) (ordID, bool) { return ordIdentity(before[i], field) },
		func(j int) (ordID, bool) { return ordIdentity(after[j], field) })
	if !ok {
		return false
	}
	for j, r := range after {
		onAfter(r, inBaseA[j])
	}
	for i, r := range before {
		if !seenB[i] {
			onGone(r)
		}
	}
	return true
}

// partitionJoin is partitionDiff's join on any record form: idB and idA
// give the identity of baseline record i and after record j. It returns,
// per after record, whether its identity is in the baseline and, per
// baseline record, whether its identity is in the after read; ok is false
// when a record has no identity.
func partitionJoin(nb, na int, idB, idA func(int) (ordID, bool)) (inBaseA, seenB []bool, ok bool) {
	// Integer identities need no text: their keys are exact and hold no
	// pointers for the garbage collector to scan.
	bKeys, bNum, ok := integerKeys(nb, idB)
	if !ok {
		return nil, nil, false
	}
	aKeys, aNum, ok := integerKeys(na, idA)
	if !ok {
		return nil, nil, false
	}
	numeric := bNum && aNum
	var bIDs, aIDs []string
	if !numeric {
		seed := maphash.MakeSeed()
		bIDs, bKeys = textKeys(nb, idB, seed)
		aIDs, aKeys = textKeys(na, idA, seed)
	}

	// Partition count: about 8192 baseline entries per partition.
	shift := uint(0)
	if n := nb / 8192; n > 1 {
		shift = uint(bits.Len(uint(n)))
	}
	bParts, bOff := scatter(bKeys, shift)
	aParts, aOff := scatter(aKeys, shift)

	seenB = make([]bool, nb)
	inBaseA = make([]bool, na)
	var table, next []int32
	for p := 0; p+1 < len(bOff); p++ {
		bs, as := bParts[bOff[p]:bOff[p+1]], aParts[aOff[p]:aOff[p+1]]
		if len(bs) == 0 || len(as) == 0 {
			continue
		}
		size := 1 << bits.Len(uint(2*len(bs)))
		mask := uint64(size - 1)
		table = resize(table, size)
		next = resize(next, len(bs))
		same := func(b, a joinEntry) bool {
			return b.key == a.key && (numeric || bIDs[b.idx] == aIDs[a.idx])
		}
		for i, e := range bs {
			slot := slotOf(e.key) & mask
			for {
				head := table[slot]
				if head == 0 {
					table[slot] = int32(i + 1)
					break
				}
				if h := bs[head-1]; h.key == e.key && (numeric || bIDs[h.idx] == bIDs[e.idx]) {
					// Another baseline record with this identity: chain it.
					next[i] = next[head-1]
					next[head-1] = int32(i + 1)
					break
				}
				slot = (slot + 1) & mask
			}
		}
		for _, e := range as {
			slot := slotOf(e.key) & mask
			for {
				head := table[slot]
				if head == 0 {
					break
				}
				if same(bs[head-1], e) {
					inBaseA[e.idx] = true
					for c := head; c != 0; c = next[c-1] {
						seenB[bs[c-1].idx] = true
					}
					break
				}
				slot = (slot + 1) & mask
			}
		}
	}
	return inBaseA, seenB, true
}

type joinEntry struct {
	key uint64
	idx int32
}

// integerKeys returns every record's identity as an exact integer key while
// all of them are integers that fit an int64 (allNum); it stops at the first
// that is not. ok is false when a record has no identity.
func integerKeys(n int, idOf func(int) (ordID, bool)) (keys []uint64, allNum bool, ok bool) {
	keys = make([]uint64, n)
	for i := range n {
		id, has := idOf(i)
		if !has {
			return nil, false, false
		}
		if !id.num || len(id.s) > 18 {
			// Text identities: only their presence still needs checking.
			for k := i + 1; k < n; k++ {
				if _, has := idOf(k); !has {
					return nil, false, false
				}
			}
			return nil, false, true
		}
		keys[i] = uint64(parsePlainInt(id.s))
	}
	return keys, true, true
}

// textKeys returns every record's identity text and its hash.
func textKeys(n int, idOf func(int) (ordID, bool), seed maphash.Seed) ([]string, []uint64) {
	ids := make([]string, n)
	keys := make([]uint64, n)
	for i := range n {
		id, _ := idOf(i)
		ids[i] = id.s
		keys[i] = maphash.String(seed, id.s)
	}
	return ids, keys
}

// parsePlainInt parses canonical integer text of at most 18 digits.
func parsePlainInt(s string) int64 {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var n int64
	for i := 0; i < len(s); i++ {
		n = n*10 + int64(s[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

const fibMul = 0x9E3779B97F4A7C15

// partitionOf takes the top bits of a multiplicative hash; slotOf takes
// lower, independent bits for the table inside a partition.
func partitionOf(key uint64, shift uint) int {
	if shift == 0 {
		return 0
	}
	return int((key * fibMul) >> (64 - shift))
}

func slotOf(key uint64) uint64 { return ((key ^ (key >> 29)) * fibMul) >> 7 }

// scatter groups keys by partition (a counting sort), returning the entries
// and each partition's offset.
func scatter(keys []uint64, shift uint) ([]joinEntry, []int) {
	parts := 1 << shift
	off := make([]int, parts+1)
	for _, k := range keys {
		off[partitionOf(k, shift)+1]++
	}
	for p := 1; p <= parts; p++ {
		off[p] += off[p-1]
	}
	fill := append([]int(nil), off[:parts]...)
	out := make([]joinEntry, len(keys))
	for i, k := range keys {
		p := partitionOf(k, shift)
		out[fill[p]] = joinEntry{key: k, idx: int32(i)}
		fill[p]++
	}
	return out, off
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	s = s[:n]
	clear(s)
	return s
}
