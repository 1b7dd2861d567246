package judge

import (
	"fmt"
	"github.com/verifierd/verifierd/internal/compact"
	"strconv"
	"strings"
)

// The write set (docs/contracts.md §3b): every committed row change to the
// candidate's tables between Begin and Verify, from the database's own
// change log. When it is given it replaces the census and the baseline diff
// for newness and loss: per identity the changes fold into a net change
// (the first before image, the last after image), and the net changes say
// what was created, changed, deleted, and what else was written. The reads
// still give a plain record_written its count and field_equals its values.

// Reason codes of the write set.
const (
	// ReasonChangesUnusable: the write set could not be read, is not
	// known to be complete, or holds a change the judge cannot fold (an
	// image without the identity field, an op whose images do not fit
	// it); or the contract forbids other writes and no write set was read.
	ReasonChangesUnusable = "CHANGES_UNUSABLE"
	// ReasonOtherWrite: forbid_other_writes, and the write set holds a net
	// change the claim does not make.
	ReasonOtherWrite = "OTHER_WRITE"
	// ReasonTransientWrite: an identity inserted and deleted inside the
	// window (no net change). Informational: it never refutes alone.
	ReasonTransientWrite = "TRANSIENT_WRITE"
)

// The ops of a Change.
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
)

// WriteSet is the write set of one verification: reachable, complete
// (the log covered the whole window) and its changes in commit order.
type WriteSet struct {
	Reachable bool
	Complete  bool
	// Reason says why an unreachable or incomplete write set is so.
	Reason  string
	Changes []Change
}

// Change is one committed row change: insert (After only), update (both
// images) or delete (Before only), in Table. Each image is a record that
// carries the contract's identity field.
type Change struct {
	Op            string
	Table         string
	Before, After Record
}

// usesWriteSet reports whether judging c reads the write set: every
// contract that needs the baseline when one is given, and every contract
// that forbids other writes (which without one cannot be judged).
func usesWriteSet(c *Contract, opts Options) bool {
	return c.ForbidOtherWrites || (opts.WriteSet != nil && NeedsBaseline(c))
}

// writeSetProblem is why ws cannot serve c, or "".
func writeSetProblem(c *Contract, ws *WriteSet) string {
	switch {
	case ws == nil:
		return "this contract forbids other writes, and no write set was read"
	case !ws.Reachable:
		return joinReason("the write set could not be read", ws.Reason)
	case !ws.Complete:
		return joinReason("the write set is not known to hold every change of the window", ws.Reason)
	}
	for i, ch := range ws.Changes {
		if msg := changeProblem(ch, c.IdentityField); msg != "" {
			return fmt.Sprintf("change %d (%s of %s): %s", i, ch.Op, ch.Table, msg)
		}
	}
	return ""
}

func joinReason(text, reason string) string {
	if reason != "" {
		return text + ": " + reason
	}
	return text
}

// changeProblem checks that ch's images fit its op and carry field.
func changeProblem(ch Change, field string) string {
	want := map[string][2]bool{OpInsert: {false, true}, OpUpdate: {true, true}, OpDelete: {true, false}}
	shape, ok := want[ch.Op]
	if !ok {
		return fmt.Sprintf("op %q is not insert, update or delete", ch.Op)
	}
	for k, img := range []Record{ch.Before, ch.After} {
		side := [2]string{"before", "after"}[k]
		switch {
		case img == nil && shape[k]:
			return fmt.Sprintf("an %s needs its %s image (an object)", ch.Op, side)
		case img != nil && !shape[k]:
			return fmt.Sprintf("an %s has no %s image; write null", ch.Op, side)
		case img != nil:
			if _, ok := fieldIdentity(img, field); !ok {
				return fmt.Sprintf("its %s image carries no %q value", side, field)
			}
		}
	}
	return ""
}

// netChange is one identity's changes folded: the first before image (nil
// when it was inserted) and the last after image (nil when it was deleted).
type netChange struct {
	table, id     string
	before, after Record
}

