package judge

import (
	"fmt"
	"github.com/verifierd/verifierd/internal/compact"
	"strconv"
)

// Census is the whole-collection identity reads of docs/contracts.md §3a: a read of
// every record of the collection (carrying the contract's identity field),
// taken with the baseline (Before) and with each after read (After). With
// a census, newness and loss are judged over the whole collection instead
// of over a read narrowed to the run's subject.
type Census struct{ Before, After Snapshot }

// Reason codes of the census (docs/contracts.md §3a).
const (
	// ReasonCensusUnusable: a census read failed, or holds a record
	// without the identity field, so it cannot say what exists.
	ReasonCensusUnusable = "CENSUS_UNUSABLE"
	// ReasonExistingRecordChanged: a matched record existed before the
	// action (in the baseline or the before census) without matching the
	// selector: an existing record was changed to match, which is not a
	// new record (changed.go).
	ReasonExistingRecordChanged = "EXISTING_RECORD_CHANGED"
)

// CensusUsable reports whether s can serve as a census for c (reachable,
// every record carries c's identity field); reason says why not.
func CensusUsable(c *Contract, s Snapshot) (ok bool, reason string) {
	if !s.Reachable {
		reason = "the census read failed"
		if s.Code != "" {
			reason += " (" + s.Code + ")"
		}
		if s.Reason != "" {
			reason += ": " + s.Reason
		}
		return false, reason
	}
	for i, r := range s.Records {
		if _, ok := fieldIdentity(r, c.IdentityField); !ok {
			return false, fmt.Sprintf("census record %d carries no %q value", i, c.IdentityField)
		}
	}
	return true, ""
}

// usesCensus reports whether judging c reads the census when there is
// one: every contract that needs the baseline does (newness or loss).
func usesCensus(c *Contract, opts Options) bool {
	return opts.Census != nil && NeedsBaseline(c)
}

// censusProblem is the reason a census cannot be used for c, or "".
func censusProblem(c *Contract, cs *Census) string {
	if ok, why := CensusUsable(c, cs.Before); !ok {
		return "before census: " + why
	}
	if ok, why := CensusUsable(c, cs.After); !ok {
		return "after census: " + why
	}
	return ""
}

// claimsNewness reports whether c counts or judges only new records.
func claimsNewness(c *Contract) bool {
	return c.CountNewOnly || c.NewOnly || c.Kind == ExactNewSet
}

// tally counts the records a reason is about: every identity (the
// verdict's structured list) and a few samples for the message.
type tally struct {
	n       int
	ids     []string
	samples []shownValue
}

// add counts the record identified by id; s gives its sample for the
// message, asked only while samples are short.
func (t *tally) add(id string, s func() shownValue) {
	t.n++
	t.ids = append(t.ids, id)
	if len(t.samples) < maxSamples {
		t.samples = append(t.samples, s())
	}
}

// censusSets are the identity sets of a usable census.
type censusSets struct {
	before, after map[string]struct{}
	cs            *Census
	field         string
}

func newCensusSets(c *Contract, cs *Census) *censusSets {
	set := func(recs []Record) map[string]struct{} {
		m := make(map[string]struct{}, len(recs))
		for _, r := range recs {
			if id, ok := fieldIdentity(r, c.IdentityField); ok {
				m[id] = struct{}{}
			}
		}
		return m
	}
	return &censusSets{before: set(cs.Before.Records), after: set(cs.After.Records), cs: cs, field: c.IdentityField}
}

// existed reports whether id was in the collection before the action.
func (s *censusSets) existed(id string) bool {
	_, ok := s.before[id]
	return ok
}

// loss counts the identities of the before census absent from the after
// census. For record_written a record the contract's own selector matched
// in the baseline (selected reports it) is not collateral: a contract may
// claim its removal. For exact_new_set every vanished identity counts:
// the action claims to add its set and nothing else.
func (s *censusSets) loss(c *Contract, selected func(id string) bool) tally {
	var t tally
	if !c.ForbidCollateralLoss || c.Kind == FieldEquals {
		return t
	}
	seen := make(map[string]struct{})
	for _, r := range s.cs.Before.Records {
		id, _ := fieldIdentity(r, s.field)
		if _, gone := s.after[id]; !gone {
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
			if excusesSelected(c) && selected(id) {
				continue
			}
			t.add(id, func() shownValue { return shownValue{field: s.field, quoted: strconv.Quote(id)} })
		}
	}
	return t
}

