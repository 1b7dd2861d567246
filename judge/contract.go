package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// Kind names the judgement an effect asks for.
type Kind string

// The three judgements.
const (
	RecordWritten Kind = "record_written"
	FieldEquals   Kind = "field_equals"
	ExactNewSet   Kind = "exact_new_set"
)

// Risk says whether an effect may be compensated.
type Risk string

// Risks.
const (
	Reversible   Risk = "reversible"
	Irreversible Risk = "irreversible"
)

// Error codes of a refusal.
const (
	CodeInvalidContract = "INVALID_CONTRACT"
	CodeUnboundParam    = "UNBOUND_PARAM"
	CodeInvalidCase     = "INVALID_CASE"
)

func refuse(path, format string, args ...any) *refusal.Error {
	return &refusal.Error{Code: CodeInvalidContract, Path: path, Message: fmt.Sprintf(format, args...)}
}

// Value is a contract value: literal text, or a reference to a run parameter
// ({param: name}). The grammar is shared with the daemon and the adapters.
type Value = param.Value

// Selector maps a record field to the value it must have.
type Selector map[string]Value

// Effect is one declared effect contract as written (docs/contracts.md §1), before its
// parameters are bound.
type Effect struct {
	Kind                 Kind
	Match                Selector
	ExpectedCount        int
	CountNewOnly         bool
	NewOnly              bool
	IdempotencyKey       *Value
	KeyField             string
	Field                string
	Value                *Value
	NewRecords           []Selector
	IdentityField        string
	ForbidCollateralLoss bool
	// ForbidOtherWrites (record_written, exact_new_set) refutes any net
	// change in the write set the claim does not make (writeset.go).
	ForbidOtherWrites bool
	Risk              Risk
	TimeoutS          float64
	Probe             string
}

// Defaults of the optional contract keys.
const (
	DefaultKeyField      = "key"
	DefaultIdentityField = "id"
	DefaultTimeoutS      = 5
	MaxTimeoutS          = 3600
)

// ParseEffects reads a YAML or JSON list of effect contracts. path names the
// list in errors (for example "effects").
func ParseEffects(data []byte, path string) ([]Effect, error) {
	tree, err := DecodeDocument(data)
	if err != nil {
		return nil, refuse(path, "cannot parse: %v", err)
	}
	return LoadEffects(tree, path)
}

