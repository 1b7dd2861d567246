package judge

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/compact"
)

// Decision is the three-valued verdict.
type Decision string

// Decisions. Only Confirmed ever lets an automation go on.
const (
	Confirmed     Decision = "CONFIRMED"
	Refuted       Decision = "REFUTED"
	Indeterminate Decision = "INDETERMINATE"
)

// Reason codes (docs/contracts.md §3).
const (
	ReasonSORUnreachable      = "SOR_UNREACHABLE"
	ReasonBaselineUnreachable = "BASELINE_UNREACHABLE"
	ReasonCountExact          = "COUNT_EXACT"
	ReasonCountOver           = "COUNT_OVER"
	ReasonCountUnder          = "COUNT_UNDER"
	ReasonCollateralLoss      = "COLLATERAL_LOSS"
	ReasonFieldEqual          = "FIELD_EQUAL"
	ReasonFieldNoMatch        = "FIELD_NO_MATCH"
	ReasonFieldAmbiguous      = "FIELD_AMBIGUOUS"
	ReasonFieldMismatch       = "FIELD_MISMATCH"
	ReasonIdentityMissing     = "IDENTITY_MISSING"
	ReasonSetExact            = "SET_EXACT"
	ReasonSetCardinality      = "SET_CARDINALITY"
	ReasonSetMultiplicity     = "SET_MEMBER_MULTIPLICITY"
	ReasonSetUndeclared       = "SET_UNDECLARED"
	ReasonSetScopeLoss        = "SET_SCOPE_LOSS"
	ReasonStale               = "STALE"
	// ReasonSettleInterrupted: the settle_s window was cut short (the
	// caller's context ended), so a late duplicate may have gone unseen.
	ReasonSettleInterrupted = "SETTLE_INTERRUPTED"
	// ReasonAdapterDemoted: an adapter's Verdict hook demoted the verdict.
	ReasonAdapterDemoted = "ADAPTER_DEMOTED"
	// ReasonReadMayBeTruncated: the read came back whole as far as the
	// system of record said, but may have been cut at a server's page cap
	// (a Snapshot's Code, set by the adapter).
	ReasonReadMayBeTruncated = "READ_MAY_BE_TRUNCATED"
	// ReasonReadIncomplete: the read holds fewer or more records than the
	// total the system of record declared (a Snapshot's Code).
	ReasonReadIncomplete = "READ_INCOMPLETE"
	// ReasonAccessRejected: the system of record rejected the reader's
	// credential (a Snapshot's Code, set by the adapter). Reading again
	// would not help and may lock the account, so the settlement loop
	// stops at the first such read (PollGroup); class unavailable, with a
	// RESTORE_ACCESS task.
	ReasonAccessRejected = "ACCESS_REJECTED"
)

// Snapshot is one read of a system of record: reachable with its records, or
// unreachable (with a reason for the operator).
type Snapshot struct {
	Reachable bool
	Reason    string
	// Code, for an unreachable read, is the reason code to report instead
	// of SOR_UNREACHABLE (after) or BASELINE_UNREACHABLE (before): for
	// example READ_MAY_BE_TRUNCATED or READ_INCOMPLETE, when the system
	// answered but the read is not known to hold the whole list. An after
	// read with a Code other than SOR_UNREACHABLE is INDETERMINATE, class
	// indeterminate (not unavailable), except ACCESS_REJECTED (the reader's
	// credential was rejected), class unavailable. A reachable read's Code
	// is ignored.
	Code    string
	Records []Record
}

// Freshness is the deployment's freshness setting plus the judging instant.
type Freshness struct {
	Field   string
	WindowS float64
	Now     time.Time
}

// Options are the deployment-level inputs of a judgement.
type Options struct {
	// Freshness, when set, demotes a CONFIRMED verdict whose matched records
	// are not fresh (docs/contracts.md §3.6).
	Freshness *Freshness
	// AbsenceNotProof is set for adapters whose surface can hide records (a
	// record page, a screen): their refuted verdicts class as conflicting.
	AbsenceNotProof bool
	// Census, when set, judges newness and loss over the whole collection
	// (docs/contracts.md §3a) for every contract that needs the baseline.
	Census *Census
	// WriteSet, when set, judges newness, loss and other writes from the
	// database's change log (docs/contracts.md §3b, writeset.go); it
	// takes the census's place for newness, and a census given beside it
	// adds its loss (a soft delete the log sees as an update).
	WriteSet *WriteSet
	// Arena, when set, is where a reader that takes Options (the
	// conformance harness) keeps a large read's records in compact form:
	// it returns at least size bytes of zeroed memory never handed out
	// before, or fewer (nil) to decline. A one-shot process (verifyctl
	// judge) can give memory the garbage collector never scans, in huge
	// pages. Memory it gives is never given back, so a daemon leaves it
	// nil (the Go heap).
	Arena func(size int) []byte
}

