package session

import (
	"slices"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
)

// contractReads is what the contracts of one read (the effects of a group)
// look at in a record, for sdk.CaptureRequest.ReadFields and
// ExpectedValues: the fields the judge reads and the values it compares
// them with. An adapter may relax, for a field no contract reads, a check
// that protects only that field's value (ui_readback's truncation markers
// and date_format), and may report a value it normalised in the spelling a
// contract expects.
//
// The fields are, per contract, the ones the judge reads (judge.Judge):
// every match field; the field of field_equals; the key_field of an
// idempotency key; the identity field of a contract that tells new
// records from existing ones (judge.NeedsBaseline: the only contracts
// that read it); the fields of exact_new_set's new_records. freshness is
// the candidate's freshness field ("" for none, and for a baseline, which
// freshness does not judge). The values are the bound contract values of
// the same pairs, each once per field, in contract order.
func contractReads(contracts []*judge.Contract, effects []int, freshness string) (fields []string, expected map[string][]string) {
	expected = map[string][]string{}
	field := func(f string) {
		if f != "" && !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	value := func(f, v string) {
		field(f)
		if !slices.Contains(expected[f], v) {
			expected[f] = append(expected[f], v)
		}
	}
	pairs := func(ps []judge.Pair) {
		for _, p := range ps {
			value(p.Field, p.Value)
		}
	}
	for _, i := range effects {
		c := contracts[i]
		pairs(c.Match)
		if c.Kind == judge.FieldEquals {
			field(c.Field)
			if c.Value != nil {
				value(c.Field, *c.Value)
			}
		}
		if c.IdempotencyKey != nil {
			value(c.KeyField, *c.IdempotencyKey)
		}
		if judge.NeedsBaseline(c) {
			field(c.IdentityField)
		}
		for _, sel := range c.NewRecords {
			pairs(sel)
		}
	}
	field(freshness)
	if len(expected) == 0 {
		expected = nil
	}
	return fields, expected
}

// freshnessField is the candidate's freshness field, "" without one.
func freshnessField(f *config.FreshnessSetting) string {
	if f == nil {
		return ""
	}
	return f.Field
}
