package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// HALTED_BEFORE_EFFECT only on proven absence (docs/contracts.md §3a). A
// verdict classed refuted says affirmatively that nothing landed, and a
// step of such verdicts halts before its effect, which invites a retry.
// With a census that claim also needs the collection to be unchanged:
// an identity that appeared in, vanished from or changed in the census
// between the two reads is something that landed, unexplained by the
// contract, and the verdict is classed conflicting instead.

// ReasonUnexplainedChange: a verdict that would say nothing landed, while
// the census saw the collection change between Begin and Verify.
const ReasonUnexplainedChange = "UNEXPLAINED_CHANGE"

// CensusDigestField is the reserved census record key under which the
// daemon keeps, beside the identity fields, a keyed digest of the whole
// record it read, so that a record changed in place changes its census
// record. The judge gives it no meaning of its own: it compares whole
// census records.
const CensusDigestField = "verifierd:digest"

// withUnexplained adds UNEXPLAINED_CHANGE to a verdict that would class
// refuted when changes (asked only then) says the collection changed, by
// source (the census, the write set).
func withUnexplained(v Verdict, source string, changes func() tally) Verdict {
	if v.Decision != Refuted || Classify(&v, Options{}) != ClassRefuted {
		return v
	}
	t := changes()
	if t.n == 0 {
		return v
	}
	v.Reasons = append(v.Reasons, lossReason(ReasonUnexplainedChange, fmt.Sprintf(
		"nothing this contract claims landed, but %d record(s) appeared in, vanished from or changed in the collection (by the %s) between the reads: the action may have landed elsewhere", t.n, source), t.samples))
	v.Unexplained = t.ids
	return v
}

// unexplainedChange tallies the identities that appeared in, vanished from
// or changed in the census. A record changed when the canonical JSON of
// its census records differs; that is judged only when both censuses carry
// more than identities (otherwise only appearing and vanishing are).
func unexplainedChange(c *Contract, cs *Census) tally {
	field := c.IdentityField
	detailed := censusDetailed(cs.Before.Records, field) && censusDetailed(cs.After.Records, field)
	before := censusTexts(cs.Before.Records, field, detailed)
	after := censusTexts(cs.After.Records, field, detailed)
	var t tally
	add := func(id string) {
		t.add(id, func() shownValue { return shownValue{field: field, quoted: strconv.Quote(id)} })
	}
	seen := make(map[string]bool, len(before))
	for _, r := range cs.Before.Records {
		id, _ := fieldIdentity(r, field)
		if seen[id] {
			continue
		}
		seen[id] = true
		if text, ok := after[id]; !ok || text != before[id] {
			add(id)
		}
	}
	for _, r := range cs.After.Records {
		id, _ := fieldIdentity(r, field)
		if _, ok := before[id]; !ok && !seen[id] {
			seen[id] = true
			add(id)
		}
	}
	return t
}

// censusDetailed reports whether some census record carries a field
// other than the identity.
func censusDetailed(recs []Record, field string) bool {
	for _, r := range recs {
		for f := range r {
			if f != field {
				return true
			}
		}
	}
	return false
}

// censusTexts maps each identity of a usable census to the canonical JSON
// of its records (sorted, when several share it), or to "" when only
// identities are compared.
func censusTexts(recs []Record, field string, detailed bool) map[string]string {
	out := make(map[string]string, len(recs))
	var many map[string][]string
	for _, r := range recs {
		id, _ := fieldIdentity(r, field)
		if !detailed {
			out[id] = ""
			continue
		}
		text := CanonicalJSON(r)
		prev, dup := out[id]
		if !dup {
			out[id] = text
			continue
		}
		if many == nil {
			many = map[string][]string{}
		}
		if many[id] == nil {
			many[id] = []string{prev}
		}
		many[id] = append(many[id], text)
	}
	for id, texts := range many {
		slices.Sort(texts)
		out[id] = strings.Join(texts, "\n")
	}
	return out
}
