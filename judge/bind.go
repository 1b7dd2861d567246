package judge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Pair is one field: value requirement of a bound selector. Under a
// comparison type (As not empty) Value is the canonical form of the typed
// value (see typedText), and a record value matches when its own canonical
// form under As is that text.
type Pair struct {
	Field string
	Value string
	As    As
}

// Contract is an effect with every {param} bound to its run parameter: the
// only form the judge reads. Selectors are kept as field-sorted pairs.
type Contract struct {
	Kind                 Kind
	Match                []Pair
	ExpectedCount        int
	CountNewOnly         bool
	NewOnly              bool
	IdempotencyKey       *string
	KeyAs                As
	KeyField             string
	Field                string
	Value                *string
	ValueAs              As
	NewRecords           [][]Pair
	IdentityField        string
	ForbidCollateralLoss bool
	ForbidOtherWrites    bool
	Risk                 Risk
	TimeoutS             float64
	Probe                string
	// Hash is the contract hash of the bound contract (docs/contracts.md §5).
	Hash string
}

// Bind resolves every {param} reference of e against params. Every missing
// parameter is named in one refusal with code UNBOUND_PARAM; path names the
// effect (for example "effects[0]").
func Bind(e Effect, params map[string]string, path string) (*Contract, error) {
	b := binder{params: params}
	c := &Contract{
		Kind:                 e.Kind,
		ExpectedCount:        e.ExpectedCount,
		CountNewOnly:         e.CountNewOnly,
		NewOnly:              e.NewOnly,
		KeyField:             e.KeyField,
		Field:                e.Field,
		IdentityField:        e.IdentityField,
		ForbidCollateralLoss: e.ForbidCollateralLoss,
		ForbidOtherWrites:    e.ForbidOtherWrites,
		Risk:                 e.Risk,
		TimeoutS:             e.TimeoutS,
		Probe:                e.Probe,
	}
	c.Match = b.selector(e.Match, join(path, "match"))
	if e.IdempotencyKey != nil {
		k := b.value(*e.IdempotencyKey, join(path, "idempotency_key"))
		c.IdempotencyKey, c.KeyAs = &k, asOf(*e.IdempotencyKey)
	}
	if e.Value != nil {
		v := b.value(*e.Value, join(path, "value"))
		c.Value, c.ValueAs = &v, asOf(*e.Value)
	}
	for i, sel := range e.NewRecords {
		c.NewRecords = append(c.NewRecords, b.selector(sel, fmt.Sprintf("%s[%d]", join(path, "new_records"), i)))
	}
	if len(b.missing) == 0 && len(b.unparsed) > 0 {
		u := b.unparsed[0]
		if u.param == "" {
			return nil, refuse(u.path, "%q does not parse as %s; write %s", u.text, u.as.what(), u.as.hint())
		}
		// The value is not quoted: a run parameter may name a subject.
		return nil, &refusal.Error{
			Code: CodeUnboundParam,
			Path: u.path,
			Message: fmt.Sprintf("run parameter %q does not parse as %s, which the contract compares it as; pass %s",
				u.param, u.as.what(), u.as.hint()),
		}
	}
	if len(b.missing) > 0 {
		names := make([]string, 0, len(b.missing))
		seen := map[string]bool{}
		for _, m := range b.missing {
			if !seen[m.name] {
				seen[m.name] = true
				names = append(names, fmt.Sprintf("%q", m.name))
			}
		}
		return nil, &refusal.Error{
			Code: CodeUnboundParam,
			Path: b.missing[0].path,
			Message: fmt.Sprintf("missing run parameter %s: pass it with the run's params (for example --param %s=VALUE); a missing parameter is never a silent non-match",
				strings.Join(names, ", "), b.missing[0].name),
		}
	}
	c.Hash = HashContract(c)
	return c, nil
}

type binder struct {
	params   map[string]string
	missing  []struct{ name, path string }
	unparsed []unparsed
}

// unparsed is a bound value that does not parse as its comparison type.
type unparsed struct {
	param, text, path string
	as                As
}