// Reason explains a verdict. Message may quote record or contract values;
// the judge remembers which field each quoted value came from, so that
// redaction can mask it.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	shown   []shownValue
}

type shownValue struct {
	field  string // record field the value belongs to; "*" for a whole record
	quoted string
}

// Verdict is the judgement of one effect.
type Verdict struct {
	Decision      Decision
	Class         Class
	Reasons       []Reason
	ObservedCount *int
	ExpectedCount *int
	ObservedValue *string
	ExpectedValue *string
	// Matched are the records the verdict is about: the counted matches of
	// record_written, the read-back record of field_equals, the added
	// records of exact_new_set.
	Matched      []Record
	ContractHash string
	// Lost are the identities (canonical text, docs/contracts.md §2) of
	// every record counted in COLLATERAL_LOSS or SET_SCOPE_LOSS, complete
	// (the message names at most 5). Internal evidence: never on the wire
	// nor in a receipt.
	Lost []string `json:"-"`
	// Changed are the identities of every record counted in
	// EXISTING_RECORD_CHANGED, complete. Internal evidence, as Lost.
	Changed []string `json:"-"`
	// Unexplained are the identities counted in UNEXPLAINED_CHANGE: every
	// identity that appeared in, vanished from or changed in the census.
	// Internal evidence, as Lost.
	Unexplained []string `json:"-"`
	// Stale is set when freshness demoted the verdict.
	Stale bool
	// Unavailable is set when the after read failed.
	Unavailable bool
}

// Codes returns the reason codes in order.
func (v *Verdict) Codes() []string {
	codes := make([]string, len(v.Reasons))
	for i, r := range v.Reasons {
		codes[i] = r.Code
	}
	return codes
}

// HasLoss reports whether a loss reason is among the reasons.
func (v *Verdict) HasLoss() bool {
	for _, r := range v.Reasons {
		if r.Code == ReasonCollateralLoss || r.Code == ReasonSetScopeLoss {
			return true
		}
	}
	return false
}

// NeedsBaseline reports whether judging c needs a readable baseline
// (docs/contracts.md §3.2). The daemon refuses to begin a session without one.
func NeedsBaseline(c *Contract) bool {
	switch c.Kind {
	case RecordWritten:
		return c.CountNewOnly || c.ForbidCollateralLoss
	case FieldEquals:
		return c.NewOnly
	case ExactNewSet:
		return true
	}
	return false
}

// Judge judges one bound contract on a baseline and an after read.
func Judge(c *Contract, before, after Snapshot, opts Options) Verdict {
	return judgeFrame(c, readOf(before), readOf(after), opts, func() Verdict {
		if usesWriteSet(c, opts) {
			return judgeWriteSet(c, opts.WriteSet, writeSetAfter(c, after), censusLossBeside(c, opts.Census, selectedIn(c, before.Records)))
		}
		if usesCensus(c, opts) {
			return judgeCensus(c, before, after, opts.Census)
		}
		switch c.Kind {
		case RecordWritten:
			return judgeRecordWritten(c, before, after)
		case FieldEquals:
			return judgeFieldEquals(c, before, after)
		case ExactNewSet:
			return judgeExactNewSet(c, before, after)
		}
		return indeterminate("UNKNOWN_KIND", fmt.Sprintf("unknown contract kind %q", c.Kind))
	})
}

// readState is what the frame reads of a snapshot in either form.
type readState struct {
	ok           bool
	reason, code string
}

func readOf(s Snapshot) readState { return readState{s.Reachable, s.Reason, s.Code} }

