package judge

import (
	"fmt"
	"strconv"

	"github.com/verifierd/verifierd/internal/compact"
)

// JudgeBatch is Judge on reads in compact form. It gives the same verdict
// as Judge on the same records in map form (TestJudgeBatchAgrees holds it
// to that), with the matched records turned back into maps for evidence:
// numbers in them carry their canonical text.
func JudgeBatch(c *Contract, before, after BatchSnapshot, opts Options) Verdict {
	b, a := before.Batch, after.Batch
	if b == nil {
		b = compact.NewBatch()
	}
	if a == nil {
		a = compact.NewBatch()
	}
	return judgeFrame(c, readState{before.Reachable, before.Reason, before.Code}, readState{after.Reachable, after.Reason, after.Code}, opts, func() Verdict {
		if gap := projectionGap(c, b, a); gap != "" {
			return indeterminate(ReasonReadProjected, gap+", which this contract reads; it cannot be judged from less")
		}
		if usesWriteSet(c, opts) {
			return judgeWriteSet(c, opts.WriteSet, writeSetAfterB(c, a), censusLossBeside(c, opts.Census, selectedInB(c, b)))
		}
		if usesCensus(c, opts) {
			return judgeCensusB(c, b, a, opts.Census)
		}
		switch c.Kind {
		case RecordWritten:
			return judgeRecordWrittenB(c, b, a)
		case FieldEquals:
			return judgeFieldEqualsB(c, b, a)
		case ExactNewSet:
			return judgeExactNewSetB(c, b, a)
		}
		return indeterminate("UNKNOWN_KIND", fmt.Sprintf("unknown contract kind %q", c.Kind))
	})
}

// keyFilter is the idempotency-key filter of c on one batch.
func keyFilter(c *Contract, b *Batch) func([]compact.Field) bool {
	if c.IdempotencyKey == nil {
		return func([]compact.Field) bool { return true }
	}
	p := compact.Resolve(b, sels([]Pair{keyPair(c)}))
	return func(rec []compact.Field) bool { return compact.Holds(b, rec, &p[0]) }
}

// identityTextB is identityText on a batch record.
func identityTextB(b *Batch, rec []compact.Field, name int64) string {
	if id, ok := compact.Get(b, rec, name); ok {
		return id
	}
	return compact.CanonicalFields(b, rec)
}

func identityShownB(b *Batch, rec []compact.Field, name int64, field string) shownValue {
	if id, ok := compact.Get(b, rec, name); ok {
		return shownValue{field: field, quoted: strconv.Quote(id)}
	}
	return shownValue{field: "*", quoted: strconv.Quote(compact.CanonicalFields(b, rec))}
}

// partialMatch is the verdict when a counted record was projected.
func partialMatch() Verdict {
	return indeterminate(ReasonReadProjected, "a record this contract counts was kept only in part; it cannot be judged from less")
}

// readDiffB is readDiff on batches: a merge join on reads ordered by
// identity, else a hash join.
func readDiffB(before, after *Batch, field string, reset func(), onAfter func(int, bool), onGone func(int)) {
	if mergeDiffB(before, after, field, onAfter, onGone) {
		return
	}
	reset()
	hashDiffB(before, after, field, onAfter, onGone)
}

// hashDiffB is hashDiff on batches: the radix-partitioned join when every
// record has an identity, else the identity index.
func hashDiffB(before, after *Batch, field string, onAfter func(int, bool), onGone func(int)) {
	bName, aName := compact.NameIndex(before, field), compact.NameIndex(after, field)
	id := func(b *Batch, name int64) func(int) (ordID, bool) {
		return func(i int) (ordID, bool) {
			text, ok := compact.Get(b, compact.At(b, i), name)
			if !ok {
				return ordID{}, false
			}
			return makeOrdID(text), true
		}
	}
	inBaseA, seenB, ok := partitionJoin(before.Len(), after.Len(), id(before, bName), id(after, aName))
	if !ok {
		indexDiffB(before, after, field, onAfter, onGone)
		return
	}
	for j := range after.Len() {
		onAfter(j, inBaseA[j])
	}
	for i := range before.Len() {
		if !seenB[i] {
			onGone(i)
		}
	}
}