// value binds v; a typed value becomes the canonical form it compares by.
func (b *binder) value(v Value, path string) string {
	s := v.Literal
	switch {
	case v.IsParam():
		var ok bool
		if s, ok = b.params[v.Param]; !ok {
			b.missing = append(b.missing, struct{ name, path string }{v.Param, join(path, "param")})
			return s
		}
	case v.IsTemplate():
		var ok bool
		if s, ok = b.template(v, join(path, "template")); !ok {
			return s
		}
	}
	if v.As == "" || As(v.As) == AsText {
		return s
	}
	norm, ok := normalise(As(v.As), s)
	if !ok {
		u := unparsed{param: v.Param, text: s, path: join(path, "literal"), as: As(v.As)}
		switch {
		case v.IsParam():
			u.path = join(path, "param")
		case v.IsTemplate():
			u.param, u.path = strings.Join(v.Params(), ", "), join(path, "template")
		}
		b.unparsed = append(b.unparsed, u)
	}
	return norm
}

// template expands v's {name} placeholders from the run's parameters
// (sdk/param's grammar), each value as it is: the contract compares the
// expanded text, as it would the literal it equals. Every parameter the
// run lacks is recorded as missing, as an unbound {param} is.
func (b *binder) template(v Value, path string) (string, bool) {
	bound := true
	for _, name := range v.Params() {
		if _, ok := b.params[name]; !ok {
			b.missing = append(b.missing, struct{ name, path string }{name, path})
			bound = false
		}
	}
	if !bound {
		return "", false
	}
	s, err := v.BindIn(b.params, path, func(s string) (string, error) { return s, nil })
	return s, err == nil
}

// asOf is v's comparison type, empty for text.
func asOf(v Value) As {
	if As(v.As) == AsText {
		return ""
	}
	return As(v.As)
}

func (b *binder) selector(sel Selector, path string) []Pair {
	pairs := make([]Pair, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		pairs = append(pairs, Pair{Field: k, Value: b.value(sel[k], join(path, k)), As: asOf(sel[k])})
	}
	return pairs
}

// HashContract returns "sha256:" and the hex SHA-256 of the bound contract's
// canonical JSON (docs/contracts.md §5). risk, probe and timeout_s are never hashed.
func HashContract(c *Contract) string {
	sum := sha256.Sum256([]byte(HashInput(c)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// HashInput returns the canonical JSON that HashContract digests.
func HashInput(c *Contract) string {
	m := map[string]any{
		"kind":                   string(c.Kind),
		"match":                  pairsMap(c.Match),
		"field":                  nil,
		"value":                  nil,
		"expected_count":         json.Number(strconv.Itoa(c.ExpectedCount)),
		"idempotency_key":        nil,
		"key_field":              c.KeyField,
		"forbid_collateral_loss": c.ForbidCollateralLoss,
	}
	if c.Kind == FieldEquals {
		m["field"] = c.Field
	}
	if c.Value != nil {
		m["value"] = hashValue(*c.Value, c.ValueAs)
	}
	if c.IdempotencyKey != nil {
		m["idempotency_key"] = hashValue(*c.IdempotencyKey, c.KeyAs)
	}
	if c.CountNewOnly {
		m["count_new_only"] = true
	}
	if c.NewOnly {
		m["new_only"] = true
	}
	if c.ForbidOtherWrites {
		m["forbid_other_writes"] = true
	}
	if c.Kind == ExactNewSet {
		members := make([]any, 0, len(c.NewRecords))
		for _, sel := range c.NewRecords {
			members = append(members, pairsMap(sel))
		}
		m["new_records"] = members
		m["identity_field"] = c.IdentityField
	} else if c.IdentityField != DefaultIdentityField {
		m["identity_field"] = c.IdentityField
	}
	return CanonicalJSON(m)
}

func pairsMap(pairs []Pair) map[string]any {
	m := make(map[string]any, len(pairs))
	for _, p := range pairs {
		m[p.Field] = hashValue(p.Value, p.As)
	}
	return m
}

// hashValue is a bound value as the hash covers it: its text, or, under a
// comparison type other than text, {"as": type, "value": canonical form}.
// A text value is always a JSON string in the hash, so a typed value can
// never hash like a text one, and every hash of a contract without `as`
// is what it was before `as` existed.
func hashValue(text string, as As) any {
	if as == "" || as == AsText {
		return text
	}
	return map[string]any{"as": string(as), "value": text}
}

// selectorKey is a stable text for a selector, used to group identical
// exact_new_set members.
func selectorKey(pairs []Pair) string {
	var b strings.Builder
	for _, p := range pairs {
		compact.WriteCanonString(&b, p.Field)
		b.WriteByte(':')
		compact.WriteCanonString(&b, p.Value)
		if p.As != "" {
			b.WriteString(" as ")
			b.WriteString(string(p.As))
		}
		b.WriteByte(',')
	}
	return b.String()
}