// judgeFrame is what every judgement shares: the reachability rules
// (docs/contracts.md §3.1-2, §3a), the kind's kernel, freshness, the expected
// value, the hash and the class.
func judgeFrame(c *Contract, before, after readState, opts Options, kernel func() Verdict) Verdict {
	var v Verdict
	switch {
	case !after.ok:
		code, msg := ReasonSORUnreachable, "the system of record could not be read after the action"
		switch after.code {
		case "", ReasonSORUnreachable:
		case ReasonAccessRejected:
			code, msg = after.code, "the system of record rejected the reader's credential after the action; it was not read again"
		default:
			code, msg = after.code, "the read after the action is not known to hold every record"
		}
		if after.reason != "" {
			msg += ": " + after.reason
		}
		v = indeterminate(code, msg)
		v.Unavailable = code == ReasonSORUnreachable || code == ReasonAccessRejected
	case NeedsBaseline(c) && !before.ok:
		code, msg := ReasonBaselineUnreachable, "the baseline read before the action failed, and this contract needs it"
		if before.code != "" && before.code != ReasonBaselineUnreachable {
			code, msg = before.code, "the baseline read before the action is not known to hold every record, and this contract needs it"
		}
		if before.reason != "" {
			msg += ": " + before.reason
		}
		v = indeterminate(code, msg)
	case usesWriteSet(c, opts) && writeSetProblem(c, opts.WriteSet) != "":
		v = indeterminate(ReasonChangesUnusable, "the write set cannot say what changed, and this contract judges by it ("+writeSetProblem(c, opts.WriteSet)+")")
	case usesCensus(c, opts) && censusProblem(c, opts.Census) != "":
		v = indeterminate(ReasonCensusUnusable, "the census cannot say which records exist, and this contract judges newness or loss by it ("+censusProblem(c, opts.Census)+")")
	default:
		v = kernel()
		if v.Decision == Confirmed && opts.Freshness != nil && len(v.Matched) > 0 {
			applyFreshness(&v, opts.Freshness)
		}
	}
	if c.Kind == FieldEquals && c.Value != nil {
		ev := *c.Value
		v.ExpectedValue = &ev
	}
	v.ContractHash = c.Hash
	v.Class = Classify(&v, opts)
	return v
}

func indeterminate(code, message string) Verdict {
	return Verdict{Decision: Indeterminate, Reasons: []Reason{{Code: code, Message: message}}}
}

// matchRecord reports whether r satisfies every pair of sel. A field that is
// missing or null matches nothing, and neither does an object or array (a
// contract's value is text).
func matchRecord(r Record, sel []Pair) bool {
	for i := range sel {
		raw, ok := r[sel[i].Field]
		if !pairHolds(raw, ok, &sel[i]) {
			return false
		}
	}
	return true
}

// keyPair is the idempotency-key filter of c as a selector pair.
func keyPair(c *Contract) Pair {
	return Pair{Field: c.KeyField, Value: *c.IdempotencyKey, As: c.KeyAs}
}

// keyMatches applies the idempotency-key filter.
func keyMatches(c *Contract, r Record) bool {
	if c.IdempotencyKey == nil {
		return true
	}
	p := keyPair(c)
	raw, ok := r[p.Field]
	return pairHolds(raw, ok, &p)
}

// fieldIdentity returns the canonical text of r's identity field, if any.
func fieldIdentity(r Record, field string) (string, bool) {
	raw, ok := r[field]
	if !ok {
		return "", false
	}
	if s, isStr := raw.(string); isStr {
		return s, true
	}
	return Canon(raw)
}

// identityText is r's identity (docs/contracts.md §2): the canonical text of
// its identity field, or the canonical JSON of the whole record.
func identityText(r Record, field string) string {
	if id, ok := fieldIdentity(r, field); ok {
		return id
	}
	return CanonicalJSON(r)
}

func identityShown(r Record, field string) shownValue {
	if id, ok := fieldIdentity(r, field); ok {
		return shownValue{field: field, quoted: strconv.Quote(id)}
	}
	return shownValue{field: "*", quoted: strconv.Quote(CanonicalJSON(r))}
}

// lossScope is what a loss was judged over, for its message.
type lossScope int

const (
	byRead lossScope = iota
	byCensus
	byWriteSet
)

func (l lossScope) where() string {
	switch l {
	case byCensus:
		return "the collection (by the census)"
	case byWriteSet:
		return "the collection (deleted, by the write set)"
	}
	return "the read"
}

