package judge

// EffectResult is one effect's verdict as it is shown: what the conformance
// harness prints for a case, and the leading fields of every result the
// daemon stores, returns and signs in a receipt. Its JSON (names, order,
// and null for an absent count or value) is part of those documents: a
// change here changes every stored result and every receipt, so fields are
// only ever added, never renamed, reordered or dropped.
type EffectResult struct {
	Verdict        Decision `json:"verdict"`
	Result         Class    `json:"result"`
	Reasons        []Reason `json:"reasons"`
	ObservedCount  *int     `json:"observed_count"`
	ExpectedCount  *int     `json:"expected_count"`
	ObservedValue  *string  `json:"observed_value"`
	ExpectedValue  *string  `json:"expected_value"`
	ContractHash   string   `json:"contract_hash"`
	MatchedRecords []Record `json:"matched_records"`
}

// ResultOf shows v: its decision, class, reasons, counts, values, contract
// hash and matched records, with an empty list (never null) for no reasons
// and no matched records.
func ResultOf(v Verdict) EffectResult {
	reasons := v.Reasons
	if reasons == nil {
		reasons = []Reason{}
	}
	matched := v.Matched
	if matched == nil {
		matched = []Record{}
	}
	return EffectResult{
		Verdict: v.Decision, Result: v.Class, Reasons: reasons,
		ObservedCount: v.ObservedCount, ExpectedCount: v.ExpectedCount,
		ObservedValue: v.ObservedValue, ExpectedValue: v.ExpectedValue,
		ContractHash: v.ContractHash, MatchedRecords: matched,
	}
}