// mergeDiffB is mergeDiff on batches. It gives up (returning false) as soon
// as a record has no identity or either read is not strictly increasing.
func mergeDiffB(before, after *Batch, field string, onAfter func(int, bool), onGone func(int)) bool {
	bName, aName := compact.NameIndex(before, field), compact.NameIndex(after, field)
	nb, na := before.Len(), after.Len()
	i, j := 0, 0
	var idB, idA, prevB, prevA ordID
	haveB, haveA := false, false
	for i < nb || j < na {
		if i < nb && !haveB {
			id, ok := compact.Get(before, compact.At(before, i), bName)
			if !ok {
				return false
			}
			idB = makeOrdID(id)
			if i > 0 && cmpOrd(idB, prevB) <= 0 {
				return false
			}
			haveB = true
		}
		if j < na && !haveA {
			id, ok := compact.Get(after, compact.At(after, j), aName)
			if !ok {
				return false
			}
			idA = makeOrdID(id)
			if j > 0 && cmpOrd(idA, prevA) <= 0 {
				return false
			}
			haveA = true
		}
		c := 0
		if i < nb && j < na {
			c = cmpOrd(idB, idA)
		}
		switch {
		case j == na || (i < nb && c < 0):
			onGone(i)
			prevB, haveB = idB, false
			i++
		case i == nb || c > 0:
			onAfter(j, false)
			prevA, haveA = idA, false
			j++
		default:
			onAfter(j, true)
			prevB, haveB = idB, false
			prevA, haveA = idA, false
			i++
			j++
		}
	}
	return true
}

// indexDiffB is indexDiff on batches: field identities and whole-record
// identities (records without the field) in separate namespaces.
func indexDiffB(before, after *Batch, field string, onAfter func(int, bool), onGone func(int)) {
	bName, aName := compact.NameIndex(before, field), compact.NameIndex(after, field)
	byField := make(map[string]int32, before.Len())
	var byWhole map[string]int32
	var seen []bool
	slots := make([]int32, before.Len())
	for i := range before.Len() {
		rec := compact.At(before, i)
		m := byField
		id, ok := compact.Get(before, rec, bName)
		if !ok {
			if byWhole == nil {
				byWhole = map[string]int32{}
			}
			m, id = byWhole, compact.CanonicalFields(before, rec)
		}
		slot, known := m[id]
		if !known {
			slot = int32(len(seen))
			m[id] = slot
			seen = append(seen, false)
		}
		slots[i] = slot
	}
	for j := range after.Len() {
		rec := compact.At(after, j)
		var slot int32
		var inBase bool
		if id, ok := compact.Get(after, rec, aName); ok {
			slot, inBase = byField[id]
		} else if byWhole != nil {
			slot, inBase = byWhole[compact.CanonicalFields(after, rec)]
		}
		if inBase {
			seen[slot] = true
		}
		onAfter(j, inBase)
	}
	for i := range before.Len() {
		if !seen[slots[i]] {
			onGone(i)
		}
	}
}

func judgeRecordWrittenB(c *Contract, before, after *Batch) Verdict {
	aScope, aID := scopeFilter(c, after), compact.NameIndex(after, c.IdentityField)
	matched := make([]int, 0, 4)
	var loss tally
	var prior existing
	take := func(j int, inBase bool) {
		rec := compact.At(after, j)
		if !aScope(rec) {
			return
		}
		if c.CountNewOnly && inBase {
			prior.noteB(after, rec, aID)
			return
		}
		matched = append(matched, j)
	}
	if c.CountNewOnly || c.ForbidCollateralLoss {
		bSel, bID := compact.Resolve(before, sels(c.Match)), compact.NameIndex(before, c.IdentityField)
		reset := func() { matched, loss, prior = matched[:0], tally{}, existing{} }
		gone := func(i int) {
			if !c.ForbidCollateralLoss {
				return
			}
			rec := compact.At(before, i)
			if compact.Match(before, rec, bSel) {
				return
			}
			loss.add(identityTextB(before, rec, bID), func() shownValue { return identityShownB(before, rec, bID, c.IdentityField) })
		}
		readDiffB(before, after, c.IdentityField, reset, take, gone)
	} else {
		for j := range after.Len() {
			take(j, false)
		}
	}
	recs, ok := compact.Records(after, matched)
	if !ok {
		return partialMatch()
	}
	return recordWrittenVerdict(c, recs, prior.changed(c, scopedIDsB(c, before)), loss, byRead)
}