// maxSamples bounds the identities a reason message lists.
const maxSamples = 5

func judgeRecordWritten(c *Contract, before, after Snapshot) Verdict {
	matched := make([]Record, 0, 4)
	var loss tally
	var prior existing
	take := func(r Record, inBase bool) {
		if !inScope(c, r) {
			return
		}
		if c.CountNewOnly && inBase {
			prior.note(c, r)
			return
		}
		matched = append(matched, r)
	}
	if c.CountNewOnly || c.ForbidCollateralLoss {
		reset := func() { matched, loss, prior = matched[:0], tally{}, existing{} }
		gone := func(r Record) {
			// Collateral loss: a pre-existing record outside the selector
			// that is absent from the whole after read.
			if !c.ForbidCollateralLoss || matchRecord(r, c.Match) {
				return
			}
			loss.add(identityText(r, c.IdentityField), func() shownValue { return identityShown(r, c.IdentityField) })
		}
		readDiff(before.Records, after.Records, c.IdentityField, reset, take, gone)
	} else {
		for _, r := range after.Records {
			take(r, false)
		}
	}
	changed := prior.changed(c, scopedIDs(c, before.Records))
	return recordWrittenVerdict(c, matched, changed, loss, byRead)
}

// recordWrittenVerdict is record_written's verdict from its counted
// matches, the existing records changed to match and its
// collateral loss (over the collection when byCensus).
func recordWrittenVerdict(c *Contract, matched []Record, changed, loss tally, by lossScope) Verdict {
	n := len(matched)
	v := Verdict{Matched: matched, ObservedCount: new(n), ExpectedCount: new(c.ExpectedCount), Lost: loss.ids, Changed: changed.ids}
	what := "matching records"
	if c.CountNewOnly {
		what = "new matching records"
	}
	switch {
	case n > c.ExpectedCount:
		v.Reasons = append(v.Reasons, Reason{Code: ReasonCountOver,
			Message: fmt.Sprintf("found %d %s, expected exactly %d", n, what, c.ExpectedCount)})
	case n < c.ExpectedCount:
		v.Reasons = append(v.Reasons, Reason{Code: ReasonCountUnder,
			Message: fmt.Sprintf("found %d %s, expected exactly %d", n, what, c.ExpectedCount)})
	}
	if changed.n > 0 {
		v.Reasons = append(v.Reasons, changedReason(changed))
	}
	if loss.n > 0 {
		v.Reasons = append(v.Reasons, lossReason(ReasonCollateralLoss,
			fmt.Sprintf("%d pre-existing record(s) outside the selector vanished from %s", loss.n, by.where()), loss.samples))
	}
	if len(v.Reasons) > 0 {
		v.Decision = Refuted
		return v
	}
	v.Decision = Confirmed
	v.Reasons = []Reason{{Code: ReasonCountExact, Message: fmt.Sprintf("found exactly %d %s", n, what)}}
	return v
}

func lossReason(code, text string, samples []shownValue) Reason {
	r := Reason{Code: code, Message: text}
	if len(samples) > 0 {
		parts := make([]string, len(samples))
		for i, s := range samples {
			parts[i] = s.quoted
		}
		r.Message += " (identities: " + strings.Join(parts, ", ") + ")"
		r.shown = samples
	}
	return r
}

func judgeFieldEquals(c *Contract, before, after Snapshot) Verdict {
	var matched []Record
	if c.NewOnly {
		// Only records new since the baseline are read back.
		var prior existing
		take := func(r Record, inBase bool) {
			switch {
			case !inScope(c, r):
			case inBase:
				prior.note(c, r)
			default:
				matched = append(matched, r)
			}
		}
		reset := func() { matched, prior = matched[:0], existing{} }
		readDiff(before.Records, after.Records, c.IdentityField, reset, take, func(Record) {})
		return fieldEqualsVerdict(c, matched, prior.changed(c, scopedIDs(c, before.Records)))
	}
	for _, r := range after.Records {
		if inScope(c, r) {
			matched = append(matched, r)
		}
	}
	return fieldEqualsVerdict(c, matched, tally{})
}

