package judge

import (
	"encoding/json"
	"fmt"
	"strings"
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

// typedText returns the text a value of JSON kind kind and canonical text
// text compares by under a: the value itself for text (an object or array
// has none: it never equals a contract's text), and the canonical form of
// the parsed value otherwise (docs/contracts.md §2a). ok is false when the value
// does not parse as a, or has no value at all.
//
// The canonical forms make equality of values equality of strings: a
// decimal is the canonical number text of §2 (shortest exact decimal, so
// "1234.50", 1234.5 and "1.2345e3" all read "1234.5"), an integer the same
// text of an integral value, a boolean "true" or "false".
func typedText(a As, kind ValueKind, text string) (string, bool) {
	switch kind {
	case KindNull, KindObject, KindArray:
		return "", false
	}
	switch a {
	case "", AsText:
		return text, true
	case AsDecimal, AsInteger:
		var d string
		switch kind {
		case KindNumber:
			// Number text is canonical already (Canon, Batch.Text).
			d = text
		case KindString:
			var ok bool
			if d, ok = canonDecimal(text); !ok {
				return "", false
			}
		default:
			return "", false
		}
		if a == AsInteger && !integral(d) {
			return "", false
		}
		return d, true
	case AsBoolean:
		switch kind {
		case KindBool:
			return text, true
		case KindString:
			switch {
			case strings.EqualFold(text, "true"):
				return "true", true
			case strings.EqualFold(text, "false"):
				return "false", true
			}
		}
	}
	return "", false
}

// normalise is the canonical form of a contract's bound text under a.
func normalise(a As, text string) (string, bool) {
	return typedText(a, KindString, text)
}

// integral reports whether canonical decimal text is a whole number: no
// fraction, and no negative exponent (canonNumber writes a huge integer
// as digits, 'e' and a positive exponent).
func integral(d string) bool {
	return !strings.ContainsRune(d, '.') && !strings.Contains(d, "e-")
}

// canonDecimal parses decimal text as §2a writes it,
// [+-]?digits[.digits][(e|E)[+-]digits], and returns the canonical text
// of its exact value (canonNumber's form). Leading zeros and a '+' are
// allowed here, unlike in JSON.
func canonDecimal(s string) (string, bool) {
	i, n := 0, len(s)
	neg := false
	if i < n && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < n && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intDigits := s[intStart:i]
	if intDigits == "" {
		return "", false
	}
	frac := ""
	if i < n && s[i] == '.' {
		i++
		fs := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if frac = s[fs:i]; frac == "" {
			return "", false
		}
	}
	exp := ""
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		es := i
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		ds := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == ds {
			return "", false
		}
		exp = s[es:i]
	}
	if i != n {
		return "", false
	}
	// Rewritten as JSON number text (no '+', no leading zero) for
	// canonNumber.
	intDigits = strings.TrimLeft(intDigits, "0")
	if intDigits == "" {
		intDigits = "0"
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(intDigits)
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	if exp != "" {
		b.WriteByte('e')
		b.WriteString(exp)
	}
	return canonNumber(b.String()), true
}

// kindOf is the JSON kind and canonical text of a map-form record value.
func kindOf(v any) (ValueKind, string) {
	switch x := v.(type) {
	case nil:
		return KindNull, ""
	case string:
		return KindString, x
	case bool:
		if x {
			return KindBool, "true"
		}
		return KindBool, "false"
	case map[string]any:
		return KindObject, CanonicalJSON(x)
	case []any:
		return KindArray, CanonicalJSON(x)
	}
	if t, ok := Canon(v); ok {
		return KindNumber, t
	}
	return KindNull, ""
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