// excusesSelected reports whether c's loss rule excuses identities whose
// baseline record its selector matched (record_written's collateral loss).
func excusesSelected(c *Contract) bool {
	return c.Kind == RecordWritten && c.ForbidCollateralLoss
}

// missingIdentity is the verdict when a record whose newness the census
// must judge has no identity.
func missingIdentity(field string) Verdict {
	return indeterminate(ReasonIdentityMissing, fmt.Sprintf(
		"a matched record carries no %q value, so the census cannot tell whether it is new", field))
}

// censusVerdict is the kind's verdict from what the census rules found,
// with UNEXPLAINED_CHANGE when it would say nothing landed while the
// census saw the collection change (unexplained.go).
func censusVerdict(c *Contract, cs *Census, matched []Record, changed, loss tally) Verdict {
	var v Verdict
	switch c.Kind {
	case RecordWritten:
		v = recordWrittenVerdict(c, matched, changed, loss, byCensus)
	case FieldEquals:
		v = fieldEqualsVerdict(c, matched, changed)
	default:
		v = exactNewSetVerdict(c, matched, changed, loss, byCensus)
	}
	return withUnexplained(v, "census", func() tally { return unexplainedChange(c, cs) })
}

// judgeCensus judges c on map-form reads with a usable census.
func judgeCensus(c *Contract, before, after Snapshot, cs *Census) Verdict {
	field := c.IdentityField
	if c.Kind == ExactNewSet {
		if missing := countMissingIdentities(before.Records, field) + countMissingIdentities(after.Records, field); missing > 0 {
			return identityMissing(missing, field)
		}
	}
	sets := newCensusSets(c, cs)
	// Baseline identities: whether the selector matched a record of each,
	// and whether one was in scope.
	base := make(map[string]baseMark, len(before.Records))
	for _, r := range before.Records {
		if id, ok := fieldIdentity(r, field); ok {
			m := base[id]
			base[id] = baseMark{selected: m.selected || matchRecord(r, c.Match), inScope: m.inScope || inScope(c, r)}
		}
	}
	out := censusOutcome{sets: sets}
	var matched []Record
	for _, r := range after.Records {
		if !inScope(c, r) {
			continue
		}
		if !claimsNewness(c) {
			matched = append(matched, r)
			continue
		}
		id, ok := fieldIdentity(r, field)
		if !ok {
			return missingIdentity(field)
		}
		mark, inBase := base[id]
		if out.isNew(id, mark, inBase) {
			matched = append(matched, r)
		}
	}
	loss := sets.loss(c, func(id string) bool { return base[id].selected })
	return censusVerdict(c, cs, matched, out.changed, loss)
}

// judgeCensusB is judgeCensus on reads in compact form.
func judgeCensusB(c *Contract, before, after *Batch, cs *Census) Verdict {
	field := c.IdentityField
	bID, aID := compact.NameIndex(before, field), compact.NameIndex(after, field)
	if c.Kind == ExactNewSet {
		missing := 0
		for _, side := range []struct {
			b    *Batch
			name int64
		}{{before, bID}, {after, aID}} {
			for i := range side.b.Len() {
				if _, ok := compact.Get(side.b, compact.At(side.b, i), side.name); !ok {
					missing++
				}
			}
		}
		if missing > 0 {
			return identityMissing(missing, field)
		}
	}
	sets := newCensusSets(c, cs)
	bSel, bScope := compact.Resolve(before, sels(c.Match)), scopeFilter(c, before)
	base := make(map[string]baseMark, before.Len())
	for i := range before.Len() {
		rec := compact.At(before, i)
		if id, ok := compact.Get(before, rec, bID); ok {
			m := base[id]
			base[id] = baseMark{selected: m.selected || compact.Match(before, rec, bSel), inScope: m.inScope || bScope(rec)}
		}
	}
	aScope := scopeFilter(c, after)
	out := censusOutcome{sets: sets}
	var matched []int
	for j := range after.Len() {
		rec := compact.At(after, j)
		if !aScope(rec) {
			continue
		}
		if !claimsNewness(c) {
			matched = append(matched, j)
			continue
		}
		id, ok := compact.Get(after, rec, aID)
		if !ok {
			return missingIdentity(field)
		}
		mark, inBase := base[id]
		if out.isNew(id, mark, inBase) {
			matched = append(matched, j)
		}
	}
	recs, ok := compact.Records(after, matched)
	if !ok {
		return partialMatch()
	}
	loss := sets.loss(c, func(id string) bool { return base[id].selected })
	return censusVerdict(c, cs, recs, out.changed, loss)
}