// LoadEffects loads a decoded list of contracts (see DecodeDocument).
func LoadEffects(tree any, path string) ([]Effect, error) {
	list, ok := tree.([]any)
	if !ok {
		return nil, refuse(path, "must be a list of effect contracts, got %s", param.TypeName(tree))
	}
	out := make([]Effect, 0, len(list))
	for i, item := range list {
		e, err := LoadEffect(item, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// effectDoc is an effect contract as written, for the strict decoder
// (sdk/unstable/strict): its fields are the contract's keys, so an unknown key is
// refused with the keys allowed and the nearest one. A key whose refusal
// says more than its type reads its own value (the *Key types); a string
// or boolean key is typed, and a null there is refused. field, probe,
// idempotency_key and value treat null as absent, so that contracts
// exported with every key (field: null on a record_written) load
// unchanged.
type effectDoc struct {
	Kind                 kindKey    `json:"kind"`
	Match                matchKey   `json:"match"`
	ExpectedCount        countKey   `json:"expected_count"`
	CountNewOnly         bool       `json:"count_new_only"`
	NewOnly              bool       `json:"new_only"`
	IdempotencyKey       valueKey   `json:"idempotency_key"`
	KeyField             string     `json:"key_field"`
	Field                *string    `json:"field"`
	Value                valueKey   `json:"value"`
	NewRecords           *[]any     `json:"new_records"`
	IdentityField        string     `json:"identity_field"`
	ForbidCollateralLoss bool       `json:"forbid_collateral_loss"`
	ForbidOtherWrites    bool       `json:"forbid_other_writes"`
	Risk                 riskKey    `json:"risk"`
	TimeoutS             timeoutKey `json:"timeout_s"`
	Probe                *string    `json:"probe"`
}

type kindKey Kind

func (k *kindKey) UnmarshalTree(v any, path string) error {
	s, isStr := v.(string)
	if !isStr || (Kind(s) != RecordWritten && Kind(s) != FieldEquals && Kind(s) != ExactNewSet) {
		return refuse(path, "bad kind %s; write one of record_written, field_equals, exact_new_set", param.Show(v))
	}
	*k = kindKey(s)
	return nil
}

type matchKey Selector

func (s *matchKey) UnmarshalTree(v any, path string) error {
	sel, err := loadSelector(v, path, true)
	*s = matchKey(sel)
	return err
}

type countKey int

func (c *countKey) UnmarshalTree(v any, path string) error {
	n, err := loadCount(v, path)
	*c = countKey(n)
	return err
}

// valueKey is a contract value; null leaves it unset.
type valueKey struct{ v *Value }

func (k *valueKey) UnmarshalTree(v any, path string) error {
	if v == nil {
		return nil
	}
	val, err := loadValue(v, path)
	k.v = &val
	return err
}

type riskKey Risk

func (r *riskKey) UnmarshalTree(v any, path string) error {
	s, isStr := v.(string)
	if !isStr || (Risk(s) != Reversible && Risk(s) != Irreversible) {
		return refuse(path, "risk must be reversible or irreversible, got %s", param.Show(v))
	}
	*r = riskKey(s)
	return nil
}

type timeoutKey float64

func (t *timeoutKey) UnmarshalTree(v any, path string) error {
	n, isNum := v.(json.Number)
	f, perr := strconv.ParseFloat(string(n), 64)
	if !isNum || perr != nil || math.IsNaN(f) || f < 0 || f > MaxTimeoutS {
		return refuse(path, "timeout_s must be a number of seconds from 0 to %d, got %s", MaxTimeoutS, param.Show(v))
	}
	*t = timeoutKey(f)
	return nil
}

// decodeStrict decodes tree into v with the strict decoder, its refusals
// as the judge's (INVALID_CONTRACT).
func decodeStrict(tree any, path string, v any) error {
	return strict.DecodeRefusal(tree, path, v, CodeInvalidContract)
}

// LoadEffect loads one decoded contract, applying every load-time refusal of
// docs/contracts.md §1. Each refusal names its path and how to fix it.
func LoadEffect(tree any, path string) (Effect, error) {
	if _, ok := tree.(map[string]any); !ok {
		return Effect{}, refuse(path, "an effect contract must be a map, got %s", param.TypeName(tree))
	}
	doc := effectDoc{
		ExpectedCount:        1,
		KeyField:             DefaultKeyField,
		IdentityField:        DefaultIdentityField,
		ForbidCollateralLoss: true,
		Risk:                 riskKey(Reversible),
		TimeoutS:             DefaultTimeoutS,
		Match:                matchKey{},
	}
	if err := decodeStrict(tree, path, &doc); err != nil {
		return Effect{}, err
	}
	if doc.Kind == "" {
		return Effect{}, refuse(join(path, "kind"), "kind is missing; write one of record_written, field_equals, exact_new_set")
	}
	e := Effect{
		Kind:                 Kind(doc.Kind),
		Match:                Selector(doc.Match),
		ExpectedCount:        int(doc.ExpectedCount),
		CountNewOnly:         doc.CountNewOnly,
		NewOnly:              doc.NewOnly,
		IdempotencyKey:       doc.IdempotencyKey.v,
		KeyField:             doc.KeyField,
		IdentityField:        doc.IdentityField,
		ForbidCollateralLoss: doc.ForbidCollateralLoss,
		ForbidOtherWrites:    doc.ForbidOtherWrites,
		Risk:                 Risk(doc.Risk),
		TimeoutS:             float64(doc.TimeoutS),
	}
	if doc.Probe != nil {
		e.Probe = *doc.Probe
	}
	if err := checkKindKeys(&e, &doc, path); err != nil {
		return Effect{}, err
	}
	if e.Kind == ExactNewSet {
		if e.IdentityField == "" {
			return Effect{}, refuse(join(path, "identity_field"), "exact_new_set needs a non-empty identity_field to tell an added record from an existing one (default id)")
		}
		if e.ExpectedCount != len(e.NewRecords) {
			return Effect{}, refuse(join(path, "expected_count"), "exact_new_set declares %d new_records but expected_count is %d; they must be equal (write expected_count: %d)", len(e.NewRecords), e.ExpectedCount, len(e.NewRecords))
		}
	}
	return e, nil
}

// checkKindKeys refuses a key that belongs to another kind, and completes
// e with the keys that belong to its own: field and value (field_equals),
// new_records (exact_new_set).
func checkKindKeys(e *Effect, doc *effectDoc, path string) error {
	if e.CountNewOnly && e.Kind != RecordWritten {
		return refuse(join(path, "count_new_only"), "count_new_only applies only to record_written; remove it (exact_new_set already judges against the baseline)")
	}
	if e.ForbidOtherWrites && e.Kind == FieldEquals {
		return refuse(join(path, "forbid_other_writes"), "forbid_other_writes applies only to record_written and exact_new_set; remove it (a read-back claims no write)")
	}
	if e.NewOnly && e.Kind != FieldEquals {
		return refuse(join(path, "new_only"), "new_only applies only to field_equals; remove it (record_written counts new records with count_new_only, exact_new_set always judges against the baseline)")
	}
	switch {
	case e.Kind != FieldEquals && doc.Field != nil:
		return refuse(join(path, "field"), "field applies only to field_equals; remove it or use kind: field_equals")
	case e.Kind != FieldEquals && doc.Value.v != nil:
		return refuse(join(path, "value"), "value applies only to field_equals; remove it or use kind: field_equals")
	case e.Kind != FieldEquals:
	case doc.Field == nil:
		return refuse(join(path, "field"), "field_equals needs field: the record field to read back")
	case *doc.Field == "":
		return refuse(join(path, "field"), "must name a record field; it is empty")
	case doc.Value.v == nil:
		return refuse(join(path, "value"), `field_equals needs value: the expected text, e.g. value: "Follow-up" or value: {param: note}`)
	default:
		e.Field, e.Value = *doc.Field, doc.Value.v
	}
	if doc.NewRecords == nil {
		return nil
	}
	list, p := *doc.NewRecords, join(path, "new_records")
	if e.Kind != ExactNewSet && len(list) > 0 {
		return refuse(p, "new_records applies only to exact_new_set; remove it or use kind: exact_new_set")
	}
	for i, item := range list {
		sel, err := loadSelector(item, fmt.Sprintf("%s[%d]", p, i), false)
		if err != nil {
			return err
		}
		e.NewRecords = append(e.NewRecords, sel)
	}
	return nil
}

func loadSelector(v any, path string, allowEmpty bool) (Selector, error) {
	m, ok := v.(map[string]any)
	if !ok {
		hint := "write {} for none"
		if !allowEmpty {
			hint = "write a map such as {user_id: \"32\"}"
		}
		return nil, refuse(path, "must be a map of field to value, got %s (%s)", param.TypeName(v), hint)
	}
	if !allowEmpty && len(m) == 0 {
		return nil, refuse(path, "an empty selector names no record; give at least one field: value")
	}
	sel := make(Selector, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val, err := loadValue(m[k], join(path, k))
		if err != nil {
			return nil, err
		}
		sel[k] = val
	}
	return sel, nil
}

// loadValue reads a value with the shared grammar (sdk/param), suggesting a
// number's canonical text when one is written unquoted. A value may be a
// {template: "Patient/{patient_id}"} (the grammar's own placeholders,
// checked by param.CheckTemplate: not empty, every brace around a name). A
// value object may also carry `as` (docs/contracts.md §2a): a literal must
// then parse as that type (a template, like a param, is checked when bound).
func loadValue(v any, path string) (Value, error) {
	var as As
	if m, ok := v.(map[string]any); ok {
		if a, has := m["as"]; has {
			var err error
			if as, err = parseAs(a, join(path, "as")); err != nil {
				return Value{}, err
			}
			rest := make(map[string]any, len(m)-1)
			for k, x := range m {
				if k != "as" {
					rest[k] = x
				}
			}
			if len(rest) == 0 {
				return Value{}, refuse(path, `a value object with as also needs literal or param: write {literal: "2", as: %s} or {param: name, as: %s}`, orText(as), orText(as))
			}
			v = rest
		}
	}
	val, err := param.Parse(v, path, param.NumberText(compact.CanonNumber), param.Templates())
	if err != nil {
		if perr, ok := errors.AsType[*refusal.Error](err); ok {
			return Value{}, refuse(perr.Path, "%s", perr.Message)
		}
		return Value{}, refuse(path, "%s", err.Error())
	}
	if as != "" && !val.IsParam() && !val.IsTemplate() {
		if _, ok := normalise(as, val.Literal); !ok {
			return Value{}, refuse(join(path, "literal"), "%q does not parse as %s; write %s", val.Literal, as.what(), as.hint())
		}
	}
	val.As = string(as)
	return val, nil
}

func orText(a As) As {
	if a == "" {
		return AsText
	}
	return a
}

func loadCount(v any, path string) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, refuse(path, "expected_count must be a whole number >= 0, got %s", param.Show(v))
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		if i < 0 {
			return 0, refuse(path, "expected_count must not be negative, got %s", n)
		}
		if i > math.MaxInt32 {
			return 0, refuse(path, "expected_count %s is too large", n)
		}
		return int(i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, refuse(path, "expected_count must be a whole number >= 0, got %s", n)
	}
	if f < 0 {
		return 0, refuse(path, "expected_count must not be negative, got %s", n)
	}
	if f > math.MaxInt32 {
		return 0, refuse(path, "expected_count %s is too large", n)
	}
	return int(f), nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
