package judge

import (
	"fmt"
	"strconv"

	"github.com/verifierd/verifierd/internal/compact"
)

// The changed-existing-record rule (docs/contracts.md §3a). A matched,
// in-scope after record whose identity existed before the action — in the
// baseline, or in the before census — but which was not in scope in the
// baseline (absent from it, or there with other values: re-assigned,
// re-pointed, edited into scope) is never new, and its contract's verdict
// is REFUTED, class conflicting, whatever the count.

// inScope reports whether r is in c's scope: its selector matches and,
// where the contract has one (not exact_new_set), its idempotency key.
func inScope(c *Contract, r Record) bool {
	return matchRecord(r, c.Match) && (c.Kind == ExactNewSet || keyMatches(c, r))
}

// scopeFilter is inScope on one batch.
func scopeFilter(c *Contract, b *Batch) func([]compact.Field) bool {
	sel, key := compact.Resolve(b, sels(c.Match)), keyFilter(c, b)
	if c.Kind == ExactNewSet {
		return func(rec []compact.Field) bool { return compact.Match(b, rec, sel) }
	}
	return func(rec []compact.Field) bool { return compact.Match(b, rec, sel) && key(rec) }
}

// scopeIsEverything reports whether every record is in c's scope (an empty
// selector and no key), so that no existing record can change into it.
func scopeIsEverything(c *Contract) bool {
	return len(c.Match) == 0 && (c.Kind == ExactNewSet || c.IdempotencyKey == nil)
}

// existing collects, without a census, the in-scope after records whose
// identity is in the baseline: each is an existing record, changed to
// match unless its baseline record was in scope already. Which is decided
// after the join (changed), by one pass over the baseline.
type existing struct {
	ids []string
}

// note records an in-scope after record found in the baseline. A record
// identified by its whole JSON has the same values on both sides, so it
// was in scope before as it is now: only field identities are kept.
func (e *existing) note(c *Contract, r Record) {
	if id, ok := fieldIdentity(r, c.IdentityField); ok {
		e.ids = append(e.ids, id)
	}
}

// noteB is note on a batch record; name is the identity field's index.
func (e *existing) noteB(b *Batch, rec []compact.Field, name int64) {
	if id, ok := compact.Get(b, rec, name); ok {
		e.ids = append(e.ids, id)
	}
}

// changed is the tally of the noted identities whose baseline records
// were all out of scope; scoped yields the identity of every in-scope
// baseline record.
func (e *existing) changed(c *Contract, scoped func(yield func(string) bool)) tally {
	var t tally
	if len(e.ids) == 0 || scopeIsEverything(c) {
		return t
	}
	out := make(map[string]bool, len(e.ids))
	for _, id := range e.ids {
		out[id] = true
	}
	for id := range scoped {
		delete(out, id)
	}
	for _, id := range e.ids {
		if out[id] {
			t.add(id, func() shownValue { return shownValue{field: c.IdentityField, quoted: strconv.Quote(id)} })
		}
	}
	return t
}

// scopedIDs yields the field identity of every in-scope baseline record.
func scopedIDs(c *Contract, before []Record) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, r := range before {
			if !inScope(c, r) {
				continue
			}
			if id, ok := fieldIdentity(r, c.IdentityField); ok && !yield(id) {
				return
			}
		}
	}
}

// scopedIDsB is scopedIDs on a batch.
func scopedIDsB(c *Contract, before *Batch) func(func(string) bool) {
	return func(yield func(string) bool) {
		scope, name := scopeFilter(c, before), compact.NameIndex(before, c.IdentityField)
		for i := range before.Len() {
			rec := compact.At(before, i)
			if !scope(rec) {
				continue
			}
			if id, ok := compact.Get(before, rec, name); ok && !yield(id) {
				return
			}
		}
	}
}

// baseMark is what the baseline says of one identity: whether a record of
// it matched the contract's selector (record_written's loss excuse) and
// whether one was in scope (selector and key).
type baseMark struct{ selected, inScope bool }

// censusOutcome sorts the in-scope after records of a newness claim with
// a census: new (in neither the baseline nor the before census), changed
// (in either, but not in scope in the baseline), or in scope already.
type censusOutcome struct {
	sets    *censusSets
	changed tally
}

// isNew classifies one in-scope after record by its identity; mark and
// inBase are what the baseline holds of it. A record of the baseline is
// never new, even if the before census missed it.
func (o *censusOutcome) isNew(id string, mark baseMark, inBase bool) bool {
	switch {
	case inBase && mark.inScope:
		return false
	case !inBase && !o.sets.existed(id):
		return true
	}
	o.changed.add(id, func() shownValue { return shownValue{field: o.sets.field, quoted: strconv.Quote(id)} })
	return false
}

// changedReason is EXISTING_RECORD_CHANGED for t.
func changedReason(t tally) Reason {
	return lossReason(ReasonExistingRecordChanged, fmt.Sprintf(
		"%d matched record(s) existed before the action without matching the selector (re-assigned, re-pointed or edited into scope): an existing record was changed to match, which is not a new record", t.n), t.samples)
}
