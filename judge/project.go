package judge

import (
	"fmt"
	"slices"

	"github.com/verifierd/verifierd/internal/compact"
)

// Projection says which parts of a read's records the judgement of a set
// of contracts can look at, so that a RecordStream keeps only those and a
// large read costs a fraction of its size. What JudgeBatch reads of a
// record (judgebatch.go):
//
//   - its identity (the identity_field of every contract that needs the
//     baseline, docs/contracts.md §3.2), to tell added records from pre-existing
//     ones; a record without one is identified by its whole canonical
//     JSON, so it is kept whole;
//   - of a baseline record, whether it matches a contract's selector (the
//     collateral and scope loss rules) and whether it was in scope (the
//     changed-existing-record rule, changed.go): one that matches some
//     selector keeps every selector field and every idempotency key field,
//     one that matches none needs none of them to match none (a selector
//     with a missing field matches nothing, and the empty selector matches
//     every record);
//   - of an after record that matches a contract's selector, everything:
//     it may be counted, read back (field_equals), key-filtered, checked
//     for freshness and shown as evidence. An after record that matches no
//     selector is never counted nor shown: only its identity is read.
//
// A projected record is marked in its batch (compact.Partial), and JudgeBatch
// refuses to judge a contract the projection of either read was not made
// for, or to count a record kept in part (INDETERMINATE, never a guess from
// less information). The read's digest is taken while the record is still
// whole (RecordStream.Digest).
type Projection = compact.Projection

// ProjectBaseline is the projection of a baseline judged by cs.
func ProjectBaseline(cs []*Contract) *Projection { return project(cs, false) }

// ProjectAfter is the projection of an after read judged by cs.
func ProjectAfter(cs []*Contract) *Projection { return project(cs, true) }

func project(cs []*Contract, after bool) *Projection {
	var ids, fields []string
	var ss [][]compact.Sel
	for _, c := range cs {
		if NeedsBaseline(c) && !slices.Contains(ids, c.IdentityField) {
			ids = append(ids, c.IdentityField)
		}
		ss = append(ss, sels(c.Match))
		for _, f := range selFields(c) {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
	}
	return compact.NewProjection(after, ids, ss, fields)
}

// selFields are the fields of a record in c's selector that judging c
// reads: the selector's and, when c has an idempotency key, its key field.
func selFields(c *Contract) []string {
	fs := make([]string, 0, len(c.Match)+1)
	for _, pr := range c.Match {
		fs = append(fs, pr.Field)
	}
	if c.IdempotencyKey != nil && c.Kind != ExactNewSet {
		fs = append(fs, c.KeyField)
	}
	return fs
}

// covers reports whether p was made for c: judging c reads nothing of a
// batch projected by p that p dropped. A nil projection covers everything.
func covers(p *Projection, c *Contract) error {
	if p == nil {
		return nil
	}
	after, ids, ss, fields := compact.Parts(p)
	if NeedsBaseline(c) && !slices.Contains(ids, c.IdentityField) {
		return fmt.Errorf("its identity field %q", c.IdentityField)
	}
	want := sels(c.Match)
	if !slices.ContainsFunc(ss, func(sel []compact.Sel) bool { return slices.Equal(sel, want) }) {
		return fmt.Errorf("its selector")
	}
	if !after {
		for _, f := range selFields(c) {
			if !slices.Contains(fields, f) {
				return fmt.Errorf("its field %q", f)
			}
		}
	}
	return nil
}

// projectionGap names what c would read of before or after that their
// projections dropped, or returns "".
func projectionGap(c *Contract, before, after *Batch) string {
	if err := covers(compact.Proj(before), c); err != nil {
		return "the baseline was kept without " + err.Error()
	}
	if err := covers(compact.Proj(after), c); err != nil {
		return "the after read was kept without " + err.Error()
	}
	return ""
}

// ReasonReadProjected: a read was kept in part for other contracts than
// the one judged (a caller's mistake); the judge does not guess.
const ReasonReadProjected = "READ_PROJECTED"
