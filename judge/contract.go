package judge

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/internal/editdist"
	"github.com/verifierd/verifierd/judge/internal/compact"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
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

// Error is a refusal: what is wrong (Code, one of the codes below), where,
// and what to write instead. It is the SDK's one refusal (refusal.Error).
type Error = refusal.Error

// Error codes of a refusal.
const (
	CodeInvalidContract = "INVALID_CONTRACT"
	CodeUnboundParam    = "UNBOUND_PARAM"
	CodeInvalidCase     = "INVALID_CASE"
)

func refuse(path, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidContract, Path: path, Message: fmt.Sprintf(format, args...)}
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
	Risk                 Risk
	TimeoutS             float64
	Probe                string
}

// Defaults of the optional contract keys.
const (
	DefaultKeyField      = "key"
	DefaultIdentityField = "id"
	DefaultTimeoutS      = 5
	MaxTimeoutS          = 3600
)

var effectKeys = map[string]bool{
	"kind": true, "match": true, "expected_count": true, "count_new_only": true, "new_only": true,
	"idempotency_key": true, "key_field": true, "field": true, "value": true,
	"new_records": true, "identity_field": true, "forbid_collateral_loss": true,
	"risk": true, "timeout_s": true, "probe": true,
}

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

// LoadEffect loads one decoded contract, applying every load-time refusal of
// docs/contracts.md §1. Each refusal names its path and how to fix it.
func LoadEffect(tree any, path string) (Effect, error) {
	m, ok := tree.(map[string]any)
	if !ok {
		return Effect{}, refuse(path, "an effect contract must be a map, got %s", param.TypeName(tree))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !effectKeys[k] {
			hint := ""
			if s := closestKey(k); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			return Effect{}, refuse(join(path, k), "unknown key %q%s (known keys: %s)", k, hint, knownKeyList())
		}
	}
	e := Effect{
		ExpectedCount:        1,
		KeyField:             DefaultKeyField,
		IdentityField:        DefaultIdentityField,
		ForbidCollateralLoss: true,
		Risk:                 Reversible,
		TimeoutS:             DefaultTimeoutS,
		Match:                Selector{},
	}

	kind, present := m["kind"]
	ks, isStr := kind.(string)
	switch {
	case !present:
		return Effect{}, refuse(join(path, "kind"), "kind is missing; write one of record_written, field_equals, exact_new_set")
	case !isStr || (Kind(ks) != RecordWritten && Kind(ks) != FieldEquals && Kind(ks) != ExactNewSet):
		return Effect{}, refuse(join(path, "kind"), "bad kind %s; write one of record_written, field_equals, exact_new_set", param.Show(kind))
	}
	e.Kind = Kind(ks)

	var err error
	if v, ok := m["match"]; ok {
		if e.Match, err = loadSelector(v, join(path, "match"), true); err != nil {
			return Effect{}, err
		}
	}
	if v, ok := m["expected_count"]; ok {
		if e.ExpectedCount, err = loadCount(v, join(path, "expected_count")); err != nil {
			return Effect{}, err
		}
	}
	if v, ok := m["count_new_only"]; ok {
		if e.CountNewOnly, err = loadBool(v, join(path, "count_new_only")); err != nil {
			return Effect{}, err
		}
		if e.CountNewOnly && e.Kind != RecordWritten {
			return Effect{}, refuse(join(path, "count_new_only"), "count_new_only applies only to record_written; remove it (exact_new_set already judges against the baseline)")
		}
	}
	if v, ok := m["new_only"]; ok {
		if e.NewOnly, err = loadBool(v, join(path, "new_only")); err != nil {
			return Effect{}, err
		}
		if e.NewOnly && e.Kind != FieldEquals {
			return Effect{}, refuse(join(path, "new_only"), "new_only applies only to field_equals; remove it (record_written counts new records with count_new_only, exact_new_set always judges against the baseline)")
		}
	}
	if v, ok := m["idempotency_key"]; ok && v != nil {
		val, err := loadValue(v, join(path, "idempotency_key"))
		if err != nil {
			return Effect{}, err
		}
		e.IdempotencyKey = &val
	}
	if v, ok := m["key_field"]; ok {
		if e.KeyField, err = loadString(v, join(path, "key_field")); err != nil {
			return Effect{}, err
		}
	}
	// A null counts as absent, so that contracts exported with every key
	// (field: null on a record_written) load unchanged.
	hasField := m["field"] != nil
	hasValue := m["value"] != nil
	if e.Kind != FieldEquals {
		if hasField {
			return Effect{}, refuse(join(path, "field"), "field applies only to field_equals; remove it or use kind: field_equals")
		}
		if hasValue {
			return Effect{}, refuse(join(path, "value"), "value applies only to field_equals; remove it or use kind: field_equals")
		}
	} else {
		if !hasField {
			return Effect{}, refuse(join(path, "field"), "field_equals needs field: the record field to read back")
		}
		if e.Field, err = loadString(m["field"], join(path, "field")); err != nil {
			return Effect{}, err
		}
		if e.Field == "" {
			return Effect{}, refuse(join(path, "field"), "must name a record field; it is empty")
		}
		if !hasValue {
			return Effect{}, refuse(join(path, "value"), `field_equals needs value: the expected text, e.g. value: "Follow-up" or value: {param: note}`)
		}
		val, err := loadValue(m["value"], join(path, "value"))
		if err != nil {
			return Effect{}, err
		}
		e.Value = &val
	}
	if v, ok := m["new_records"]; ok && (v != nil || e.Kind == ExactNewSet) {
		list, isList := v.([]any)
		if !isList {
			return Effect{}, refuse(join(path, "new_records"), "must be a list of selectors, got %s", param.TypeName(v))
		}
		if e.Kind != ExactNewSet && len(list) > 0 {
			return Effect{}, refuse(join(path, "new_records"), "new_records applies only to exact_new_set; remove it or use kind: exact_new_set")
		}
		for i, item := range list {
			p := fmt.Sprintf("%s[%d]", join(path, "new_records"), i)
			sel, err := loadSelector(item, p, false)
			if err != nil {
				return Effect{}, err
			}
			e.NewRecords = append(e.NewRecords, sel)
		}
	}
	if v, ok := m["identity_field"]; ok {
		if e.IdentityField, err = loadString(v, join(path, "identity_field")); err != nil {
			return Effect{}, err
		}
	}
	if v, ok := m["forbid_collateral_loss"]; ok {
		if e.ForbidCollateralLoss, err = loadBool(v, join(path, "forbid_collateral_loss")); err != nil {
			return Effect{}, err
		}
	}
	if v, ok := m["risk"]; ok {
		s, isStr := v.(string)
		if !isStr || (Risk(s) != Reversible && Risk(s) != Irreversible) {
			return Effect{}, refuse(join(path, "risk"), "risk must be reversible or irreversible, got %s", param.Show(v))
		}
		e.Risk = Risk(s)
	}
	if v, ok := m["timeout_s"]; ok {
		n, isNum := v.(json.Number)
		f, perr := strconv.ParseFloat(string(n), 64)
		if !isNum || perr != nil || math.IsNaN(f) || f < 0 || f > MaxTimeoutS {
			return Effect{}, refuse(join(path, "timeout_s"), "timeout_s must be a number of seconds from 0 to %d, got %s", MaxTimeoutS, param.Show(v))
		}
		e.TimeoutS = f
	}
	if v, ok := m["probe"]; ok && v != nil {
		if e.Probe, err = loadString(v, join(path, "probe")); err != nil {
			return Effect{}, err
		}
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
// number's canonical text when one is written unquoted. A value object may
// also carry `as` (docs/contracts.md §2a): a literal must then parse as that type.
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
	val, err := param.Parse(v, path, param.NumberText(compact.CanonNumber))
	if err != nil {
		if perr, ok := errors.AsType[*param.Error](err); ok {
			return Value{}, refuse(perr.Path, "%s", perr.Message)
		}
		return Value{}, refuse(path, "%s", err.Error())
	}
	if as != "" && !val.IsParam() {
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

func loadBool(v any, path string) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, refuse(path, "%s must be true or false, got %s", lastKey(path), param.Show(v))
	}
	return b, nil
}

func loadString(v any, path string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", refuse(path, "%s must be a string, got %s", lastKey(path), param.Show(v))
	}
	return s, nil
}

// lastKey is the last key of a path, for messages.
func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func knownKeyList() string {
	return strings.Join(slices.Sorted(maps.Keys(effectKeys)), ", ")
}

// closestKey suggests a known key within edit distance 2 of k.
func closestKey(k string) string {
	best, bestD := "", 3
	for _, known := range slices.Sorted(maps.Keys(effectKeys)) {
		if d := editDistance(k, known); d < bestD {
			best, bestD = known, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	return editdist.Levenshtein([]byte(a), []byte(b))
}