// op is the net change as an op.
func (n *netChange) op() string {
	switch {
	case n.before == nil:
		return OpInsert
	case n.after == nil:
		return OpDelete
	}
	return OpUpdate
}

// foldChanges folds a usable write set into net changes per table and
// identity, in order of first change, and tallies the identities with no
// net change because they were inserted and deleted inside the window. An
// update that changes the identity folds as a delete and an insert; an
// update that ends as it began is no change.
func foldChanges(ws *WriteSet, field string) (nets []*netChange, transient tally) {
	byKey := map[string]*netChange{}
	touch := func(table string, img Record, before, after Record) {
		id, _ := fieldIdentity(img, field)
		key := table + "\x00" + id
		n := byKey[key]
		if n == nil {
			n = &netChange{table: table, id: id, before: before}
			byKey[key] = n
			nets = append(nets, n)
		}
		n.after = after
	}
	for _, ch := range ws.Changes {
		if ch.Op == OpUpdate && identityText(ch.Before, field) != identityText(ch.After, field) {
			touch(ch.Table, ch.Before, ch.Before, nil)
			touch(ch.Table, ch.After, nil, ch.After)
			continue
		}
		img := ch.After
		if img == nil {
			img = ch.Before
		}
		touch(ch.Table, img, ch.Before, ch.After)
	}
	out := nets[:0]
	for _, n := range nets {
		switch {
		case n.before == nil && n.after == nil:
			transient.add(n.id, func() shownValue { return shownValue{field: field, quoted: strconv.Quote(n.id)} })
		case n.before != nil && n.after != nil && CanonicalJSON(n.before) == CanonicalJSON(n.after):
		default:
			out = append(out, n)
		}
	}
	return out, transient
}

// writeSetOutcome is what the net changes say of a contract.
type writeSetOutcome struct {
	created               []Record        // in scope, inserted
	createdIDs            map[string]bool // their identities
	changed, loss, others tally
	// otherText describes the sampled others: op, identity, table.
	otherText []string
	all       tally // every net change (UNEXPLAINED_CHANGE)
}

// sortChanges sorts the net changes for c.
func sortChanges(c *Contract, nets []*netChange) *writeSetOutcome {
	o := &writeSetOutcome{createdIDs: map[string]bool{}}
	field := c.IdentityField
	for _, n := range nets {
		shown := func() shownValue { return shownValue{field: field, quoted: strconv.Quote(n.id)} }
		o.all.add(n.id, shown)
		switch n.op() {
		case OpInsert:
			if inScope(c, n.after) {
				o.created = append(o.created, n.after)
				o.createdIDs[n.id] = true
				continue
			}
		case OpDelete:
			selected := matchRecord(n.before, c.Match)
			if c.Kind == RecordWritten && selected {
				continue // the contract's own record: it may claim its removal
			}
			if c.ForbidCollateralLoss && (c.Kind == RecordWritten || selected) {
				o.loss.add(n.id, shown)
			}
		default:
			if claimsNewness(c) && inScope(c, n.after) && !inScope(c, n.before) {
				o.changed.add(n.id, shown)
			}
		}
		if len(o.otherText) < maxSamples {
			o.otherText = append(o.otherText, n.op()+" of "+strconv.Quote(n.id)+" in "+n.table)
		}
		o.others.add(n.id, shown)
	}
	return o
}

// afterRecords lists the in-scope records of the after read whose identity
// keep accepts; ok is false when one was kept only in part.
type afterRecords func(keep func(id string, has bool) bool) (recs []Record, ok bool)

