package judge

import (
	"encoding/json"
	"fmt"

	"github.com/verifierd/verifierd/internal/compact"
)

// As is the comparison type of a contract value (docs/contracts.md §2a). The empty
// As is text: canonical-text equality, the comparison of a bare string.
type As string

// Comparison types. A loaded or bound value of type text has the empty As,
// so that writing `as: text` changes nothing, the hash included.
const (
	AsText    As = "text"
	AsDecimal As = "decimal"
	AsInteger As = "integer"
	AsBoolean As = "boolean"
)

// parseAs reads the `as` of a value object.
func parseAs(v any, path string) (As, error) {
	s, ok := v.(string)
	switch As(s) {
	case AsText:
		return "", nil
	case AsDecimal, AsInteger, AsBoolean:
		if ok {
			return As(s), nil
		}
	}
	return "", refuse(path, "as must be one of text, decimal, integer, boolean, got %s", showAny(v))
}

func showAny(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// what names a comparison type in messages ("a decimal").
func (a As) what() string {
	switch a {
	case AsDecimal:
		return "a decimal"
	case AsInteger:
		return "an integer"
	case AsBoolean:
		return "a boolean"
	}
	return "text"
}

// hint says what text of a type looks like, for refusals.
func (a As) hint() string {
	switch a {
	case AsDecimal:
		return `digits with an optional sign, fraction and exponent, such as "1234.50" or "-1.5e3" (no spaces, no thousands separators)`
	case AsInteger:
		return `a whole number such as "24", "24.0" or "-3e2" (no spaces, no thousands separators)`
	case AsBoolean:
		return `true or false, in any case`
	}
	return ""
}

// normalise is the canonical form of a contract's bound text under a.
func normalise(a As, text string) (string, bool) {
	return typedText(a, compact.KindString, text)
}

// typedText is compact.TypedText under a.
func typedText(a As, kind compact.ValueKind, text string) (string, bool) {
	return compact.TypedText(string(a), kind, text)
}

// kindOf is the JSON kind and canonical text of a map-form record value.
func kindOf(v any) (compact.ValueKind, string) {
	switch x := v.(type) {
	case nil:
		return compact.KindNull, ""
	case string:
		return compact.KindString, x
	case bool:
		if x {
			return compact.KindBool, "true"
		}
		return compact.KindBool, "false"
	case map[string]any:
		return compact.KindObject, CanonicalJSON(x)
	case []any:
		return compact.KindArray, CanonicalJSON(x)
	}
	if t, ok := Canon(v); ok {
		return compact.KindNumber, t
	}
	return compact.KindNull, ""
}

// pairHolds reports whether the record value raw (map form; present says
// whether the field is there at all) satisfies the pair.
func pairHolds(raw any, present bool, p *Pair) bool {
	if !present {
		return false
	}
	if p.As == "" {
		if s, isStr := raw.(string); isStr {
			return s == p.Value
		}
	}
	kind, text := kindOf(raw)
	got, ok := typedText(p.As, kind, text)
	return ok && got == p.Value
}