func judgeFieldEqualsB(c *Contract, before, after *Batch) Verdict {
	aScope, aID := scopeFilter(c, after), compact.NameIndex(after, c.IdentityField)
	var matched []int
	var prior existing
	if c.NewOnly {
		// Only records new since the baseline are read back.
		take := func(j int, inBase bool) {
			switch rec := compact.At(after, j); {
			case !aScope(rec):
			case inBase:
				prior.noteB(after, rec, aID)
			default:
				matched = append(matched, j)
			}
		}
		reset := func() { matched, prior = matched[:0], existing{} }
		readDiffB(before, after, c.IdentityField, reset, take, func(int) {})
	} else {
		for j := range after.Len() {
			if aScope(compact.At(after, j)) {
				matched = append(matched, j)
			}
		}
	}
	recs, ok := compact.Records(after, matched)
	if !ok {
		return partialMatch()
	}
	return fieldEqualsVerdict(c, recs, prior.changed(c, scopedIDsB(c, before)))
}

func judgeExactNewSetB(c *Contract, before, after *Batch) Verdict {
	field := c.IdentityField
	aSel, bSel, bID := compact.Resolve(after, sels(c.Match)), compact.Resolve(before, sels(c.Match)), compact.NameIndex(before, field)
	added := make([]int, 0, len(c.NewRecords)+1)
	var loss tally
	var prior existing
	aID := compact.NameIndex(after, field)
	take := func(j int, inBase bool) {
		switch rec := compact.At(after, j); {
		case !compact.Match(after, rec, aSel):
		case inBase:
			prior.noteB(after, rec, aID)
		default:
			added = append(added, j)
		}
	}
	gone := func(i int) {
		if !c.ForbidCollateralLoss {
			return
		}
		rec := compact.At(before, i)
		if !compact.Match(before, rec, bSel) {
			return
		}
		loss.add(identityTextB(before, rec, bID), func() shownValue { return identityShownB(before, rec, bID, field) })
	}
	if !mergeDiffB(before, after, field, take, gone) {
		missing := 0
		for _, side := range []*Batch{before, after} {
			name := compact.NameIndex(side, field)
			for i := range side.Len() {
				if _, ok := compact.Get(side, compact.At(side, i), name); !ok {
					missing++
				}
			}
		}
		if missing > 0 {
			return identityMissing(missing, field)
		}
		added, loss, prior = added[:0], tally{}, existing{}
		hashDiffB(before, after, field, take, gone)
	}
	recs, ok := compact.Records(after, added)
	if !ok {
		return partialMatch()
	}
	return exactNewSetVerdict(c, recs, prior.changed(c, scopedIDsB(c, before)), loss, byRead)
}

// selectedInB is selectedIn on a batch.
func selectedInB(c *Contract, b *Batch) func(id string) bool {
	var set map[string]bool
	return func(id string) bool {
		if set == nil {
			set = map[string]bool{}
			sel, name := compact.Resolve(b, sels(c.Match)), compact.NameIndex(b, c.IdentityField)
			for i := range b.Len() {
				rec := compact.At(b, i)
				if got, ok := compact.Get(b, rec, name); ok && compact.Match(b, rec, sel) {
					set[got] = true
				}
			}
		}
		return set[id]
	}
}