// judgeWriteSet judges c on a usable write set; censusLoss, when the
// candidate also reads a census, is the census's loss (censusLossBeside),
// counted beside the write set's.
func judgeWriteSet(c *Contract, ws *WriteSet, after afterRecords, censusLoss *tally) Verdict {
	nets, transient := foldChanges(ws, c.IdentityField)
	o := sortChanges(c, nets)
	if censusLoss != nil {
		o.loss = mergeLoss(o.loss, *censusLoss, c.IdentityField)
	}
	var v Verdict
	switch c.Kind {
	case RecordWritten:
		matched := o.created
		if !c.CountNewOnly {
			recs, ok := after(func(string, bool) bool { return true })
			if !ok {
				return partialMatch()
			}
			matched = recs
		}
		v = recordWrittenVerdict(c, matched, o.changed, o.loss, byWriteSet)
	case FieldEquals:
		recs, ok := after(func(id string, has bool) bool { return has && o.createdIDs[id] })
		if !ok {
			return partialMatch()
		}
		v = fieldEqualsVerdict(c, recs, o.changed)
	default:
		v = exactNewSetVerdict(c, o.created, o.changed, o.loss, byWriteSet)
	}
	if c.ForbidOtherWrites && o.others.n > 0 {
		v = withOtherWrites(v, o.others, o.otherText)
	}
	v = withUnexplained(v, "write set", func() tally { return o.all })
	if transient.n > 0 {
		v.Reasons = append(v.Reasons, lossReason(ReasonTransientWrite, fmt.Sprintf(
			"%d record(s) were inserted and deleted inside the window (no net change; informational)", transient.n), transient.samples))
	}
	return v
}

// censusLossBeside is the loss a census sees beside a write set (nil
// without a census): the identities of the collection, as the census
// defines it, that left it. The write set sees a soft delete (an update
// setting deleted_at) as an update of a record still in its table; a
// census that reads only live records sees it leave. selected reports the
// identities whose baseline record the contract's selector matched.
func censusLossBeside(c *Contract, cs *Census, selected func(id string) bool) *tally {
	if cs == nil || !NeedsBaseline(c) {
		return nil
	}
	t := newCensusSets(c, cs).loss(c, selected)
	return &t
}

// mergeLoss adds to loss the identities of more it does not hold.
func mergeLoss(loss, more tally, field string) tally {
	seen := make(map[string]bool, len(loss.ids))
	for _, id := range loss.ids {
		seen[id] = true
	}
	for _, id := range more.ids {
		if !seen[id] {
			seen[id] = true
			loss.add(id, func() shownValue { return shownValue{field: field, quoted: strconv.Quote(id)} })
		}
	}
	return loss
}

// selectedIn reports the identities whose record in recs c's selector
// matches (the baseline's, for the census's loss).
func selectedIn(c *Contract, recs []Record) func(id string) bool {
	var set map[string]bool
	return func(id string) bool {
		if set == nil {
			set = map[string]bool{}
			for _, r := range recs {
				if got, ok := fieldIdentity(r, c.IdentityField); ok && matchRecord(r, c.Match) {
					set[got] = true
				}
			}
		}
		return set[id]
	}
}

// withOtherWrites refutes v with OTHER_WRITE; text describes the samples.
func withOtherWrites(v Verdict, others tally, text []string) Verdict {
	if v.Decision == Confirmed {
		v.Reasons = nil
	}
	v.Decision = Refuted
	v.Reasons = append(v.Reasons, Reason{Code: ReasonOtherWrite, shown: others.samples, Message: fmt.Sprintf(
		"%d other net change(s) in the write set that the claim does not make (%s)", others.n, strings.Join(text, ", "))})
	return v
}

// writeSetAfter is afterRecords on a map-form read.
func writeSetAfter(c *Contract, after Snapshot) afterRecords {
	return func(keep func(string, bool) bool) ([]Record, bool) {
		var out []Record
		for _, r := range after.Records {
			if !inScope(c, r) {
				continue
			}
			if id, has := fieldIdentity(r, c.IdentityField); keep(id, has) {
				out = append(out, r)
			}
		}
		return out, true
	}
}

// writeSetAfterB is afterRecords on a batch.
func writeSetAfterB(c *Contract, after *Batch) afterRecords {
	return func(keep func(string, bool) bool) ([]Record, bool) {
		scope, name := scopeFilter(c, after), compact.NameIndex(after, c.IdentityField)
		var idx []int
		for j := range after.Len() {
			rec := compact.At(after, j)
			if !scope(rec) {
				continue
			}
			if id, has := compact.Get(after, rec, name); keep(id, has) {
				idx = append(idx, j)
			}
		}
		return compact.Records(after, idx)
	}
}