// fieldEqualsVerdict is field_equals' verdict from the matched records and
// the existing records changed to match.
func fieldEqualsVerdict(c *Contract, matched []Record, changed tally) Verdict {
	v := fieldEqualsRead(c, matched)
	if changed.n > 0 {
		if v.Decision == Confirmed {
			v.Reasons = nil
		}
		v.Decision = Refuted
		v.Reasons = append(v.Reasons, changedReason(changed))
		v.Changed = changed.ids
	}
	return v
}

// fieldEqualsRead is the read-back of the matched records.
func fieldEqualsRead(c *Contract, matched []Record) Verdict {
	n := len(matched)
	v := Verdict{Matched: matched, ObservedCount: new(n), ExpectedCount: new(1)}
	switch {
	case n == 0:
		v.Decision = Refuted
		v.Reasons = []Reason{{Code: ReasonFieldNoMatch, Message: "no record matches the selector"}}
	case n > 1:
		v.Decision = Refuted
		v.Reasons = []Reason{{Code: ReasonFieldAmbiguous,
			Message: fmt.Sprintf("%d records match the selector; a read-back needs exactly one", n)}}
	default:
		kind, text := kindOf(matched[0][c.Field])
		has := kind != compact.KindNull
		got, parses := typedText(c.ValueAs, kind, text)
		want := *c.Value
		if parses {
			text = got
		}
		if has {
			v.ObservedValue = &text
		}
		wantShown := shownValue{field: c.Field, quoted: strconv.Quote(want)}
		switch {
		case !has:
			v.Decision = Refuted
			v.Reasons = []Reason{{Code: ReasonFieldMismatch,
				Message: fmt.Sprintf("field %q has no value, expected %s", c.Field, wantShown.quoted),
				shown:   []shownValue{wantShown}}}
		case !parses:
			// The contract's side always parses (Bind refuses one that
			// does not), so the record's side is the one to name.
			gotShown := shownValue{field: c.Field, quoted: strconv.Quote(text)}
			msg := fmt.Sprintf("field %q is %s, which does not parse as %s (the record's side; the contract's value does); expected %s",
				c.Field, gotShown.quoted, c.ValueAs.what(), wantShown.quoted)
			if kind == compact.KindObject || kind == compact.KindArray {
				what := map[compact.ValueKind]string{compact.KindObject: "an object", compact.KindArray: "an array"}[kind]
				msg = fmt.Sprintf("field %q holds %s, %s, and %s never equals the contract's value %s, which is %s",
					c.Field, what, gotShown.quoted, what, wantShown.quoted, orText(c.ValueAs).what())
			}
			v.Decision = Refuted
			v.Reasons = []Reason{{Code: ReasonFieldMismatch, Message: msg, shown: []shownValue{gotShown, wantShown}}}
		case text != want:
			gotShown := shownValue{field: c.Field, quoted: strconv.Quote(text)}
			v.Decision = Refuted
			v.Reasons = []Reason{{Code: ReasonFieldMismatch,
				Message: fmt.Sprintf("field %q is %s, expected %s", c.Field, gotShown.quoted, wantShown.quoted),
				shown:   []shownValue{gotShown, wantShown}}}
		default:
			v.Decision = Confirmed
			v.Reasons = []Reason{{Code: ReasonFieldEqual,
				Message: fmt.Sprintf("field %q reads back as %s", c.Field, wantShown.quoted),
				shown:   []shownValue{wantShown}}}
		}
	}
	return v
}

func judgeExactNewSet(c *Contract, before, after Snapshot) Verdict {
	field := c.IdentityField
	added := make([]Record, 0, len(c.NewRecords)+1)
	var loss tally
	var prior existing
	reset := func() { added, loss, prior = added[:0], tally{}, existing{} }
	take := func(r Record, inBase bool) {
		switch {
		case !matchRecord(r, c.Match):
		case inBase:
			// An in-place update keeps its identity: it is not an
			// addition, and if it moved into scope it is a change.
			prior.note(c, r)
		default:
			added = append(added, r)
		}
	}
	gone := func(r Record) {
		if !c.ForbidCollateralLoss || !matchRecord(r, c.Match) {
			return
		}
		loss.add(identityText(r, field), func() shownValue { return identityShown(r, field) })
	}
	// Newness is never guessed: a record with no identity on either side
	// makes the verdict INDETERMINATE. The merge join checks every identity
	// as it goes, so the count is only needed when it gives up.
	if !mergeDiff(before.Records, after.Records, field, take, gone) {
		if missing := countMissingIdentities(before.Records, field) + countMissingIdentities(after.Records, field); missing > 0 {
			return identityMissing(missing, field)
		}
		reset()
		hashDiff(before.Records, after.Records, field, take, gone)
	}
	return exactNewSetVerdict(c, added, prior.changed(c, scopedIDs(c, before.Records)), loss, byRead)
}

