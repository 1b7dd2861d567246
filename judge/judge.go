package judge

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Decision is the three-valued verdict.
type Decision string

// Decisions. Only Confirmed ever lets an automation go on.
const (
	Confirmed     Decision = "CONFIRMED"
	Refuted       Decision = "REFUTED"
	Indeterminate Decision = "INDETERMINATE"
)

// Reason codes (JUDGE.md §3).
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
)

// Snapshot is one read of a system of record: reachable with its records, or
// unreachable (with a reason for the operator).
type Snapshot struct {
	Reachable bool
	Reason    string
	Records   []Record
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
	// are not fresh (JUDGE.md §3.6).
	Freshness *Freshness
	// AbsenceNotProof is set for adapters whose surface can hide records (a
	// record page, a screen): their refuted verdicts class as conflicting.
	AbsenceNotProof bool
	// Census, when set, is the deployment candidate's census read before
	// and after the action (JUDGE.md §3a).
	Census *Census
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
// (JUDGE.md §3.2). The daemon refuses to begin a session without one.
func NeedsBaseline(c *Contract) bool {
	switch c.Kind {
	case RecordWritten:
		return c.CountNewOnly || c.ForbidCollateralLoss
	case ExactNewSet:
		return true
	}
	return false
}

// Judge judges one bound contract on a baseline and an after read.
func Judge(c *Contract, before, after Snapshot, opts Options) Verdict {
	return judgeFrame(c, before.Reachable, before.Reason, after.Reachable, after.Reason, opts, func() Verdict {
		switch c.Kind {
		case RecordWritten:
			return judgeRecordWritten(c, before, after)
		case FieldEquals:
			return judgeFieldEquals(c, after)
		case ExactNewSet:
			return judgeExactNewSet(c, before, after)
		}
		return indeterminate("UNKNOWN_KIND", fmt.Sprintf("unknown contract kind %q", c.Kind))
	})
}

// judgeFrame is what every judgement shares: the reachability rules
// (JUDGE.md §3.1-2), the kind's kernel, freshness, the expected value, the
// hash and the class.
func judgeFrame(c *Contract, beforeOK bool, beforeReason string, afterOK bool, afterReason string, opts Options, kernel func() Verdict) Verdict {
	var v Verdict
	switch {
	case !afterOK:
		msg := "the system of record could not be read after the action"
		if afterReason != "" {
			msg += ": " + afterReason
		}
		v = indeterminate(ReasonSORUnreachable, msg)
		v.Unavailable = true
	case NeedsBaseline(c) && !beforeOK:
		msg := "the baseline read before the action failed, and this contract needs it"
		if beforeReason != "" {
			msg += ": " + beforeReason
		}
		v = indeterminate(ReasonBaselineUnreachable, msg)
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
	v.Class = Classify(&v, opts.AbsenceNotProof)
	return v
}

func indeterminate(code, message string) Verdict {
	return Verdict{Decision: Indeterminate, Reasons: []Reason{{Code: code, Message: message}}}
}

// matchRecord reports whether r satisfies every pair of sel. A field that is
// missing or null matches nothing.
func matchRecord(r Record, sel []Pair) bool {
	for i := range sel {
		raw, ok := r[sel[i].Field]
		if !ok {
			return false
		}
		if s, isStr := raw.(string); isStr {
			if s != sel[i].Value {
				return false
			}
			continue
		}
		text, has := Canon(raw)
		if !has || text != sel[i].Value {
			return false
		}
	}
	return true
}

// keyMatches applies the idempotency-key filter.
func keyMatches(c *Contract, r Record) bool {
	if c.IdempotencyKey == nil {
		return true
	}
	text, has := Canon(r[c.KeyField])
	return has && text == *c.IdempotencyKey
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

func identityShown(r Record, field string) shownValue {
	if id, ok := fieldIdentity(r, field); ok {
		return shownValue{field: field, quoted: strconv.Quote(id)}
	}
	return shownValue{field: "*", quoted: strconv.Quote(CanonicalJSON(r))}
}

// maxSamples bounds the identities a reason message lists.
const maxSamples = 5

func judgeRecordWritten(c *Contract, before, after Snapshot) Verdict {
	matched := make([]Record, 0, 4)
	lossCount := 0
	var lossSamples []shownValue
	take := func(r Record, inBase bool) {
		if c.CountNewOnly && inBase {
			return
		}
		if matchRecord(r, c.Match) && keyMatches(c, r) {
			matched = append(matched, r)
		}
	}
	if c.CountNewOnly || c.ForbidCollateralLoss {
		reset := func() { matched, lossCount, lossSamples = matched[:0], 0, nil }
		gone := func(r Record) {
			// Collateral loss: a pre-existing record outside the selector
			// that is absent from the whole after read.
			if !c.ForbidCollateralLoss || matchRecord(r, c.Match) {
				return
			}
			lossCount++
			if len(lossSamples) < maxSamples {
				lossSamples = append(lossSamples, identityShown(r, c.IdentityField))
			}
		}
		readDiff(before.Records, after.Records, c.IdentityField, reset, take, gone)
	} else {
		for _, r := range after.Records {
			take(r, false)
		}
	}

	return recordWrittenVerdict(c, matched, lossCount, lossSamples)
}

// recordWrittenVerdict is record_written's verdict from its counted matches
// and its collateral loss.
func recordWrittenVerdict(c *Contract, matched []Record, lossCount int, lossSamples []shownValue) Verdict {
	n := len(matched)
	v := Verdict{Matched: matched, ObservedCount: new(n), ExpectedCount: new(c.ExpectedCount)}
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
	if lossCount > 0 {
		v.Reasons = append(v.Reasons, lossReason(ReasonCollateralLoss,
			fmt.Sprintf("%d pre-existing record(s) outside the selector vanished from the read", lossCount), lossSamples))
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

func judgeFieldEquals(c *Contract, after Snapshot) Verdict {
	var matched []Record
	for _, r := range after.Records {
		if matchRecord(r, c.Match) && keyMatches(c, r) {
			matched = append(matched, r)
		}
	}
	return fieldEqualsVerdict(c, matched)
}

// fieldEqualsVerdict is field_equals' verdict from the matched records.
func fieldEqualsVerdict(c *Contract, matched []Record) Verdict {
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
		text, has := Canon(matched[0][c.Field])
		want := *c.Value
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
	lossCount := 0
	var lossSamples []shownValue
	reset := func() { added, lossCount, lossSamples = added[:0], 0, nil }
	take := func(r Record, inBase bool) {
		// An in-place update keeps its identity: it is not an addition.
		if !inBase && matchRecord(r, c.Match) {
			added = append(added, r)
		}
	}
	gone := func(r Record) {
		if !c.ForbidCollateralLoss || !matchRecord(r, c.Match) {
			return
		}
		lossCount++
		if len(lossSamples) < maxSamples {
			lossSamples = append(lossSamples, identityShown(r, field))
		}
	}
	// Newness is never guessed: a record with no identity on either side
	// makes the verdict INDETERMINATE. The merge join checks every identity
	// as it goes, so the count is only needed when it gives up.
	if !mergeDiff(before.Records, after.Records, field, take, gone) {
		if missing := countMissingIdentities(before.Records, field) + countMissingIdentities(after.Records, field); missing > 0 {
			return indeterminate(ReasonIdentityMissing, fmt.Sprintf(
				"%d record(s) carry no %q value, so added records cannot be told from existing ones", missing, field))
		}
		reset()
		hashDiff(before.Records, after.Records, field, take, gone)
	}

	return exactNewSetVerdict(c, added, lossCount, lossSamples)
}

// exactNewSetVerdict is exact_new_set's verdict from the added records and
// the scope loss.
func exactNewSetVerdict(c *Contract, added []Record, lossCount int, lossSamples []shownValue) Verdict {
	field := c.IdentityField
	n := len(added)
	v := Verdict{Matched: added, ObservedCount: new(n), ExpectedCount: new(c.ExpectedCount)}
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
	if lossCount > 0 {
		v.Reasons = append(v.Reasons, lossReason(ReasonSetScopeLoss,
			fmt.Sprintf("%d pre-existing record(s) in scope vanished from the read", lossCount), lossSamples))
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
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
