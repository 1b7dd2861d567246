package compact

import "strings"

// The comparison types of a contract value (docs/contracts.md §2a), as
// TypedText reads them; the judge's As constants are these.
const (
	AsText    = "text"
	AsDecimal = "decimal"
	AsInteger = "integer"
	AsBoolean = "boolean"
)

// TypedText returns the text a value of JSON kind kind and canonical text
// text compares by under a: the value itself for text (an object or array
// has none: it never equals a contract's text), and the canonical form of
// the parsed value otherwise (docs/contracts.md §2a). ok is false when the value
// does not parse as a, or has no value at all.
//
// The canonical forms make equality of values equality of strings: a
// decimal is the canonical number text of §2 (shortest exact decimal, so
// "1234.50", 1234.5 and "1.2345e3" all read "1234.5"), an integer the same
// text of an integral value, a boolean "true" or "false".
func TypedText(a string, kind ValueKind, text string) (string, bool) {
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
			// Number text is canonical already (Canon, Text).
			d = text
		case KindString:
			var ok bool
			if d, ok = CanonDecimal(text); !ok {
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

// integral reports whether canonical decimal text is a whole number: no
// fraction, and no negative exponent (CanonNumber writes a huge integer
// as digits, 'e' and a positive exponent).
func integral(d string) bool {
	return !strings.ContainsRune(d, '.') && !strings.Contains(d, "e-")
}

// CanonDecimal parses decimal text as §2a writes it,
// [+-]?digits[.digits][(e|E)[+-]digits], and returns the canonical text
// of its exact value (CanonNumber's form). Leading zeros and a '+' are
// allowed here, unlike in JSON.
func CanonDecimal(s string) (string, bool) {
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
	// CanonNumber.
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
	return CanonNumber(b.String()), true
}