// identityMissing is exact_new_set's verdict when records carry no identity.
func identityMissing(missing int, field string) Verdict {
	return indeterminate(ReasonIdentityMissing, fmt.Sprintf(
		"%d record(s) carry no %q value, so added records cannot be told from existing ones", missing, field))
}

// exactNewSetVerdict is exact_new_set's verdict from the added records, the
// existing records changed into scope and the scope loss
// (over the collection when byCensus).
func exactNewSetVerdict(c *Contract, added []Record, changed, loss tally, by lossScope) Verdict {
	field := c.IdentityField
	n := len(added)
	v := Verdict{Matched: added, ObservedCount: new(n), ExpectedCount: new(c.ExpectedCount), Lost: loss.ids, Changed: changed.ids}
	if n != c.ExpectedCount {
		v.Reasons = append(v.Reasons, Reason{Code: ReasonSetCardinality,
			Message: fmt.Sprintf("%d record(s) were added in scope, expected exactly %d", n, c.ExpectedCount)})
	}

	// Group identical members; one added record may satisfy several members.
	type group struct {
		sel      []Pair
		declared int
		added    int
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, sel := range c.NewRecords {
		k := selectorKey(sel)
		g := byKey[k]
		if g == nil {
			g = &group{sel: sel}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.declared++
	}
	var undeclared []Record
	for _, r := range added {
		named := false
		for _, g := range groups {
			if matchRecord(r, g.sel) {
				g.added++
				named = true
			}
		}
		if !named {
			undeclared = append(undeclared, r)
		}
	}
	var off []string
	var offShown []shownValue
	for _, g := range groups {
		if g.added != g.declared {
			off = append(off, fmt.Sprintf("member %s declared %d time(s), added %d", describeSelector(g.sel, &offShown), g.declared, g.added))
		}
	}
	if len(off) > 0 {
		v.Reasons = append(v.Reasons, Reason{Code: ReasonSetMultiplicity, Message: strings.Join(off, "; "), shown: offShown})
	}
	if len(undeclared) > 0 {
		samples := make([]shownValue, 0, maxSamples)
		for _, r := range undeclared {
			if len(samples) == maxSamples {
				break
			}
			samples = append(samples, identityShown(r, field))
		}
		v.Reasons = append(v.Reasons, lossReason(ReasonSetUndeclared,
			fmt.Sprintf("%d added record(s) match no declared member", len(undeclared)), samples))
	}
	if changed.n > 0 {
		v.Reasons = append(v.Reasons, changedReason(changed))
	}
	if loss.n > 0 {
		msg := fmt.Sprintf("%d pre-existing record(s) in scope vanished from %s", loss.n, by.where())
		if by == byCensus {
			msg = fmt.Sprintf("%d pre-existing record(s) vanished from %s", loss.n, by.where())
		}
		v.Reasons = append(v.Reasons, lossReason(ReasonSetScopeLoss, msg, loss.samples))
	}
	if len(v.Reasons) > 0 {
		v.Decision = Refuted
		return v
	}
	v.Decision = Confirmed
	v.Reasons = []Reason{{Code: ReasonSetExact, Message: fmt.Sprintf("exactly the %d declared record(s) were added, nothing else", n)}}
	return v
}

func countMissingIdentities(recs []Record, field string) int {
	n := 0
	for _, r := range recs {
		if _, ok := fieldIdentity(r, field); !ok {
			n++
		}
	}
	return n
}

func describeSelector(sel []Pair, shown *[]shownValue) string {
	parts := make([]string, len(sel))
	for i, p := range sel {
		q := strconv.Quote(p.Value)
		*shown = append(*shown, shownValue{field: p.Field, quoted: q})
		parts[i] = strconv.Quote(p.Field) + ": " + q
		if p.As != "" {
			parts[i] += " as " + string(p.As)
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
